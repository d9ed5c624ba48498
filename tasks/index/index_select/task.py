"""Row gather (index_select along dimension 0).

Implement `index_select(x, index)`: return a new tensor `out` of shape [K, D] with
`out[i, :] = x[index[i], :]` for every i, like an embedding lookup.

- `x` has shape [N, D] and dtype float32, float16 or bfloat16, on the GPU. It may be
  non-contiguous (for example the first D columns of a wider tensor, or a transposed view).
- `index` is a 1-D int64 tensor of length K with values in [0, N); values may repeat and come in
  any order. K may be larger than N.
- The output has the dtype of `x`. Inputs must not be modified.

The result is compared with `torch.index_select(x, 0, index)`; it is a pure copy, so it must
match exactly (rtol = atol = 0).
"""
import torch

from kbx_ray.taskkit import normal

CATEGORY = "Index"
LEVEL = 2
TOLERANCE = {"float32": (0.0, 0.0), "float16": (0.0, 0.0), "bfloat16": (0.0, 0.0)}


def index_select(x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """PyTorch reference."""
    return torch.index_select(x, 0, index)


CASES = [
    {"name": "fp32_small", "small": True, "n": 1000, "d": 64, "k": 500, "dtype": "float32"},
    {"name": "fp16_repeats_small", "small": True, "n": 77, "d": 129, "k": 300, "dtype": "float16"},
    {"name": "bf16_small", "small": True, "n": 300, "d": 1000, "k": 33, "dtype": "bfloat16"},
    {"name": "single_index_small", "small": True, "n": 50, "d": 300, "k": 1, "dtype": "float32"},
    {"name": "sliced_small", "small": True, "n": 200, "d": 100, "k": 300, "dtype": "float32", "layout": "sliced"},
    {"name": "transposed_small", "small": True, "n": 150, "d": 70, "k": 200, "dtype": "float32",
     "layout": "transposed"},
    {"name": "outliers_small", "small": True, "n": 500, "d": 256, "k": 160, "dtype": "float32", "outliers": True},
    {"name": "embedding_fp16_50304x2048_k32768", "small": False, "n": 50304, "d": 2048, "k": 32768,
     "dtype": "float16"},
    {"name": "fp32_100000x1000_k65536", "small": False, "n": 100000, "d": 1000, "k": 65536, "dtype": "float32"},
    {"name": "bf16_sliced_32000x4096_k16384", "small": False, "n": 32000, "d": 4096, "k": 16384,
     "dtype": "bfloat16", "layout": "sliced"},
]


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """x: standard normal (outliers: 0.1% scaled by 10); index: uniform in [0, N) with repeats.
    Layouts: `sliced` takes the first D columns of an [N, D + 13] tensor; `transposed` is the
    `.t()` view of a contiguous [D, N] tensor."""
    g = torch.Generator(device).manual_seed(seed)
    n, d, k = case["n"], case["d"], case["k"]
    layout = case.get("layout", "contiguous")
    shape = {"contiguous": [n, d], "sliced": [n, d + 13], "transposed": [d, n]}[layout]
    x = normal(g, shape, case.get("outliers"))
    index = torch.randint(0, n, (k,), generator=g, dtype=torch.int64, device=g.device)
    x = x.to(getattr(torch, case["dtype"])).to(device)
    if layout == "sliced":
        x = x[:, :d]
    elif layout == "transposed":
        x = x.t()
    return (x, index.to(device)), {}


def _distinct(rows: int, draws: int) -> int:
    """The expected number of distinct rows among `draws` uniform draws from `rows` (each read once,
    a repeat served from cache)."""
    return round(rows * (1 - (1 - 1 / rows) ** draws)) if rows and draws else 0


def cost(case: dict) -> dict:
    """The output and the index once; the distinct rows drawn read once (a repeated index is
    served from cache). `min_bytes`: whatever indices are drawn, at least one row."""
    n, d, k = case["n"], case["d"], case["k"]
    size = torch.tensor([], dtype=getattr(torch, case["dtype"])).element_size()
    return {"flops": 0, "bytes": (k + _distinct(n, k)) * d * size + 8 * k,
            "min_bytes": (k + min(1, k)) * d * size + 8 * k}
