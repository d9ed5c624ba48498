"""Per-head QK RMSNorm followed by rotate-half rotary embedding (the attention prologue of Qwen3
and similar models), in one pass over q and k.

Implement `qk_norm_rope(q, k, q_weight, k_weight, cos, sin, positions, eps=1e-6)` returning
`(q_out, k_out)`:

- `q` `[T, Hq, D]` and `k` `[T, Hk, D]` share a dtype (float32, float16 or bfloat16), on the GPU;
  their last dimension is contiguous but they may be views into a fused `[T, (Hq + 2 Hk) * D]`
  QKV buffer. `q_weight`, `k_weight` `[D]` have the same dtype. `cos`, `sin` are float32 tables
  `[P, D // 2]`; `positions` is an int64 tensor `[T]` of table rows. D is even.

For every token t (p = positions[t]), every head vector x of q (weight w = q_weight) or of k
(w = k_weight), all in float32 and rounded once at the end:

    y = x / sqrt(mean(x ** 2) + eps) * w                # RMSNorm over the D features of the head
    out[i]          = y[i] * cos[p, i] - y[i + D/2] * sin[p, i]        for i < D / 2
    out[i + D / 2]  = y[i + D/2] * cos[p, i] + y[i] * sin[p, i]

Return two new contiguous tensors with the shapes and dtype of q and k. Inputs must not be
modified. Both are compared with the reference below using the default tolerance for the dtype.
"""
import torch

from kbx_ray.taskkit import family

CATEGORY = "Fusion"
LEVEL = 4


def qk_norm_rope(q: torch.Tensor, k: torch.Tensor, q_weight: torch.Tensor, k_weight: torch.Tensor,
                 cos: torch.Tensor, sin: torch.Tensor, positions: torch.Tensor,
                 eps: float = 1e-6) -> tuple[torch.Tensor, torch.Tensor]:
    """PyTorch reference: float32 math, one rounding to the input dtype."""
    half = cos.shape[-1]
    c = cos[positions][:, None, :]
    s = sin[positions][:, None, :]

    def norm_rope(x, w):
        xf = x.float()
        y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * w.float()
        y1, y2 = y[..., :half], y[..., half:]
        return torch.cat([y1 * c - y2 * s, y2 * c + y1 * s], dim=-1).to(x.dtype)
    return norm_rope(q, q_weight), norm_rope(k, k_weight)


CASES = [
    {"name": "fp32_small", "small": True, "t": 6, "hq": 4, "hk": 2, "d": 16, "dtype": "float32"},
    {"name": "bf16_qkv_small", "small": True, "t": 5, "hq": 4, "hk": 1, "d": 64, "dtype": "bfloat16",
     "fused": True},
    {"name": "fp16_d80_outliers_small", "small": True, "t": 7, "hq": 2, "hk": 2, "d": 80, "dtype": "float16",
     "outliers": True},
    {"name": "t1_qkv_small", "small": True, "t": 1, "hq": 8, "hk": 8, "d": 32, "dtype": "float32", "fused": True},
    {"name": "programs_small", "small": True, "t": 20, "hq": 4, "hk": 2, "d": 64, "dtype": "float32"},
    {"name": "bf16_qwen3_qkv_16384tok_32q8k_128", "small": False, "t": 16384, "hq": 32, "hk": 8, "d": 128,
     "dtype": "bfloat16", "fused": True},
    {"name": "fp16_8192tok_40q8k_128_outliers", "small": False, "t": 8192, "hq": 40, "hk": 8, "d": 128,
     "dtype": "float16", "outliers": True},
    {"name": "fp32_4096tok_16q16k_96", "small": False, "t": 4096, "hq": 16, "hk": 16, "d": 96,
     "dtype": "float32"},
]

# Unseen cases (kbx_ray/unseen.py): D stays even (rotated in halves).
SHAPES = family(multiple={"d": 2})


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """q, k: normal with per-head scales in [0.3, 3) (outliers: 0.1% scaled by 10); weights:
    1 + 0.2 * normal; cos/sin: standard RoPE tables (base 10000) over T + 37 positions;
    positions: a random permutation of table rows. With `fused`, q and k are views into a
    contiguous [T, (Hq + 2Hk) * D] tensor."""
    g = torch.Generator(device).manual_seed(seed)
    t, hq, hk, d = case["t"], case["hq"], case["hk"], case["d"]
    h = hq + 2 * hk
    qkv = torch.randn(t, h, d, generator=g, device=g.device) * (0.3 + 2.7 * torch.rand(t, h, 1, generator=g, device=g.device))
    if case.get("outliers"):
        qkv = torch.where(torch.rand(t, h, d, generator=g, device=g.device) < 0.001, qkv * 10, qkv)
    qw = 1 + 0.2 * torch.randn(d, generator=g, device=g.device)
    kw = 1 + 0.2 * torch.randn(d, generator=g, device=g.device)
    p = t + 37
    inv_freq = 1.0 / (10000.0 ** (torch.arange(0, d, 2, dtype=torch.float64, device=device) / d))
    ang = torch.arange(p, dtype=torch.float64, device=device)[:, None] * inv_freq[None, :]
    positions = torch.randperm(p, generator=g, device=g.device)[:t]
    dtype = getattr(torch, case["dtype"])
    qkv, qw, kw = (x.to(dtype).to(device) for x in (qkv, qw, kw))
    if case.get("fused"):
        flat = qkv.reshape(t, h * d)
        q = flat[:, :hq * d].view(t, hq, d)
        k = flat[:, hq * d:(hq + hk) * d].view(t, hk, d)
    else:
        q, k = qkv[:, :hq].contiguous(), qkv[:, hq:hq + hk].contiguous()
    return (q, k, qw, kw, ang.cos().float().to(device), ang.sin().float().to(device), positions.to(device)), {}


def cost(case: dict) -> dict:
    t, hq, hk, d = case["t"], case["hq"], case["hk"], case["d"]
    n = t * (hq + hk) * d
    size = torch.tensor([], dtype=getattr(torch, case["dtype"])).element_size()
    return {"flops": 9 * n, "bytes": 2 * n * size + 8 * t + 4 * t * d}
