"""Scatter values into a copy of a matrix along a dimension (out-of-place scatter).

Implement `scatter(x, dim, index, src)`: return a new tensor `out`, a copy of the 2-D tensor `x`
in which the entries addressed by `index` along dimension `dim` are replaced by `src`:

    dim == 1:  out[i, index[i, j]] = src[i, j]      for every i < index.shape[0], j < index.shape[1]
    dim == 0:  out[index[i, j], j] = src[i, j]      for every i < index.shape[0], j < index.shape[1]

and out equals x everywhere else. This is `torch.scatter(x, dim, index, src)`.

- Duplicate semantics: the indices are unique along `dim` (for dim == 1, the values of each row
  of `index` are distinct; for dim == 0, those of each column), so no entry is written twice and
  the result is deterministic.
- `x` [R, N] has dtype float32, float16 or bfloat16 and may be non-contiguous (for example a
  transposed matrix). `index` is int64 and contiguous, with index.shape[1 - dim] equal to
  x.shape[1 - dim] and index.shape[dim] <= x.shape[dim] (from a single entry to all of them);
  `src` is contiguous with the shape of `index` and the dtype of `x`. The output is contiguous.
  Inputs must not be modified.

Compared with the PyTorch call above exactly (it is a copy; rtol = atol = 0).
"""
import torch

CATEGORY = "Index"
LEVEL = 3
TOLERANCE = {"float32": (0.0, 0.0), "float16": (0.0, 0.0), "bfloat16": (0.0, 0.0)}


def scatter(x: torch.Tensor, dim: int, index: torch.Tensor, src: torch.Tensor) -> torch.Tensor:
    """PyTorch reference."""
    return torch.scatter(x, dim, index, src)


CASES = [
    {"name": "dim1_fp32_small", "small": True, "r": 40, "n": 100, "k": 30, "dim": 1, "dtype": "float32"},
    {"name": "dim0_fp16_small", "small": True, "r": 64, "n": 33, "k": 50, "dim": 0, "dtype": "float16"},
    {"name": "dim1_full_permutation_bf16_small", "small": True, "r": 12, "n": 77, "k": 77, "dim": 1,
     "dtype": "bfloat16"},
    {"name": "dim1_single_small", "small": True, "r": 50, "n": 40, "k": 1, "dim": 1, "dtype": "float32"},
    {"name": "dim0_transposed_small", "small": True, "r": 45, "n": 60, "k": 20, "dim": 0, "dtype": "float32",
     "transposed": True},
    {"name": "r1_small", "small": True, "r": 1, "n": 40, "k": 10, "dim": 1, "dtype": "float32"},
    {"name": "dim1_fp32_8192x4096_k1024", "small": False, "r": 8192, "n": 4096, "k": 1024, "dim": 1,
     "dtype": "float32"},
    {"name": "dim0_fp16_16384x2048_k8192", "small": False, "r": 16384, "n": 2048, "k": 8192, "dim": 0,
     "dtype": "float16"},
    {"name": "dim1_permutation_bf16_4096x5000", "small": False, "r": 4096, "n": 5000, "k": 5000, "dim": 1,
     "dtype": "bfloat16"},
    {"name": "dim1_transposed_fp32_6000x3000_k600", "small": False, "r": 6000, "n": 3000, "k": 600, "dim": 1,
     "dtype": "float32", "transposed": True},
]


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """x standard normal; src = 10 + standard normal (so scattered entries stand out). index: for
    every row (dim 1) or column (dim 0) the first k entries of a random permutation of the
    positions along dim. A transposed case passes x as the `.t()` view of a contiguous [N, R]."""
    g = torch.Generator(device).manual_seed(seed)
    r, n, k, dim = case["r"], case["n"], case["k"], case["dim"]
    t = case.get("transposed", False)
    x = torch.randn([n, r] if t else [r, n], generator=g, device=g.device)
    if dim == 1:
        index = torch.rand(r, n, generator=g, device=g.device).argsort(dim=1)[:, :k]
    else:  # sort along the contiguous dimension of the keys, then transpose: [k, N]
        index = torch.rand(n, r, generator=g, device=g.device).argsort(dim=1)[:, :k].t()
    src = 10 + torch.randn(index.shape, generator=g, device=g.device)
    dtype = getattr(torch, case["dtype"])
    x, src = x.to(dtype).to(device), src.to(dtype).to(device)
    if t:
        x = x.t()
    return (x, dim, index.contiguous().to(device), src), {}


def cost(case: dict) -> dict:
    r, n, k, dim = case["r"], case["n"], case["k"], case["dim"]
    size = torch.tensor([], dtype=getattr(torch, case["dtype"])).element_size()
    m = k * (r if dim == 1 else n)  # entries replaced (unique along dim): x need not be read there
    # the output written, x read outside the replaced entries, src and index read
    return {"flops": 0, "bytes": (r * n + (r * n - m) + m) * size + 8 * m}
