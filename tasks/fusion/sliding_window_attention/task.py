"""Causal sliding-window attention (Mistral / Gemma local layers), without materializing the
attention matrix: each query sees only the most recent `window` keys.

Implement `sliding_window_attention(q, k, v, window)` for `q`, `k`, `v` `[B, H, S, D]` and a Python
int `window >= 1`, returning a new tensor `[B, H, S, D]` with `scale = 1 / sqrt(D)`; query i
attends to keys j with `i - window < j <= i`:

    s[b, h, i, j] = sum over d of q[b, h, i, d] * k[b, h, j, d] * scale   if i - window < j <= i
                  = -inf                                                   otherwise
    out[b, h, i, :] = sum over j of softmax(s[b, h, i, :])[j] * v[b, h, j, :]   # rounded

- `q`, `k`, `v` share a dtype, float16 or bfloat16, on the GPU; their last dimension is
  contiguous (other dimensions may be strided). S, D and window are arbitrary (D <= 256; the
  window may exceed S, which makes it plain causal attention).
- Visit only the key blocks that intersect a query block's window: the cost must grow like
  S * window, not S**2. Inputs must not be modified.

The result is compared with `scaled_dot_product_attention` with the boolean band mask, using
rtol = atol = 1e-2 for float16 and 2e-2 for bfloat16.
"""
import torch

from kbx_ray.taskkit import family

CATEGORY = "Fusion"
LEVEL = 4
TOLERANCE = {"float16": (1e-2, 1e-2), "bfloat16": (2e-2, 2e-2)}


def sliding_window_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, window: int) -> torch.Tensor:
    """PyTorch reference."""
    s = q.shape[2]
    pos = torch.arange(s, device=q.device)
    dist = pos[:, None] - pos[None, :]
    allowed = (dist >= 0) & (dist < window)
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=allowed)


CASES = [
    {"name": "fp16_small", "small": True, "b": 1, "h": 2, "s": 32, "d": 16, "window": 8, "dtype": "float16"},
    {"name": "odd_window1_small", "small": True, "b": 1, "h": 2, "s": 19, "d": 32, "window": 1,
     "dtype": "float16"},
    {"name": "wide_window_outliers_small", "small": True, "b": 2, "h": 1, "s": 20, "d": 64, "window": 100,
     "dtype": "float16", "outliers": True},
    {"name": "fp16_mistral_2x32x8192x128_w4096", "small": False, "b": 2, "h": 32, "s": 8192, "d": 128,
     "window": 4096, "dtype": "float16"},
    {"name": "bf16_4x16x16384x64_w1024", "small": False, "b": 4, "h": 16, "s": 16384, "d": 64, "window": 1024,
     "dtype": "bfloat16"},
    {"name": "fp16_4x16x5000x128_w777_outliers", "small": False, "b": 4, "h": 16, "s": 5000, "d": 128,
     "window": 777, "dtype": "float16", "outliers": True},
]

# Unseen cases (kbx_ray/unseen.py): D <= 256 by contract.
SHAPES = family(most={"d": 256})


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """q, k, v: standard normal (outliers: 0.1% of q and k scaled by 10)."""
    g = torch.Generator(device).manual_seed(seed)
    b, h, s, d = case["b"], case["h"], case["s"], case["d"]
    dtype = getattr(torch, case["dtype"])
    out = []
    for i in range(3):
        t = torch.randn(b, h, s, d, generator=g, device=g.device)
        if case.get("outliers") and i < 2:
            t = torch.where(torch.rand(b, h, s, d, generator=g, device=g.device) < 0.001, t * 10, t)
        out.append(t.to(dtype).to(device))
    return tuple(out) + (case["window"],), {}


def cost(case: dict) -> dict:
    b, h, s, d, w = case["b"], case["h"], case["s"], case["d"], case["window"]
    w = min(w, s)
    visible = s * w - w * (w - 1) // 2
    return {"flops": 4 * b * h * visible * d, "bytes": 2 * 4 * b * h * s * d}
