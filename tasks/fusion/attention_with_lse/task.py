"""Causal attention that also returns the softmax log-sum-exp of every query row (the flash-
attention forward as used by training and by split/ring attention, which merges partial results
with the LSE), without materializing the attention matrix.

Implement `attention_with_lse(q, k, v)` for `q`, `k`, `v` `[B, H, S, D]`, returning a tuple
`(out, lse)` with `scale = 1 / sqrt(D)`:

    s[b, h, i, j]  = sum over d of q[b, h, i, d] * k[b, h, j, d] * scale   if j <= i, else -inf
    lse[b, h, i]   = log(sum over j of exp(s[b, h, i, j]))                  # float32, natural log
    out[b, h, i, :] = sum over j of exp(s[b, h, i, j] - lse[b, h, i]) * v[b, h, j, :]

- `q`, `k`, `v` share a dtype, float16 or bfloat16, on the GPU; their last dimension is
  contiguous (other dimensions may be strided). S and D are arbitrary (D <= 256).
- `out` has the shape and dtype of q; `lse` is a float32 tensor `[B, H, S]`. Inputs must not be
  modified.

Both outputs are compared with the float32 reference below: `out` with rtol = atol = 1e-2 for
float16 and 2e-2 for bfloat16, `lse` with rtol = 1e-4, atol = 1e-3 (float32; the scores are
computed from the same half-precision inputs, so only accumulation order differs).
"""
import torch

from kbx_ray.taskkit import family

CATEGORY = "Fusion"
LEVEL = 4
TOLERANCE = {"float16": (1e-2, 1e-2), "bfloat16": (2e-2, 2e-2), "float32": (1e-4, 1e-3)}


def attention_with_lse(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """PyTorch reference, in float32."""
    s_len, d = q.shape[-2], q.shape[-1]
    s = (q.float() @ k.float().transpose(-1, -2)) * d ** -0.5
    causal = torch.ones(s_len, s_len, dtype=torch.bool, device=q.device).tril()
    s = s.masked_fill(~causal, float("-inf"))
    lse = torch.logsumexp(s, dim=-1)
    out = torch.exp(s - lse[..., None]) @ v.float()
    return out.to(q.dtype), lse


CASES = [
    {"name": "fp16_small", "small": True, "b": 1, "h": 2, "s": 32, "d": 16, "dtype": "float16"},
    {"name": "odd_bshd_small", "small": True, "b": 2, "h": 1, "s": 21, "d": 32, "dtype": "float16", "bshd": True},
    {"name": "d80_outliers_small", "small": True, "b": 1, "h": 2, "s": 12, "d": 80, "dtype": "float16",
     "outliers": True},
    {"name": "blocks_small", "small": True, "b": 1, "h": 1, "s": 150, "d": 16, "dtype": "float16"},
    {"name": "fp16_1x32x4096x128", "small": False, "b": 1, "h": 32, "s": 4096, "d": 128, "dtype": "float16"},
    {"name": "bf16_8x16x2048x64_bshd", "small": False, "b": 8, "h": 16, "s": 2048, "d": 64, "dtype": "bfloat16",
     "bshd": True},
    {"name": "fp16_4x16x3000x96_outliers", "small": False, "b": 4, "h": 16, "s": 3000, "d": 96,
     "dtype": "float16", "outliers": True},
]

# Unseen cases (kbx_ray/unseen.py): D <= 256 by contract.
SHAPES = family(most={"d": 256})


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """q, k, v: standard normal (outliers: 0.1% of q and k scaled by 10). With `bshd`, each is the
    `.transpose(1, 2)` view of a contiguous [B, S, H, D] tensor."""
    g = torch.Generator(device).manual_seed(seed)
    b, h, s, d = case["b"], case["h"], case["s"], case["d"]
    shape = [b, s, h, d] if case.get("bshd") else [b, h, s, d]
    out = []
    for i in range(3):
        t = torch.randn(shape, generator=g, device=g.device)
        if case.get("outliers") and i < 2:
            t = torch.where(torch.rand(shape, generator=g, device=g.device) < 0.001, t * 10, t)
        t = t.to(getattr(torch, case["dtype"])).to(device)
        out.append(t.transpose(1, 2) if case.get("bshd") else t)
    return tuple(out), {}


def cost(case: dict) -> dict:
    b, h, s, d = case["b"], case["h"], case["s"], case["d"]
    return {"flops": 2 * b * h * s * s * d, "bytes": 2 * 4 * b * h * s * d + 4 * b * h * s}
