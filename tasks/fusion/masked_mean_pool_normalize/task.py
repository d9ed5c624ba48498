"""Masked mean pooling over the sequence followed by L2 normalization (how sentence-embedding
models turn token states into one unit-length embedding per sequence).

Implement `masked_mean_pool_normalize(x, mask)` for token states `x` of shape `[B, S, D]` and an
attention mask `mask` of shape `[B, S]` (bool, True = real token), returning a new float32 tensor
of shape `[B, D]`:

    count[b]  = max(number of True in mask[b], 1e-9)
    emb[b, :] = sum over s with mask[b, s] of x[b, s, :] / count[b]       # float32 accumulation
    out[b, :] = emb[b, :] / max(||emb[b, :]||_2, 1e-12)

- `x` is contiguous with dtype float32, float16 or bfloat16, on the GPU. S and D are arbitrary.
- A sequence whose mask is all False gives a zero row (0 / 1e-9 = 0, then 0 / 1e-12 = 0).
- The output is float32 whatever the dtype of `x`. Inputs must not be modified.

The result is compared with the reference below using rtol = atol = 1e-5 (float32), with float32
accumulation over S.
"""
import torch

CATEGORY = "Fusion"
LEVEL = 3


def masked_mean_pool_normalize(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """PyTorch reference (sentence-transformers' mean pooling + F.normalize), in float32."""
    m = mask.float()[:, :, None]
    summed = (x.float() * m).sum(dim=1)
    count = m.sum(dim=1).clamp_min(1e-9)
    return torch.nn.functional.normalize(summed / count, p=2.0, dim=-1, eps=1e-12)


CASES = [
    {"name": "fp32_small", "small": True, "b": 3, "s": 10, "d": 48, "dtype": "float32"},
    {"name": "fp16_small", "small": True, "b": 2, "s": 33, "d": 40, "dtype": "float16"},
    {"name": "bf16_outliers_empty_row_small", "small": True, "b": 3, "s": 9, "d": 100, "dtype": "bfloat16",
     "outliers": True, "empty_row": True},
    {"name": "s1_wide_small", "small": True, "b": 2, "s": 1, "d": 300, "dtype": "float32"},
    {"name": "fp16_256x512x1024", "small": False, "b": 256, "s": 512, "d": 1024, "dtype": "float16"},
    {"name": "fp32_64x512x768_outliers", "small": False, "b": 64, "s": 512, "d": 768, "dtype": "float32",
     "outliers": True},
    {"name": "bf16_32x2000x4096_empty_row", "small": False, "b": 32, "s": 2000, "d": 4096, "dtype": "bfloat16",
     "empty_row": True},
]


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """x: 0.3 + standard normal (outliers: 0.1% scaled by 10); mask: each sequence keeps a random
    prefix of length 1..S (right padding). With `empty_row`, sequence 1 is fully masked."""
    g = torch.Generator(device).manual_seed(seed)
    b, s, d = case["b"], case["s"], case["d"]
    x = 0.3 + torch.randn(b, s, d, generator=g, device=g.device)
    if case.get("outliers"):
        x = torch.where(torch.rand(b, s, d, generator=g, device=g.device) < 0.001, x * 10, x)
    lengths = torch.randint(1, s + 1, (b,), generator=g, device=g.device)
    if case.get("empty_row"):
        lengths[1] = 0
    mask = torch.arange(s, device=device)[None, :] < lengths[:, None]
    return (x.to(getattr(torch, case["dtype"])).to(device), mask.to(device)), {}


def cost(case: dict) -> dict:
    b, s, d = case["b"], case["s"], case["d"]
    size = torch.tensor([], dtype=getattr(torch, case["dtype"])).element_size()
    # `min_bytes`: masked tokens need not be read; a drawn length may be 1 (0 for the empty row)
    rows = b - (1 if case.get("empty_row") else 0)
    return {"flops": 2 * b * s * d + 3 * b * d, "bytes": b * s * d * size + b * s + 4 * b * d,
            "min_bytes": rows * d * size + b * s + 4 * b * d}
