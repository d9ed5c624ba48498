"""Per-channel fake quantization of a weight matrix (quantize -> clamp -> dequantize, as in
quantization-aware training), floating point in and out.

Implement `fake_quantize_per_channel(w, scale, zero_point, quant_min=-128, quant_max=127)` for a
weight `w` of shape `[N, K]` with one float32 `scale[n] > 0` and one int32 `zero_point[n]` per row
(output channel), returning a new tensor of the shape and dtype of `w`:

    inv = 1.0 / scale[n]                                     # float32
    q   = round(float32(w[n, k]) * inv) + zero_point[n]      # round half to even (torch.round)
    q   = min(max(q, quant_min), quant_max)
    out[n, k] = (q - zero_point[n]) * scale[n]               # float32, rounded once to w.dtype

- `w` has dtype float32, float16 or bfloat16, on the GPU; its rows need not be adjacent (its last
  dimension is contiguous). N and K are arbitrary. Inputs must not be modified.

Checked by `check`: every element must match the reference within the dtype's default tolerance,
except that at most 0.01% of the elements (at least 2) may differ by one quantization step
(rounding ties decided differently by a different but reasonable float32 evaluation order).
"""
import torch

CATEGORY = "Fusion"
LEVEL = 3

_TOL = {torch.float32: (1e-5, 1e-5), torch.float16: (5e-3, 5e-3), torch.bfloat16: (1e-2, 1e-2)}


def fake_quantize_per_channel(w: torch.Tensor, scale: torch.Tensor, zero_point: torch.Tensor,
                              quant_min: int = -128, quant_max: int = 127) -> torch.Tensor:
    """PyTorch reference (the math of torch.fake_quantize_per_channel_affine on axis 0)."""
    inv = 1.0 / scale
    zp = zero_point.float()[:, None]
    q = torch.round(w.float() * inv[:, None]) + zp
    q = q.clamp(quant_min, quant_max)
    return ((q - zp) * scale[:, None]).to(w.dtype)


CASES = [
    {"name": "fp32_small", "small": True, "n": 24, "k": 100, "dtype": "float32"},
    {"name": "fp16_small", "small": True, "n": 16, "k": 130, "dtype": "float16"},
    {"name": "bf16_outliers_small", "small": True, "n": 8, "k": 333, "dtype": "bfloat16", "outliers": True},
    {"name": "fp32_sliced_4bit_small", "small": True, "n": 13, "k": 64, "dtype": "float32", "sliced": True,
     "qmin": -8, "qmax": 7},
    {"name": "programs_small", "small": True, "n": 5, "k": 1100, "dtype": "float32"},
    {"name": "k1_small", "small": True, "n": 7, "k": 1, "dtype": "float32"},
    {"name": "fp32_4096x4096", "small": False, "n": 4096, "k": 4096, "dtype": "float32"},
    {"name": "bf16_14336x4096_outliers", "small": False, "n": 14336, "k": 4096, "dtype": "bfloat16",
     "outliers": True},
    {"name": "fp16_sliced_11008x4100_4bit", "small": False, "n": 11008, "k": 4100, "dtype": "float16",
     "sliced": True, "qmin": -8, "qmax": 7},
]


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """w: normal with per-row std in [0.01, 0.1) (outliers: 0.1% scaled by 10); scale: 0.8 x the
    row's absmax / qmax (so some values clamp); zero_point: random integers in [-3, 3]. A sliced w
    is the first K columns of a tensor 5 columns wider."""
    g = torch.Generator(device).manual_seed(seed)
    n, k = case["n"], case["k"]
    qmin, qmax = case.get("qmin", -128), case.get("qmax", 127)
    width = k + 5 if case.get("sliced") else k
    w = torch.randn(n, width, generator=g, device=g.device) * (0.01 + 0.09 * torch.rand(n, 1, generator=g, device=g.device))
    if case.get("outliers"):
        w = torch.where(torch.rand(n, width, generator=g, device=g.device) < 0.001, w * 10, w)
    w = w.to(getattr(torch, case["dtype"]))
    scale = 0.8 * w[:, :k].float().abs().amax(dim=1) / qmax
    zero_point = torch.randint(-3, 4, (n,), generator=g, dtype=torch.int32, device=g.device)
    w = w.to(device)
    if case.get("sliced"):
        w = w[:, :k]
    kwargs = {"quant_min": qmin, "quant_max": qmax} if "qmin" in case else {}
    return (w, scale.to(device), zero_point.to(device)), kwargs


def cost(case: dict) -> dict:
    n, k = case["n"], case["k"]
    size = torch.tensor([], dtype=getattr(torch, case["dtype"])).element_size()
    return {"flops": 5 * n * k, "bytes": 2 * n * k * size + 8 * n}


def check(out: list, ref: list, case: dict) -> str | None:
    """Default tolerance, except for a few one-step rounding-tie flips (see the docstring)."""
    o, r = out[0], ref[0]
    if o.shape != r.shape or o.dtype != r.dtype:
        return f"expected {r.dtype} {tuple(r.shape)}, got {o.dtype} {tuple(o.shape)}"
    rtol, atol = _TOL[r.dtype]
    o64, r64 = o.double(), r.double()
    if not torch.isfinite(o64).all():
        return "output has non-finite values"
    diff = (o64 - r64).abs()
    bad = diff > atol + rtol * r64.abs()
    n_bad = int(bad.sum())
    if n_bad == 0:
        return None
    if n_bad > max(2, int(1e-4 * r.numel())):
        i = int(bad.flatten().nonzero()[0])
        return (f"{n_bad} of {r.numel()} values off, e.g. flat index {i}: {o64.flatten()[i].item():.6g} vs "
                f"{r64.flatten()[i].item():.6g}")
    # a tie flip moves a value by exactly one step: the step of its row is the smallest nonzero gap
    rows = bad.nonzero()[:, 0].unique()
    for row in rows.tolist():
        vals = r64[row].unique()
        step = (vals[1:] - vals[:-1]).min() if vals.numel() > 1 else vals.abs().max()
        d = diff[row][bad[row]]
        if (d > 1.02 * step + atol + rtol * r64[row].abs().max()).any():
            return f"row {row}: error {float(d.max()):.4g} exceeds one quantization step {float(step):.4g}"
    return None
