"""Layer norm fused with dynamic per-token int8 quantization of its output (the W8A8 input path).

Implement `layernorm_w8a8(x, weight, bias, eps=1e-5)` for float16 `x` [M, D], float16 `weight`
[D] and float16 `bias` [D], returning a tuple `(q, scale)`: a new int8 tensor `q` [M, D] and a new
float32 tensor `scale` [M]. For every row r of x (all arithmetic in float32):

    mean     = sum(r) / D
    var      = sum((r - mean) ** 2) / D                    # biased variance, as nn.LayerNorm
    y        = (r - mean) / sqrt(var + eps) * weight + bias
    scale    = max(max over d of |y[d]|, 1e-8) / 127       # symmetric per-row (per-token) scale
    q[d]     = clamp(round_half_to_even(y[d] / scale), -128, 127)

- Rounding is round-half-to-even (`torch.round`), applied to the float32 quotient y / scale;
  the clamp to [-128, 127] follows it (with this scale |y / scale| <= 127, so the clamp is a
  safeguard). The output int8 is signed; there is no zero point. Dequantize as q * scale.
- M and D are arbitrary (D may exceed 8192; M may be 1). `x` may have strided rows (for example
  the first D columns of a wider tensor). Inputs must not be modified.

Checked by `check`: `scale` within 1e-4 relative of the reference; `q` may differ from the
reference by at most 1 in any element, and by 1 in at most 0.1% of the elements (another order
of the float32 additions moves y by an ulp, which flips the rounding of values within an ulp of
a .5 boundary); the dequantized q * scale must have cosine similarity >= 0.9999 with the
reference's.
"""
import torch

from kbx_ray.taskkit import normal

CATEGORY = "Quantization"
LEVEL = 4


def layernorm_w8a8(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor,
                   eps: float = 1e-5) -> tuple[torch.Tensor, torch.Tensor]:
    """PyTorch reference (float32 throughout)."""
    y = torch.nn.functional.layer_norm(x.float(), (x.shape[-1],), weight.float(), bias.float(), eps)
    scale = y.abs().amax(dim=-1).clamp_min(1e-8) / 127
    q = torch.round(y / scale[:, None]).clamp(-128, 127).to(torch.int8)
    return q, scale


CASES = [
    {"name": "small", "small": True, "m": 4, "d": 256},
    {"name": "odd_small", "small": True, "m": 3, "d": 1000},
    {"name": "one_row_small", "small": True, "m": 1, "d": 4097},
    {"name": "sliced_small", "small": True, "m": 3, "d": 300, "sliced": True},
    {"name": "outliers_eps_small", "small": True, "m": 4, "d": 777, "outliers": True, "eps": 1e-3},
    {"name": "tokens_16384x4096", "small": False, "m": 16384, "d": 4096},
    {"name": "tokens_8192x8192_outliers", "small": False, "m": 8192, "d": 8192, "outliers": True},
    {"name": "sliced_32768x1000", "small": False, "m": 32768, "d": 1000, "sliced": True},
    {"name": "wide_1024x20000", "small": False, "m": 1024, "d": 20000},
]


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """x: normal with per-row offsets (0..2) and scales (0.5..2), outliers scaled by 10 with
    probability 0.001; weight: 1 + 0.3 * normal; bias: 0.3 * normal. A sliced case returns the first
    D columns of a tensor 6 columns wider."""
    g = torch.Generator(device).manual_seed(seed)
    m, d = case["m"], case["d"]
    width = d + 6 if case.get("sliced") else d
    x = normal(g, [m, width], case.get("outliers"))
    x = x * (0.5 + 1.5 * torch.rand(m, 1, generator=g, device=g.device)) + 2 * torch.rand(m, 1, generator=g, device=g.device)
    weight = 1 + 0.3 * torch.randn(d, generator=g, device=g.device)
    bias = 0.3 * torch.randn(d, generator=g, device=g.device)
    x, weight, bias = (t.half().to(device) for t in (x, weight, bias))
    if case.get("sliced"):
        x = x[:, :d]
    kwargs = {"eps": case["eps"]} if "eps" in case else {}
    return (x, weight, bias), kwargs


def cost(case: dict) -> dict:
    m, d = case["m"], case["d"]
    return {"flops": 12 * m * d, "bytes": 2 * m * d + 4 * d + m * d + 4 * m}


def check(out: list, ref: list, case: dict) -> str | None:
    """See the module docstring."""
    if len(out) != 2:
        return f"expected 2 outputs (q, scale), got {len(out)}"
    (q, s), (qr, sr) = out, ref
    for o, r, name in ((q, qr, "q"), (s, sr, "scale")):
        if o.shape != r.shape or o.dtype != r.dtype:
            return f"{name}: expected {r.dtype} {tuple(r.shape)}, got {o.dtype} {tuple(o.shape)}"
    s64, sr64 = s.double(), sr.double()
    if not torch.isfinite(s64).all():
        return "scale has non-finite values"
    bad = (s64 - sr64).abs() > 1e-4 * sr64.abs()
    if bad.any():
        i = int(bad.nonzero()[0])
        return f"{int(bad.sum())} scales off by more than 1e-4 relative, e.g. row {i}: {s64[i]:.8g} vs {sr64[i]:.8g}"
    diff = (q.int() - qr.int()).abs()
    if int(diff.max()) > 1:
        i = int((diff > 1).flatten().nonzero()[0])
        return (f"q differs by {int(diff.max())} (max allowed 1), e.g. flat index {i}: "
                f"{int(q.flatten()[i])} vs {int(qr.flatten()[i])}")
    frac = float((diff > 0).double().mean())
    if frac > 1e-3:
        return f"q differs by 1 in {frac:.2%} of the elements (max allowed 0.1%)"
    dq, dr = q.double() * s64[:, None], qr.double() * sr64[:, None]
    cos = float((dq * dr).sum() / (dq.norm() * dr.norm()).clamp_min(1e-30))
    if cos < 0.9999:
        return f"dequantized cosine {cos:.6f} (need >= 0.9999)"
    return None
