"""RMSNorm fused with dynamic per-token int8 quantization (the SmoothQuant / vLLM
`rms_norm_dynamic_per_token_quant` prologue of a W8A8 linear layer).

Implement `rmsnorm_dynamic_quant(x, weight, eps=1e-6)` for `x` `[M, N]` and `weight` `[N]`,
returning a tuple `(q, scale)`: int8 `q` `[M, N]` and float32 `scale` `[M, 1]`, all math in
float32:

    y[m, :]     = x[m, :] / sqrt(mean(x[m, :] ** 2) + eps) * weight
    scale[m, 0] = max(max over n of |y[m, n]|, 1e-10) / 127
    q[m, n]     = clamp(round(y[m, n] / scale[m, 0]), -127, 127)      # round half to even

- `x` and `weight` share a dtype (float16, bfloat16 or float32) and are contiguous, on the GPU.
  1 <= N <= 16384. The normalized activations should not be written to memory. Inputs must not be
  modified.

Checked by `check`: `scale` within rtol = 1e-5 of the reference; `q` may differ from the
reference by at most 1 anywhere, and in at most 0.1% of the elements (at least 4) — ties and
float32 rounding of y can flip a few roundings; everything else must match exactly.
"""
import torch

from kbx_ray.taskkit import family

CATEGORY = "Fusion"
LEVEL = 4


def rmsnorm_dynamic_quant(x: torch.Tensor, weight: torch.Tensor,
                          eps: float = 1e-6) -> tuple[torch.Tensor, torch.Tensor]:
    """PyTorch reference, in float32."""
    xf = x.float()
    y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * weight.float()
    scale = y.abs().amax(dim=-1, keepdim=True).clamp_min(1e-10) / 127.0
    q = torch.round(y / scale).clamp(-127, 127).to(torch.int8)
    return q, scale


CASES = [
    {"name": "fp16_small", "small": True, "m": 24, "n": 100, "dtype": "float16"},
    {"name": "bf16_small", "small": True, "m": 6, "n": 512, "dtype": "bfloat16"},
    {"name": "fp32_outliers_small", "small": True, "m": 8, "n": 300, "dtype": "float32", "outliers": True},
    {"name": "m1_small", "small": True, "m": 1, "n": 4096, "dtype": "float16"},
    {"name": "programs_small", "small": True, "m": 70, "n": 100, "dtype": "float16"},
    {"name": "fp16_16384x4096", "small": False, "m": 16384, "n": 4096, "dtype": "float16"},
    {"name": "bf16_8192x8192_outliers", "small": False, "m": 8192, "n": 8192, "dtype": "bfloat16",
     "outliers": True},
    {"name": "fp16_32768x5120", "small": False, "m": 32768, "n": 5120, "dtype": "float16"},
]

# Unseen cases (kbx_ray/unseen.py): N <= 16384 by contract.
SHAPES = family(most={"n": 16384})


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """x: normal with per-row scales in [0.2, 5) (outliers: 0.1% scaled by 10); weight:
    1 + 0.3 * normal."""
    g = torch.Generator(device).manual_seed(seed)
    m, n = case["m"], case["n"]
    x = torch.randn(m, n, generator=g, device=g.device) * (0.2 + 4.8 * torch.rand(m, 1, generator=g, device=g.device))
    if case.get("outliers"):
        x = torch.where(torch.rand(m, n, generator=g, device=g.device) < 0.001, x * 10, x)
    w = 1 + 0.3 * torch.randn(n, generator=g, device=g.device)
    dtype = getattr(torch, case["dtype"])
    return (x.to(dtype).to(device), w.to(dtype).to(device)), {}


def cost(case: dict) -> dict:
    m, n = case["m"], case["n"]
    size = torch.tensor([], dtype=getattr(torch, case["dtype"])).element_size()
    return {"flops": 7 * m * n, "bytes": m * n * size + n * size + m * n + 4 * m}


def check(out: list, ref: list, case: dict) -> str | None:
    """Scale within rtol 1e-5; q off by at most one in at most 0.1% of the elements."""
    q, scale = out
    qr, sr = ref
    if q.dtype != torch.int8 or q.shape != qr.shape or scale.shape != sr.shape or scale.dtype != sr.dtype:
        return f"expected int8 {tuple(qr.shape)} and float32 {tuple(sr.shape)}"
    if not torch.isfinite(scale).all():
        return "scale has non-finite values"
    rel = ((scale.double() - sr.double()).abs() / sr.double().abs()).max().item()
    if rel > 1e-5:
        return f"scale relative error {rel:.3g} > 1e-5"
    diff = (q.int() - qr.int()).abs()
    if diff.max().item() > 1:
        i = int((diff > 1).flatten().nonzero()[0])
        return f"q differs by {diff.max().item()} (e.g. flat index {i}: {q.flatten()[i].item()} vs " \
               f"{qr.flatten()[i].item()})"
    n_off = int((diff > 0).sum())
    if n_off > max(4, int(1e-3 * q.numel())):
        return f"{n_off} of {q.numel()} quantized values off by one (allowed {max(4, int(1e-3 * q.numel()))})"
    return None
