"""Batched W8A8 matrix multiplication with per-row and per-column scales.

Implement `bmm_w8a8(a, b, scale_a, scale_b)` for int8 `a` [B, M, K], int8 `b` [B, K, N], float32
`scale_a` [B, M] (one scale per row of each a[p]) and float32 `scale_b` [B, N] (one scale per
column of each b[p]), returning a new float16 tensor `out` [B, M, N]:

    acc[p, i, j] = sum over k of int32(a[p, i, k]) * int32(b[p, k, j])     # exact integer accumulation
    out[p, i, j] = float16( (float32(acc[p, i, j]) * scale_a[p, i]) * scale_b[p, j] )

- Integer semantics: int8 values are signed (-128..127, the inputs use -127..127). Products and
  sums are exact in int32 (|acc| < 2**24 holds for every case, so float32(acc) is exact too).
- Convert acc to float32, multiply by scale_a[p, i] and then by scale_b[p, j] in float32, and
  round the result to float16 with round-to-nearest-even. No clamping is involved.
- B, M, N, K are arbitrary (not multiples of any block size; M may be 1). `b` may be
  non-contiguous: in particular `b[p]` may be the transpose of a contiguous [N, K] matrix (a
  `.transpose(1, 2)` view of a [B, N, K] tensor). Inputs must not be modified.

Checked against the reference below (acc computed exactly in float64) by `check`: every element
must be within 2e-3 relative + 1e-5 absolute of the reference (about two float16 ulps, which
allows another order of the two scale multiplications), with cosine similarity >= 0.999 and
relative L1 error <= 1e-3.
"""
import torch

from kbx_ray.taskkit import int8

CATEGORY = "Quantization"
LEVEL = 4


def bmm_w8a8(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor) -> torch.Tensor:
    """PyTorch reference. float64 products and sums of int8 values are exact here (|acc| < 2**53),
    and float64 bmm exists on CPU and GPU alike, unlike an int32 one."""
    acc = torch.matmul(a.double(), b.double())
    return (acc.float() * scale_a[:, :, None] * scale_b[:, None, :]).to(torch.float16)


CASES = [
    {"name": "small", "small": True, "b": 2, "m": 32, "n": 32, "k": 32},
    {"name": "odd_small", "small": True, "b": 3, "m": 17, "n": 30, "k": 45},
    {"name": "decode_m1_small", "small": True, "b": 2, "m": 1, "n": 48, "k": 64},
    {"name": "b_transposed_small", "small": True, "b": 2, "m": 24, "n": 20, "k": 40, "b_transposed": True},
    {"name": "outliers_small", "small": True, "b": 1, "m": 32, "n": 16, "k": 64, "outliers": True},
    {"name": "tiles_small", "small": True, "b": 2, "m": 136, "n": 140, "k": 300},
    {"name": "decode_k8192_small", "small": True, "b": 2, "m": 4, "n": 64, "k": 8192},
    {"name": "b16_2048x2048x2048", "small": False, "b": 16, "m": 2048, "n": 2048, "k": 2048},
    {"name": "b64_1024x1024x512_bt", "small": False, "b": 64, "m": 1024, "n": 1024, "k": 512,
     "b_transposed": True},
    {"name": "odd_12x1000x3001x1999_outliers", "small": False, "b": 12, "m": 1000, "n": 3001, "k": 1999,
     "outliers": True},
]


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """int8 a and b: round(20 * normal) clamped to [-127, 127] (outliers: 0.1% scaled by 10 first)
    (`kbx_ray.taskkit.int8`); with `b_transposed`, b is `.transpose(1, 2)` of a contiguous
    [B, N, K] tensor. Scales are uniform in [0.5, 1.5] / (400 * sqrt(K)) for a and [0.5, 1.5]
    for b, so outputs are of order 1."""
    g = torch.Generator(device).manual_seed(seed)
    bs, m, n, k = case["b"], case["m"], case["n"], case["k"]
    outliers = case.get("outliers", False)
    bt = case.get("b_transposed", False)
    a = int8(g, [bs, m, k], 20, outliers)
    b = int8(g, [bs, n, k] if bt else [bs, k, n], 20, outliers)
    scale_a = (0.5 + torch.rand(bs, m, generator=g, device=g.device)) / (400 * k ** 0.5)
    scale_b = 0.5 + torch.rand(bs, n, generator=g, device=g.device)
    a, b, scale_a, scale_b = (t.to(device) for t in (a, b, scale_a, scale_b))
    if bt:
        b = b.transpose(1, 2)
    return (a, b, scale_a, scale_b), {}


def cost(case: dict) -> dict:
    bs, m, n, k = case["b"], case["m"], case["n"], case["k"]
    return {"flops": 2 * bs * m * n * k, "bytes": bs * (m * k + k * n + 4 * (m + n) + 2 * m * n)}


def check(out: list, ref: list, case: dict) -> str | None:
    """Strict comparison (see the module docstring)."""
    o, r = out[0], ref[0]
    if o.shape != r.shape or o.dtype != r.dtype:
        return f"expected {r.dtype} {tuple(r.shape)}, got {o.dtype} {tuple(o.shape)}"
    o, r = o.double(), r.double()
    if not torch.isfinite(o).all():
        return "output has non-finite values"
    err = (o - r).abs()
    bad = err > 2e-3 * r.abs() + 1e-5
    if bad.any():
        i = int(bad.flatten().nonzero()[0])
        return (f"{int(bad.sum())} elements off, e.g. flat index {i}: "
                f"{o.flatten()[i].item():.6g} vs {r.flatten()[i].item():.6g}")
    cos = float((o * r).sum() / (o.norm() * r.norm()).clamp_min(1e-30))
    rel_l1 = float(err.sum() / r.abs().sum().clamp_min(1e-30))
    if cos < 0.999 or rel_l1 > 1e-3:
        return f"cosine {cos:.6f} (need >= 0.999), relative L1 {rel_l1:.2e} (need <= 1e-3)"
    return None
