"""W8A8 attention: int8 Q, K, V with per-token and per-channel scales, float softmax.

Implement `attention_w8a8(q, k, v, q_scale, k_scale, v_scale, sm_scale, causal=False)` for int8
`q`, `k`, `v` [B, H, S, D], float32 `q_scale` [B, H, S] and `k_scale` [B, H, S] (one scale per
token of q and of k), float32 `v_scale` [B, H, D] (one scale per channel of v), a Python float
`sm_scale` and a bool `causal`, returning a new float16 tensor `out` [B, H, S, D]. For every
batch b and head h (indices b, h dropped below), with i a query and j a key position:

    acc[i, j] = sum over d of int32(q[i, d]) * int32(k[j, d])        # exact integer accumulation
    s[i, j]   = float32(acc[i, j]) * q_scale[i] * k_scale[j] * sm_scale
    s[i, j]   = -inf where causal and j > i                           # query i sees keys 0..i
    p[i, j]   = exp(s[i, j] - max over j' of s[i, j']) / (sum over j' of exp(s[i, j'] - max))
    out[i, d] = float16( (sum over j of p[i, j] * float32(v[j, d])) * v_scale[d] )

- Integer semantics: int8 values are signed (the inputs use -127..127); q @ k^T is exact in
  int32 (|acc| < 2**24, so float32(acc) is exact). The softmax runs in float32 (an online /
  streaming softmax over key blocks is the expected approach; exp2 with a log2(e) factor folded
  into the scale is fine). For the p @ v product, p may be rounded to float16 and v converted to
  float16 (exact for int8) to use tensor cores, accumulating in float32.
- S is arbitrary (not a multiple of any block size; S may be 1). D is 32, 64 or 128. q, k, v are
  contiguous; the scale tensors are contiguous. Inputs must not be modified.

Checked against the reference below (computed in float64) by `check`: every element must be
within 1e-2 relative + 1e-2 absolute of the reference (outputs are of order 1), with cosine
similarity >= 0.9999, relative L1 error <= 5e-3 and RMSE <= 5e-3 * RMS(reference).
"""
import torch

from kbx_ray.taskkit import family, int8

CATEGORY = "Quantization"
LEVEL = 5


def attention_w8a8(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, q_scale: torch.Tensor, k_scale: torch.Tensor,
                   v_scale: torch.Tensor, sm_scale: float, causal: bool = False) -> torch.Tensor:
    """PyTorch reference, in float64 (int8 products and sums are exact there)."""
    acc = torch.matmul(q.double(), k.double().transpose(-1, -2))
    s = acc * q_scale.double()[..., :, None] * k_scale.double()[..., None, :] * sm_scale
    if causal:
        n = s.shape[-1]
        future = torch.ones(n, n, dtype=torch.bool, device=s.device).triu(1)
        s = s.masked_fill(future, float("-inf"))
    p = torch.softmax(s, dim=-1)
    out = torch.matmul(p, v.double()) * v_scale.double()[..., None, :]
    return out.to(torch.float16)


CASES = [
    {"name": "small", "small": True, "b": 1, "h": 2, "s": 32, "d": 32, "causal": False},
    {"name": "causal_odd_small", "small": True, "b": 1, "h": 1, "s": 45, "d": 64, "causal": True},
    {"name": "one_token_small", "small": True, "b": 2, "h": 2, "s": 1, "d": 32, "causal": False},
    {"name": "outliers_small", "small": True, "b": 1, "h": 1, "s": 40, "d": 32, "causal": False,
     "outliers": True},
    {"name": "prefill_2x16x4096x128", "small": False, "b": 2, "h": 16, "s": 4096, "d": 128, "causal": False},
    {"name": "causal_4x32x2048x128", "small": False, "b": 4, "h": 32, "s": 2048, "d": 128, "causal": True},
    {"name": "odd_causal_8x8x1000x64_outliers", "small": False, "b": 8, "h": 8, "s": 1000, "d": 64,
     "causal": True, "outliers": True},
]

# Unseen cases (kbx_ray/unseen.py): D is one of 32, 64, 128 by contract: held.
SHAPES = family(hold=("d",))


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """q, k, v = round(30 * normal) clamped to [-127, 127] (outliers: 0.1% scaled by 10 first);
    q_scale, k_scale uniform in [0.5, 1.5] / 30 (dequantized q, k of unit scale); v_scale uniform in
    [0.5, 1.5] / 30; sm_scale = 2.5 / sqrt(D), so attention is neither uniform nor one-hot."""
    g = torch.Generator(device).manual_seed(seed)
    b, h, s, d = case["b"], case["h"], case["s"], case["d"]
    outliers = case.get("outliers", False)
    q = int8(g, [b, h, s, d], 30, outliers)
    k = int8(g, [b, h, s, d], 30, outliers)
    v = int8(g, [b, h, s, d], 30, outliers)
    q_scale = (0.5 + torch.rand(b, h, s, generator=g, device=g.device)) / 30
    k_scale = (0.5 + torch.rand(b, h, s, generator=g, device=g.device)) / 30
    v_scale = (0.5 + torch.rand(b, h, d, generator=g, device=g.device)) / 30
    args = tuple(t.to(device) for t in (q, k, v, q_scale, k_scale, v_scale))
    return args + (2.5 / d ** 0.5,), {"causal": case["causal"]}


def cost(case: dict) -> dict:
    b, h, s, d = case["b"], case["h"], case["s"], case["d"]
    pairs = s * (s + 1) // 2 if case["causal"] else s * s
    return {"flops": 4 * b * h * pairs * d, "bytes": b * h * (3 * s * d + 8 * s + 4 * d + 2 * s * d)}


def check(out: list, ref: list, case: dict) -> str | None:
    """Strict comparison (see the module docstring)."""
    o, r = out[0], ref[0]
    if o.shape != r.shape or o.dtype != r.dtype:
        return f"expected {r.dtype} {tuple(r.shape)}, got {o.dtype} {tuple(o.shape)}"
    o, r = o.double(), r.double()
    if not torch.isfinite(o).all():
        return "output has non-finite values"
    err = (o - r).abs()
    bad = err > 1e-2 * r.abs() + 1e-2
    if bad.any():
        i = int(bad.flatten().nonzero()[0])
        return (f"{int(bad.sum())} elements off, e.g. flat index {i}: "
                f"{o.flatten()[i].item():.6g} vs {r.flatten()[i].item():.6g}")
    cos = float((o * r).sum() / (o.norm() * r.norm()).clamp_min(1e-30))
    rel_l1 = float(err.sum() / r.abs().sum().clamp_min(1e-30))
    rmse = float((err ** 2).mean().sqrt())
    rms = float((r ** 2).mean().sqrt())
    if cos < 0.9999 or rel_l1 > 5e-3 or rmse > 5e-3 * rms:
        return (f"cosine {cos:.6f} (need >= 0.9999), relative L1 {rel_l1:.2e} (need <= 5e-3), "
                f"RMSE {rmse:.3g} (need <= {5e-3 * rms:.3g})")
    return None
