"""W8A8 matrix multiplication with per-row and per-column scales.

Implement `matmul_w8a8(a, b, scale_a, scale_b)` for int8 `a` [M, K], int8 `b` [K, N], float32
`scale_a` [M] (one scale per row of a) and float32 `scale_b` [N] (one scale per column of b),
returning a new float16 tensor `out` [M, N]:

    acc[i, j] = sum over k of int32(a[i, k]) * int32(b[k, j])     # exact integer accumulation
    out[i, j] = float16( (float32(acc[i, j]) * scale_a[i]) * scale_b[j] )

- Accumulate exactly (int32; |acc| < 2**31 holds for every case). Convert acc to float32 with
  round-to-nearest-even, multiply by scale_a[i] and then by scale_b[j] in float32, and round the
  result to float16 with round-to-nearest-even.
- M, N, K are arbitrary (not multiples of any block size; M may be 1). `b` may be non-contiguous:
  in particular it may be the transpose of a contiguous [N, K] weight (column-major).
- Inputs must not be modified.

Checked against the reference below (acc computed exactly in float64) by `check`. The integer
part is exact, so the check is strict: every element must be within 2e-3 relative + 1e-5 absolute
of the reference (about two float16 ulps, which allows for a different but reasonable order of the
two scale multiplications), with cosine similarity >= 0.999 and relative L1 error <= 1e-3.
"""
import torch

from kbx_ray.taskkit import int8

CATEGORY = "Quantization"
LEVEL = 4


def matmul_w8a8(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor) -> torch.Tensor:
    """PyTorch reference. float64 products and sums of int8 values are exact here (|acc| < 2**53),
    and float64 matmul exists on CPU and GPU alike, unlike an int32 one."""
    acc = torch.matmul(a.double(), b.double())
    return (acc.float() * scale_a[:, None] * scale_b[None, :]).to(torch.float16)


CASES = [
    {"name": "square_small", "small": True, "m": 128, "n": 128, "k": 128},
    {"name": "odd_small", "small": True, "m": 100, "n": 130, "k": 300},
    {"name": "decode_m1_small", "small": True, "m": 1, "n": 384, "k": 512},
    {"name": "b_transposed_small", "small": True, "m": 64, "n": 96, "k": 200, "b_transposed": True},
    {"name": "outliers_small", "small": True, "m": 80, "n": 64, "k": 256, "outliers": True},
    {"name": "decode_k8192_small", "small": True, "m": 4, "n": 128, "k": 8192},
    {"name": "square_4096", "small": False, "m": 4096, "n": 4096, "k": 4096},
    {"name": "linear_8192x4096x4096_bt", "small": False, "m": 8192, "n": 4096, "k": 4096, "b_transposed": True},
    {"name": "odd_3000x5000x2000", "small": False, "m": 3000, "n": 5000, "k": 2000},
    {"name": "outliers_4096x14336x4096_bt", "small": False, "m": 4096, "n": 14336, "k": 4096,
     "b_transposed": True, "outliers": True},
]


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """int8 a and b: round(20 * normal) clamped to [-127, 127] (outliers: 0.1% scaled by 10 first)
    (`kbx_ray.taskkit.int8`); with `b_transposed`, b is the `.t()` view of a contiguous [N, K]
    tensor. Scales are uniform in [0.5, 1.5] / (400 * sqrt(K)) for a and [0.5, 1.5] for b, so
    outputs are of order 1."""
    g = torch.Generator(device).manual_seed(seed)
    m, n, k = case["m"], case["n"], case["k"]
    outliers = case.get("outliers", False)
    a = int8(g, [m, k], 20, outliers)
    b = int8(g, [n, k] if case.get("b_transposed") else [k, n], 20, outliers)
    scale_a = (0.5 + torch.rand(m, generator=g, device=g.device)) / (400 * k ** 0.5)
    scale_b = 0.5 + torch.rand(n, generator=g, device=g.device)
    a, b, scale_a, scale_b = (t.to(device) for t in (a, b, scale_a, scale_b))
    if case.get("b_transposed"):
        b = b.t()
    return (a, b, scale_a, scale_b), {}


def cost(case: dict) -> dict:
    m, n, k = case["m"], case["n"], case["k"]
    return {"flops": 2 * m * n * k, "bytes": m * k + k * n + 4 * (m + n) + 2 * m * n}


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
