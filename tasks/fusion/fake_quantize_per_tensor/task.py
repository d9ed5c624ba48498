"""Per-tensor affine fake quantization of activations (quantize -> clamp -> dequantize with one
scale and zero point, as in uint8 activation quantization-aware training), floating point in and
out.

Implement `fake_quantize_per_tensor(x, scale, zero_point, quant_min=0, quant_max=255)` with a
Python float `scale > 0` and a Python int `zero_point`, returning a new tensor of the shape and
dtype of `x`:

    inv = 1.0 / scale                               # then used as a float32 number
    q   = round(float32(x) * inv) + zero_point      # round half to even (torch.round)
    q   = min(max(q, quant_min), quant_max)
    out = (q - zero_point) * scale                  # float32, rounded once to x.dtype

- `x` has dtype float32, float16 or bfloat16, on the GPU, any shape; it may be non-contiguous (for
  example a transposed 2-D view). The output may be contiguous. Inputs must not be modified.

Checked by `check`: every element must match the reference within the dtype's default tolerance,
except that at most 0.01% of the elements (at least 2) may differ by one quantization step
(rounding ties decided differently by a different but reasonable float32 evaluation order).
"""
import torch

CATEGORY = "Fusion"
LEVEL = 3

_TOL = {torch.float32: (1e-5, 1e-5), torch.float16: (5e-3, 5e-3), torch.bfloat16: (1e-2, 1e-2)}


def fake_quantize_per_tensor(x: torch.Tensor, scale: float, zero_point: int, quant_min: int = 0,
                             quant_max: int = 255) -> torch.Tensor:
    """PyTorch reference (the math of torch.fake_quantize_per_tensor_affine)."""
    inv = 1.0 / scale
    q = torch.round(x.float() * inv) + zero_point
    q = q.clamp(quant_min, quant_max)
    return ((q - zero_point) * scale).to(x.dtype)


CASES = [
    {"name": "fp32_small", "small": True, "shape": [24, 100], "dtype": "float32"},
    {"name": "fp16_small", "small": True, "shape": [3, 7, 150], "dtype": "float16"},
    {"name": "bf16_outliers_small", "small": True, "shape": [4000], "dtype": "bfloat16", "outliers": True},
    {"name": "transposed_signed_small", "small": True, "shape": [40, 75], "dtype": "float32", "transposed": True,
     "qmin": -128, "qmax": 127},
    {"name": "size1", "small": True, "shape": [1], "dtype": "float32"},
    {"name": "programs_small", "small": True, "shape": [70, 130], "dtype": "float32"},
    {"name": "fp32_16M", "small": False, "shape": [4096, 4096], "dtype": "float32"},
    {"name": "bf16_8x2048x4096_outliers", "small": False, "shape": [8, 2048, 4096], "dtype": "bfloat16",
     "outliers": True},
    {"name": "fp16_transposed_5000x4100", "small": False, "shape": [5000, 4100], "dtype": "float16",
     "transposed": True, "qmin": -128, "qmax": 127},
]


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """x: normal with std 2 plus 1 (outliers: 0.1% scaled by 10). scale = 0.05, zero_point = 100 for
    the uint8 range and 0.04 / 3 for the int8 range, so both ends clamp. With `transposed`, x is
    the `.t()` view of a contiguous tensor of the transposed shape."""
    g = torch.Generator(device).manual_seed(seed)
    shape = case["shape"]
    t_shape = shape[::-1] if case.get("transposed") else shape
    x = 1 + 2 * torch.randn(t_shape, generator=g, device=g.device)
    if case.get("outliers"):
        x = torch.where(torch.rand(t_shape, generator=g, device=g.device) < 0.001, x * 10, x)
    x = x.to(getattr(torch, case["dtype"])).to(device)
    if case.get("transposed"):
        x = x.t()
    if "qmin" in case:
        return (x, 0.04, 3), {"quant_min": case["qmin"], "quant_max": case["qmax"]}
    return (x, 0.05, 100), {}


def cost(case: dict) -> dict:
    n = 1
    for s in case["shape"]:
        n *= s
    size = torch.tensor([], dtype=getattr(torch, case["dtype"])).element_size()
    return {"flops": 5 * n, "bytes": 2 * n * size}


def check(out: list, ref: list, case: dict) -> str | None:
    """Default tolerance, except for a few one-step rounding-tie flips (see the docstring)."""
    o, r = out[0], ref[0]
    if o.shape != r.shape or o.dtype != r.dtype:
        return f"expected {r.dtype} {tuple(r.shape)}, got {o.dtype} {tuple(o.shape)}"
    rtol, atol = _TOL[r.dtype]
    step = 0.04 if "qmin" in case else 0.05
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
    worst = diff[bad] - (atol + rtol * r64[bad].abs())
    if (worst > 1.02 * step).any():
        return f"error {float(diff[bad].max()):.4g} exceeds one quantization step {step}"
    return None
