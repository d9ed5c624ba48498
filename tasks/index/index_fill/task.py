"""In-place index fill along a dimension (index_fill_).

Implement `index_fill(x, dim, index, value)`: fill, in place, every slice of `x` at the positions
`index` along dimension `dim` with the scalar `value`, and return None. For a 2-D `x` and dim = 1
this is `x[:, index[k]] = value` for every k; in general

    x.select(dim, index[k]).fill_(value)     for every k

which is `x.index_fill_(dim, index, value)`. Everything else in `x` stays exactly as it was.

- `x` has 2 or 3 dimensions and dtype float32, float16 or bfloat16; it may be a non-contiguous
  view (for example a transposed matrix), in which case the view's elements are what change.
- `dim` is a valid dimension (0, 1 or 2; negative values are not used). `index` is a 1-D int64
  tensor with values in [0, x.shape[dim]); values may repeat and come in any order; it may hold a
  single index or thousands. `value` is a Python float, stored in the dtype of
  x (rounded as PyTorch rounds it).
- `index` must not be modified.

The final state of `x` is compared with the reference's exactly (rtol = atol = 0).
"""
import torch

CATEGORY = "Index"
LEVEL = 2
MUTATES = ("x",)
TOLERANCE = {"float32": (0.0, 0.0), "float16": (0.0, 0.0), "bfloat16": (0.0, 0.0)}


def index_fill(x: torch.Tensor, dim: int, index: torch.Tensor, value: float) -> None:
    """PyTorch reference (in place)."""
    x.index_fill_(dim, index, value)


CASES = [
    {"name": "rows_fp32_small", "small": True, "shape": [100, 37], "dim": 0, "k": 20, "dtype": "float32",
     "value": -1.5},
    {"name": "cols_fp16_small", "small": True, "shape": [33, 129], "dim": 1, "k": 40, "dtype": "float16",
     "value": 3.14159},
    {"name": "3d_middle_bf16_small", "small": True, "shape": [4, 30, 17], "dim": 1, "k": 7, "dtype": "bfloat16",
     "value": 0.1},
    {"name": "3d_last_single_small", "small": True, "shape": [3, 8, 50], "dim": 2, "k": 1, "dtype": "float32",
     "value": 100.0},
    {"name": "transposed_repeats_small", "small": True, "shape": [40, 60], "dim": 1, "k": 90, "dtype": "float32",
     "value": -7.25, "transposed": True},
    {"name": "vector_small", "small": True, "shape": [50], "dim": 0, "k": 7, "dtype": "float32", "value": 2.5},
    {"name": "fp32_inexact_value_small", "small": True, "shape": [20, 30], "dim": 0, "k": 5, "dtype": "float32", "value": 0.1},
    {"name": "rows_fp32_16384x4096_k3000", "small": False, "shape": [16384, 4096], "dim": 0, "k": 3000,
     "dtype": "float32", "value": 0.5},
    {"name": "cols_fp16_8192x8192_k2000", "small": False, "shape": [8192, 8192], "dim": 1, "k": 2000,
     "dtype": "float16", "value": -2.0},
    {"name": "3d_middle_bf16_64x4096x256_k1000", "small": False, "shape": [64, 4096, 256], "dim": 1, "k": 1000,
     "dtype": "bfloat16", "value": 1e-3},
    {"name": "transposed_fp32_6000x7000_k5000", "small": False, "shape": [6000, 7000], "dim": 0, "k": 5000,
     "dtype": "float32", "value": 9.0, "transposed": True},
]


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """x standard normal; index uniform in [0, x.shape[dim]) with repeats. A transposed case draws
    the 2-D shape reversed and passes its `.t()` view."""
    g = torch.Generator(device).manual_seed(seed)
    shape = list(case["shape"])
    t = case.get("transposed", False)
    x = torch.randn(shape[::-1] if t else shape, generator=g, device=g.device)
    index = torch.randint(0, shape[case["dim"]], (case["k"],), generator=g, dtype=torch.int64, device=g.device)
    x = x.to(getattr(torch, case["dtype"])).to(device)
    if t:
        x = x.t()
    return (x, case["dim"], index.to(device), case["value"]), {}


def cost(case: dict) -> dict:
    n = 1
    for s in case["shape"]:
        n *= s
    filled = n // case["shape"][case["dim"]] * case["k"]
    size = torch.tensor([], dtype=getattr(torch, case["dtype"])).element_size()
    # `min_bytes`: a repeated index fills its slice once, and the k indices may all repeat one
    return {"flops": 0, "bytes": filled * size + 8 * case["k"],
            "min_bytes": n // case["shape"][case["dim"]] * min(1, case["k"]) * size + 8 * case["k"]}
