"""Gated, grouped RMSNorm (Mamba-2's `RMSNormGated` with the gate applied before the norm).

Implement `rmsnorm_gated(x, z, weight, group_size, eps=1e-5)`. With `D = x.shape[-1]` and
`G = group_size` (G divides D), all in float32:

    y = x * silu(z) = x * z / (1 + exp(-z))            # elementwise gate
    split every row of y into D // G consecutive groups of G elements; for each group g:
        y_g = y_g / sqrt(mean(y_g ** 2) + eps)
    out = y * weight                                    # weight [D]; rounded once to x.dtype

- `x` and `z` have shape `[..., D]` and the same dtype (float32, float16 or bfloat16), on the GPU;
  `weight` has shape `[D]` and the same dtype. `x` is contiguous. The last dimension of `z` is
  contiguous but its rows need not be adjacent (in Mamba-2, z is a column slice of the input
  projection's output). G may equal D (one group per row); G <= 8192.
- Return a new tensor with the shape and dtype of `x`. Inputs must not be modified.

The result is compared with the reference below using the default tolerance for the dtype.
"""
import torch

from kbx_ray.taskkit import family, normal

CATEGORY = "Fusion"
LEVEL = 3


def rmsnorm_gated(x: torch.Tensor, z: torch.Tensor, weight: torch.Tensor, group_size: int,
                  eps: float = 1e-5) -> torch.Tensor:
    """PyTorch reference: float32 math, one rounding to the input dtype."""
    d = x.shape[-1]
    y = x.float() * torch.nn.functional.silu(z.float())
    yg = y.reshape(*y.shape[:-1], d // group_size, group_size)
    yg = yg * torch.rsqrt(yg.pow(2).mean(-1, keepdim=True) + eps)
    return (yg.reshape(y.shape) * weight.float()).to(x.dtype)


CASES = [
    {"name": "fp32_small", "small": True, "shape": [8, 96], "group": 32, "dtype": "float32"},
    {"name": "fp16_3d_small", "small": True, "shape": [2, 5, 128], "group": 128, "dtype": "float16"},
    {"name": "bf16_outliers_small", "small": True, "shape": [6, 300], "group": 100, "dtype": "bfloat16",
     "outliers": True},
    {"name": "z_sliced_small", "small": True, "shape": [10, 160], "group": 40, "dtype": "float32",
     "z_sliced": True},
    {"name": "programs_small", "small": True, "shape": [70, 96], "group": 32, "dtype": "float32"},
    {"name": "bf16_8192x5120_g640", "small": False, "shape": [8192, 5120], "group": 640, "dtype": "bfloat16",
     "z_sliced": True},
    {"name": "fp16_4x2048x4096_g4096_outliers", "small": False, "shape": [4, 2048, 4096], "group": 4096,
     "dtype": "float16", "outliers": True},
    {"name": "fp32_16384x2560_g320", "small": False, "shape": [16384, 2560], "group": 320, "dtype": "float32"},
]

# Unseen cases (kbx_ray/unseen.py): D stays a multiple of the group size.
SHAPES = family(multiple={"shape.-1": "group"}, most={"group": 8192})


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """x: standard normal (outliers: 0.1% scaled by 10); z: 1.5 * normal; weight: 1 + 0.2 * normal.
    With `z_sliced`, z is the second half of a contiguous [..., 2D] tensor whose first half is
    unrelated data."""
    g = torch.Generator(device).manual_seed(seed)
    shape = list(case["shape"])
    d = shape[-1]
    x = normal(g, shape, case.get("outliers"))
    zfull = 1.5 * torch.randn(shape[:-1] + [2 * d] if case.get("z_sliced") else shape, generator=g, device=g.device)
    weight = 1 + 0.2 * torch.randn(d, generator=g, device=g.device)
    dtype = getattr(torch, case["dtype"])
    x, zfull, weight = (t.to(dtype).to(device) for t in (x, zfull, weight))
    z = zfull[..., d:] if case.get("z_sliced") else zfull
    return (x, z, weight, case["group"]), {}


def cost(case: dict) -> dict:
    n = 1
    for s in case["shape"]:
        n *= s
    size = torch.tensor([], dtype=getattr(torch, case["dtype"])).element_size()
    return {"flops": 9 * n, "bytes": (3 * n + case["shape"][-1]) * size}
