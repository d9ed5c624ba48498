"""Fused multiply-add of three tensors.

Implement `mul_add(x, y, z)`: return `x * y + z` as a new tensor, computed in float32 and rounded
once to the input dtype (a fused multiply-add in float32 is fine):

    out = x * y + z

- `x`, `y` and `z` have the same shape and dtype (float32, float16 or bfloat16), on the GPU. No
  broadcasting. Any of them may be a non-contiguous 2-D view (for example a transposed matrix);
  the output is a new tensor of the same shape (it may be contiguous).
- Read each input once and write the output once. Inputs must not be modified and the output must
  not share memory with them.

The result is compared with the reference below using the default tolerance for the dtype.
"""
import torch

from kbx_ray.taskkit import normal

CATEGORY = "Fusion"
LEVEL = 2


def mul_add(x: torch.Tensor, y: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
    """PyTorch reference: float32 arithmetic, one rounding to the input dtype."""
    return torch.addcmul(z.float(), x.float(), y.float()).to(x.dtype)


CASES = [
    {"name": "fp32_small", "small": True, "shape": [37, 61], "dtype": "float32"},
    {"name": "fp16_outliers_small", "small": True, "shape": [4001], "dtype": "float16", "outliers": True},
    {"name": "bf16_small", "small": True, "shape": [2, 3, 500], "dtype": "bfloat16"},
    {"name": "size1", "small": True, "shape": [1], "dtype": "float32"},
    {"name": "transposed_small", "small": True, "shape": [40, 75], "dtype": "float32", "transposed": True},
    {"name": "programs_small", "small": True, "shape": [70, 130], "dtype": "float32"},
    {"name": "fp32_16M", "small": False, "shape": [16777216], "dtype": "float32"},
    {"name": "fp16_8x1024x4096_outliers", "small": False, "shape": [8, 1024, 4096], "dtype": "float16",
     "outliers": True},
    {"name": "bf16_4100x5120", "small": False, "shape": [4100, 5120], "dtype": "bfloat16"},
    {"name": "fp32_transposed_4000x4100", "small": False, "shape": [4000, 4100], "dtype": "float32",
     "transposed": True},
]


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """x, y, z: standard normal (outliers: 0.1% of x scaled by 10). With `transposed`, x and z are
    `.t()` views of contiguous tensors of the transposed shape; y is contiguous."""
    g = torch.Generator(device).manual_seed(seed)
    shape = case["shape"]
    t_shape = shape[::-1] if case.get("transposed") else shape
    x = normal(g, t_shape, case.get("outliers"))
    y = torch.randn(shape, generator=g, device=g.device)
    z = torch.randn(t_shape, generator=g, device=g.device)
    dtype = getattr(torch, case["dtype"])
    x, y, z = (t.to(dtype).to(device) for t in (x, y, z))
    if case.get("transposed"):
        x, z = x.t(), z.t()
    return (x, y, z), {}


def cost(case: dict) -> dict:
    n = 1
    for s in case["shape"]:
        n *= s
    size = torch.tensor([], dtype=getattr(torch, case["dtype"])).element_size()
    return {"flops": 2 * n, "bytes": 4 * n * size}
