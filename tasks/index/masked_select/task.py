"""Select the elements where a mask is true (masked_select): an output of data-dependent size.

Implement `masked_select(x, mask)`: for `x` and a bool `mask` of the same shape, return a new 1-D
tensor of the dtype of `x` holding the elements x[p] with mask[p] true, in row-major order of
the logical index p (the last index varies fastest), whatever the memory layout of `x`:

    out = [x[p] for p in all indices of x in row-major (C) order if mask[p]]

Its length is the number of true elements, between 0 and x.numel(). This is
`torch.masked_select(x, mask)`.

- The output size is not known before the mask has been counted: a good kernel counts per block,
  turns the counts into offsets with a prefix sum, reads the total (one host synchronization is
  fine for allocating the output) and then writes each selected element at its offset. The
  result must not depend on scheduling.
- `x` has 1 to 3 dimensions and dtype float32, float16 or int32; it may be non-contiguous (for
  example a transposed matrix: the output order is still row-major in the transposed view). `mask`
  is contiguous. Masks range from nearly empty to nearly full, and may select nothing. Inputs must
  not be modified.

Compared with the PyTorch call above exactly (shape, dtype and every value; rtol = atol = 0).
"""
import torch

CATEGORY = "Index"
LEVEL = 4
STRUCTURE = ("mask",)  # the mask's count sizes the output
TOLERANCE = {"float32": (0.0, 0.0), "float16": (0.0, 0.0)}


def masked_select(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """PyTorch reference."""
    return torch.masked_select(x, mask)


CASES = [
    {"name": "half_fp32_small", "small": True, "shape": [37, 41], "p": 0.5, "dtype": "float32"},
    {"name": "sparse_fp16_1d_small", "small": True, "shape": [3001], "p": 0.03, "dtype": "float16"},
    {"name": "dense_int32_3d_small", "small": True, "shape": [3, 17, 29], "p": 0.97, "dtype": "int32"},
    {"name": "transposed_small", "small": True, "shape": [30, 50], "p": 0.3, "dtype": "float32",
     "transposed": True},
    {"name": "all_true_small", "small": True, "shape": [7, 130], "p": 1.0, "dtype": "float32"},
    {"name": "single_hit_small", "small": True, "shape": [2000], "p": 0.0, "dtype": "float32", "one_hit": True},
    {"name": "half_fp32_16M", "small": False, "shape": [4096, 4096], "p": 0.5, "dtype": "float32"},
    {"name": "sparse_fp16_64M", "small": False, "shape": [67108864], "p": 0.01, "dtype": "float16"},
    {"name": "dense_int32_3d_8x2048x1025", "small": False, "shape": [8, 2048, 1025], "p": 0.9, "dtype": "int32"},
    {"name": "transposed_fp32_5000x3001", "small": False, "shape": [5000, 3001], "p": 0.25, "dtype": "float32",
     "transposed": True},
]


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """x: standard normal (float) or uniform integers in [-1000, 1000) (int32); mask true with
    probability p (`one_hit`: exactly one true element at a random position). A transposed case
    draws x with the 2-D shape reversed and passes its `.t()` view."""
    g = torch.Generator(device).manual_seed(seed)
    shape = list(case["shape"])
    t = case.get("transposed", False)
    xs = shape[::-1] if t else shape
    if case["dtype"] == "int32":
        x = torch.randint(-1000, 1000, xs, generator=g, dtype=torch.int32, device=g.device)
    else:
        x = torch.randn(xs, generator=g, device=g.device).to(getattr(torch, case["dtype"]))
    mask = torch.rand(shape, generator=g, device=g.device) < case["p"]
    if case.get("one_hit"):
        n = mask.numel()
        hit = int(torch.randint(0, n, (1,), generator=g, device=g.device))
        mask = (torch.arange(n, device=device) == hit).reshape(shape)
    x = x.to(device)
    if t:
        x = x.t()
    return (x, mask.to(device)), {}


def cost(case: dict) -> dict:
    n = 1
    for s in case["shape"]:
        n *= s
    size = torch.tensor([], dtype=getattr(torch, case["dtype"])).element_size()
    selected = int(n * case["p"])
    # `min_bytes`: the mask, and x only where selected (read once, written once); a Bernoulli mask
    # may select anything from none to all (p = 1 selects all; one_hit exactly one)
    least = n if case["p"] >= 1 else int(bool(case.get("one_hit")))
    return {"flops": 0, "bytes": n * size + n + selected * size, "min_bytes": n + 2 * least * size}
