"""Select between two tensors under a condition, with broadcasting (where + expand).

Implement `expand_where(cond, x, y)`: return a new tensor `out` with
`out = torch.where(cond, x, y)`: the three inputs are broadcast against each other (standard
broadcasting, as if each were expanded to the common shape) and

    out[p] = x[p] if cond[p] else y[p]      for every index p of the broadcast shape

- `cond` is bool; `x` and `y` have the same floating dtype (float32, float16 or bfloat16), which
  is the output dtype. The broadcast shape has 2 to 4 dimensions; any input may have size-1
  dimensions or fewer dimensions than the result (for example cond [B, 1, N], x [M, N],
  y [B, M, 1]). The output is contiguous and must not alias any input. Inputs must not be
  modified.

Compared with the PyTorch call above exactly (a selection; rtol = atol = 0).
"""
import torch

CATEGORY = "Index"
LEVEL = 1
TOLERANCE = {"float32": (0.0, 0.0), "float16": (0.0, 0.0), "bfloat16": (0.0, 0.0)}


def expand_where(cond: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """PyTorch reference."""
    return torch.where(cond, x, y)


CASES = [
    {"name": "same_shape_small", "small": True, "cond": [30, 70], "x": [30, 70], "y": [30, 70], "dtype": "float32"},
    {"name": "row_col_bcast_fp16_small", "small": True, "cond": [40, 1], "x": [40, 33], "y": [33],
     "dtype": "float16"},
    {"name": "3d_mixed_bf16_small", "small": True, "cond": [3, 1, 20], "x": [17, 20], "y": [3, 17, 1],
     "dtype": "bfloat16"},
    {"name": "scalar_like_y_small", "small": True, "cond": [2, 3, 5, 7], "x": [2, 3, 5, 7], "y": [1],
     "dtype": "float32"},
    {"name": "mask_attention_4d_small", "small": True, "cond": [1, 1, 12, 12], "x": [2, 3, 12, 12],
     "y": [1], "dtype": "float32"},
    {"name": "programs_small", "small": True, "cond": [50, 70], "x": [50, 70], "y": [50, 70], "dtype": "float32"},
    {"name": "c1_small", "small": True, "cond": [6, 1], "x": [6, 1], "y": [1], "dtype": "float32"},
    {"name": "same_shape_fp32_16M", "small": False, "cond": [4096, 4096], "x": [4096, 4096], "y": [4096, 4096],
     "dtype": "float32"},
    {"name": "attention_mask_fp16_8x32x1024x1024", "small": False, "cond": [1, 1, 1024, 1024],
     "x": [8, 32, 1024, 1024], "y": [1], "dtype": "float16"},
    {"name": "3d_mixed_bf16_64x2048x1000", "small": False, "cond": [64, 1, 1000], "x": [2048, 1000],
     "y": [64, 2048, 1], "dtype": "bfloat16"},
]


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """cond true with probability 0.5; x standard normal; y = 5 + standard normal (so the two
    branches are distinguishable)."""
    g = torch.Generator(device).manual_seed(seed)
    dtype = getattr(torch, case["dtype"])
    cond = torch.rand(case["cond"], generator=g, device=g.device) < 0.5
    x = torch.randn(case["x"], generator=g, device=g.device).to(dtype)
    y = (5 + torch.randn(case["y"], generator=g, device=g.device)).to(dtype)
    return (cond.to(device), x.to(device), y.to(device)), {}


def cost(case: dict) -> dict:
    shape = torch.broadcast_shapes(tuple(case["cond"]), tuple(case["x"]), tuple(case["y"]))
    n = 1
    for s in shape:
        n *= s
    size = torch.tensor([], dtype=getattr(torch, case["dtype"])).element_size()

    def numel(s: list) -> int:
        k = 1
        for d in s:
            k *= d
        return k

    # `min_bytes`: only the picked side need be read; each element read serves at most n / numel
    # outputs of its operand, so at least min(numel(x), numel(y)) are read, whatever cond holds
    return {"flops": n, "bytes": numel(case["cond"]) + (numel(case["x"]) + numel(case["y"]) + n) * size,
            "min_bytes": numel(case["cond"]) + (min(numel(case["x"]), numel(case["y"])) + n) * size}
