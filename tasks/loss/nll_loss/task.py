"""Negative log-likelihood loss with ignored targets (mean reduction).

Implement `nll_loss(input, target, ignore_index=-100)`: for float32 `input` [N, C] holding
log-probabilities and int64 `target` [N], return a new 0-dim float32 tensor holding

    valid  = { i : target[i] != ignore_index }
    result = -(sum over i in valid of input[i, target[i]]) / |valid|

This is `torch.nn.functional.nll_loss(input, target, ignore_index=ignore_index)`
(reduction="mean", no class weights): ignored rows contribute neither to the sum nor to the count.

- N >= 1 and C >= 2 are arbitrary. Every non-ignored target lies in [0, C); at least one target
  is not ignored. Only N elements of `input` need to be read. `input` may have strided rows (for
  example the first C columns of a wider tensor, or the transpose of a [C, N] tensor).
- Accumulate in float32. Two calls on the same inputs must return bit-identical results (no
  floating-point atomics in an arbitrary order). Do all the computation, the final division
  included, on the GPU. Inputs must not be modified.

Compared with the PyTorch call above with rtol = atol = 1e-4 (the order of the additions is free).
"""
import torch

CATEGORY = "Loss"
LEVEL = 3
TOLERANCE = {"float32": (1e-4, 1e-4)}


def nll_loss(input: torch.Tensor, target: torch.Tensor, ignore_index: int = -100) -> torch.Tensor:
    """PyTorch reference."""
    return torch.nn.functional.nll_loss(input, target, ignore_index=ignore_index)


CASES = [
    {"name": "small", "small": True, "n": 300, "c": 10, "ignore": 0.1},
    {"name": "one_row_small", "small": True, "n": 1, "c": 1000, "ignore": 0.0},
    {"name": "custom_ignore_index_small", "small": True, "n": 2000, "c": 7, "ignore": 0.3, "ignore_index": 3},
    {"name": "sliced_small", "small": True, "n": 500, "c": 37, "ignore": 0.05, "layout": "sliced"},
    {"name": "transposed_small", "small": True, "n": 257, "c": 20, "ignore": 0.2, "layout": "transposed"},
    {"name": "tokens_4194304x16", "small": False, "n": 4194304, "c": 16, "ignore": 0.1},
    {"name": "sliced_1048576x50", "small": False, "n": 1048576, "c": 50, "ignore": 0.25, "layout": "sliced"},
    {"name": "transposed_8388608x4_ignore_idx1", "small": False, "n": 8388608, "c": 4, "ignore": 0.2,
     "ignore_index": 1, "layout": "transposed"},
]


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """input = -8 * uniform (log-probability-like values in (-8, 0]); target uniform in [0, C)
    except a fraction `ignore` of rows set to ignore_index (-100 by default; a custom case uses a
    valid class index: rows whose drawn class equals it are then ignored as well). Layouts:
    `sliced` takes the first C columns of an [N, C + 5] tensor; `transposed` is the `.t()` view of
    a contiguous [C, N] tensor."""
    g = torch.Generator(device).manual_seed(seed)
    n, c = case["n"], case["c"]
    layout = case.get("layout", "contiguous")
    shape = {"contiguous": [n, c], "sliced": [n, c + 5], "transposed": [c, n]}[layout]
    inp = -8 * torch.rand(shape, generator=g, device=g.device)
    target = torch.randint(0, c, (n,), generator=g, dtype=torch.int64, device=g.device)
    ignore_index = case.get("ignore_index", -100)
    ign = torch.rand(n, generator=g, device=g.device) < case["ignore"]
    ign[0] = False  # at least one valid row
    target = torch.where(ign, ignore_index, target)
    inp = inp.to(device)
    if layout == "sliced":
        inp = inp[:, :c]
    elif layout == "transposed":
        inp = inp.t()
    kwargs = {"ignore_index": ignore_index} if "ignore_index" in case else {}
    return (inp, target.to(device)), kwargs


def cost(case: dict) -> dict:
    n = case["n"]
    # `min_bytes`: an ignored row's input is not read; any share but row 0 may be ignored
    return {"flops": n, "bytes": 4 * n + 8 * n + 4, "min_bytes": 4 * (n if case["ignore"] == 0 else 1) + 8 * n + 4}
