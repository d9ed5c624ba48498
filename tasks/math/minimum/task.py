"""Elementwise minimum of two tensors, NaN-propagating.

Implement `minimum(x, y)`: return a new tensor, elementwise over the broadcast operands,

    out = min(x, y)

- `x` and `y` are tensors of one dtype (float32, float16 or bfloat16) on the GPU whose shapes
  broadcast together (NumPy/PyTorch rules, e.g. [N, M] with [M], or [N, 1] with [1, M]); the
  result has the broadcast shape and that dtype and is a new contiguous tensor. Operands may be
  non-contiguous (transposed views, strided slices such as `t[..., ::2]`).
- For float16/bfloat16 inputs compute in float32 and round the result once to the input dtype.
- If either operand is NaN the result is NaN (unlike C fmin). Exact: the result is one of the
  inputs.
- The inputs must not be modified and the output must not share memory with them.

The result is compared with `torch.minimum(x, y)`: shape and dtype must match exactly, NaN and
infinities must sit in the same places, and finite values must agree within the default tolerance
for the dtype (float32 rtol = atol = 1e-5, float16 5e-3, bfloat16 1e-2).
"""
import torch

CATEGORY = "Math"
LEVEL = 2


def minimum(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """PyTorch reference."""
    return torch.minimum(x, y)


CASES = [
    {"name": "fp32_same_shape_small", "small": True, "shapes": [[37, 101], [37, 101]], "dtype": "float32"},
    {"name": "fp16_row_broadcast_small", "small": True, "shapes": [[33, 100], [100]], "dtype": "float16"},
    {"name": "bf16_outer_small", "small": True, "shapes": [[40, 1], [1, 70]], "dtype": "bfloat16"},
    {"name": "fp32_3d_broadcast_small", "small": True, "shapes": [[4, 1, 50], [9, 1]], "dtype": "float32"},
    {"name": "scalar_like_small", "small": True, "shapes": [[1], [3001]], "dtype": "float32"},
    {"name": "transposed_small", "small": True, "shapes": [[33, 65], [33, 65]], "views": ["t", None],
     "dtype": "float32"},
    {"name": "strided_small", "small": True, "shapes": [[5, 300], [5, 300]], "views": [None, "s"],
     "dtype": "float16"},
    {"name": "outliers_small", "small": True, "shapes": [[4001], [4001]], "dtype": "float32", "outliers": True},
    {"name": "fp32_nans_small", "small": True, "shapes": [[30, 70], [70]], "dtype": "float32", "nans": True},
    {"name": "fp32_16M", "small": False, "shapes": [[4096, 4096], [4096, 4096]], "dtype": "float32"},
    {"name": "fp16_bias_16M_outliers", "small": False, "shapes": [[4096, 4096], [4096]], "dtype": "float16",
     "outliers": True},
    {"name": "bf16_outer_16M", "small": False, "shapes": [[4096, 1], [1, 4096]], "dtype": "bfloat16"},
    {"name": "fp32_transposed_16M", "small": False, "shapes": [[4000, 4200], [4000, 4200]],
     "views": ["t", None], "dtype": "float32"},
    {"name": "fp32_nans_16M", "small": False, "shapes": [[4096, 4096], [4096]], "dtype": "float32",
     "nans": True},
    {"name": "bf16_nans_outer_16M", "small": False, "shapes": [[4096, 1], [1, 4096]], "dtype": "bfloat16",
     "nans": True},
]


def _draw(g: torch.Generator, shape: list, view, outliers: bool) -> torch.Tensor:
    """Standard normal values in the storage shape of one operand (outliers: 0.1% of them scaled
    by 10). A transposed operand ("t") draws its last two dimensions swapped, a strided one ("s")
    twice its last dimension."""
    shape = list(shape)
    if view == "t":
        shape[-1], shape[-2] = shape[-2], shape[-1]
    elif view == "s":
        shape[-1] *= 2
    z = torch.randn(shape, generator=g, device=g.device)
    if outliers:
        z = torch.where(torch.rand(shape, generator=g, device=g.device) < 0.001, z * 10, z)
    return z


def _finish(x: torch.Tensor, view, dtype: torch.dtype, device: str) -> torch.Tensor:
    """Cast, move to the device, and take the operand's view (.transpose(-1, -2) or [..., ::2])."""
    x = x.to(dtype).to(device)
    if view == "t":
        return x.transpose(-1, -2)
    if view == "s":
        return x[..., ::2]
    return x


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """Standard normal values (outliers: 0.1% scaled by 10); a nans case sets 2% of each operand to
    NaN."""
    g = torch.Generator(device).manual_seed(seed)
    dtype = getattr(torch, case["dtype"])
    views = case.get("views", [None] * 2)
    zs = [_draw(g, s, v, case.get("outliers", False)) for s, v in zip(case["shapes"], views)]
    x, y = zs
    if case.get("nans"):  # 2% NaN in each operand
        x = torch.where(torch.rand(x.shape, generator=g, device=g.device) < 0.02, float("nan"), x)
        y = torch.where(torch.rand(y.shape, generator=g, device=g.device) < 0.02, float("nan"), y)
    tensors = (x, y)
    return tuple(_finish(t, v, dtype, device) for t, v in zip(tensors, views)), {}


def cost(case: dict) -> dict:
    numels = []
    for shape in case["shapes"]:
        n = 1
        for s in shape:
            n *= s
        numels.append(n)
    out = 1
    for sizes in zip(*[[1] * (max(map(len, case["shapes"])) - len(s)) + list(s) for s in case["shapes"]]):
        out *= max(sizes)
    size = torch.tensor([], dtype=getattr(torch, case["dtype"])).element_size()
    return {"flops": 1 * out, "bytes": (sum(numels) + out) * size}
