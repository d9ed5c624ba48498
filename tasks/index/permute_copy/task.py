"""Materialize a permutation of the dimensions (permute + contiguous copy).

Implement `permute_copy(x, dims)`: return a new contiguous tensor `out` equal to
`x.permute(dims)`, i.e. with out.shape[k] = x.shape[dims[k]] and

    out[i_0, ..., i_{n-1}] = x[j_0, ..., j_{n-1}]   where j_{dims[k]} = i_k

This is `torch.permute(x, dims).contiguous()` (torch.permute_copy).

- `x` has 2 to 4 dimensions and dtype float32, float16 or bfloat16; `dims` is a list of ints, a
  permutation of range(x.dim()) (for example [1, 0] for a transpose, [0, 2, 3, 1] for NCHW ->
  NHWC, [0, 2, 1, 3] to split attention heads). `x` is contiguous except where a case says
  otherwise (a sliced view). The output must be a freshly written contiguous tensor. Inputs must
  not be modified.
- A transpose that moves the contiguous dimension reads and writes with different fast axes: a
  good kernel tiles both so that loads and stores are coalesced.

Compared with the PyTorch call above exactly (a copy; rtol = atol = 0).
"""
import torch

CATEGORY = "Index"
LEVEL = 3
TOLERANCE = {"float32": (0.0, 0.0), "float16": (0.0, 0.0), "bfloat16": (0.0, 0.0)}


def permute_copy(x: torch.Tensor, dims: list[int]) -> torch.Tensor:
    """PyTorch reference."""
    return torch.permute(x, dims).contiguous()


CASES = [
    {"name": "transpose_fp32_small", "small": True, "shape": [37, 53], "dims": [1, 0], "dtype": "float32"},
    {"name": "nchw_to_nhwc_fp16_small", "small": True, "shape": [1, 5, 7, 9], "dims": [0, 2, 3, 1],
     "dtype": "float16"},
    {"name": "heads_bf16_small", "small": True, "shape": [1, 9, 4, 16], "dims": [0, 2, 1, 3], "dtype": "bfloat16"},
    {"name": "reverse_3d_small", "small": True, "shape": [6, 11, 13], "dims": [2, 1, 0], "dtype": "float32"},
    {"name": "identity_sliced_small", "small": True, "shape": [20, 30], "dims": [0, 1], "dtype": "float32",
     "sliced": True},
    {"name": "size1_dims_small", "small": True, "shape": [1, 40, 1, 25], "dims": [3, 2, 1, 0], "dtype": "float32"},
    {"name": "transpose_fp32_8192x8192", "small": False, "shape": [8192, 8192], "dims": [1, 0],
     "dtype": "float32"},
    {"name": "nchw_to_nhwc_fp16_64x256x56x56", "small": False, "shape": [64, 256, 56, 56], "dims": [0, 2, 3, 1],
     "dtype": "float16"},
    {"name": "heads_bf16_8x2048x32x128", "small": False, "shape": [8, 2048, 32, 128], "dims": [0, 2, 1, 3],
     "dtype": "bfloat16"},
    {"name": "reverse_fp32_257x511x129", "small": False, "shape": [257, 511, 129], "dims": [2, 1, 0],
     "dtype": "float32"},
]


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """Standard normal values. A sliced case passes the first columns of a tensor 7 columns wider."""
    g = torch.Generator(device).manual_seed(seed)
    shape = list(case["shape"])
    full = shape[:-1] + [shape[-1] + 7] if case.get("sliced") else shape
    x = torch.randn(full, generator=g, device=g.device).to(getattr(torch, case["dtype"])).to(device)
    if case.get("sliced"):
        x = x[..., :shape[-1]]
    return (x, list(case["dims"])), {}


def cost(case: dict) -> dict:
    n = 1
    for s in case["shape"]:
        n *= s
    size = torch.tensor([], dtype=getattr(torch, case["dtype"])).element_size()
    return {"flops": 0, "bytes": 2 * n * size}
