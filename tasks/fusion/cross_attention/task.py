"""Cross-attention: queries from one sequence attend to keys/values of another (a diffusion UNet
attending to text embeddings, an encoder-decoder attending to the encoder output), non-causal,
without materializing the attention matrix.

Implement `cross_attention(q, k, v, scale=None)` for `q` `[B, H, Sq, D]` and `k`, `v`
`[B, H, Sk, D]` (Sq and Sk independent), returning a new tensor `[B, H, Sq, D]`; `scale` is a
Python float, or None for `1 / sqrt(D)`:

    s[b, h, i, j] = sum over d of q[b, h, i, d] * k[b, h, j, d] * scale      # float32
    out[b, h, i, :] = sum over j of softmax(s[b, h, i, :])[j] * v[b, h, j, :]  # rounded to the dtype

- `q`, `k`, `v` share a dtype, float16 or bfloat16, on the GPU. Their last dimension is
  contiguous; the other dimensions may be strided (for example `[B, S, H, D]` tensors viewed with
  `.transpose(1, 2)`). Sq, Sk and D are arbitrary (Sk may be small, such as 77 text tokens; D <=
  256, possibly not a power of two, such as 40). Inputs must not be modified.

The result is compared with `torch.nn.functional.scaled_dot_product_attention` using rtol = atol =
1e-2 for float16 and 2e-2 for bfloat16.
"""
import torch

from kbx_ray.taskkit import family

CATEGORY = "Fusion"
LEVEL = 4
TOLERANCE = {"float16": (1e-2, 1e-2), "bfloat16": (2e-2, 2e-2)}


def cross_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float | None = None) -> torch.Tensor:
    """PyTorch reference."""
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, scale=scale)


CASES = [
    {"name": "fp16_small", "small": True, "b": 1, "h": 2, "sq": 32, "sk": 7, "d": 16, "dtype": "float16"},
    {"name": "d40_bshd_small", "small": True, "b": 2, "h": 1, "sq": 20, "sk": 13, "d": 40, "dtype": "float16",
     "bshd": True, "scale": 0.2},
    {"name": "sq1_outliers_small", "small": True, "b": 2, "h": 2, "sq": 1, "sk": 30, "d": 32, "dtype": "float16",
     "outliers": True},
    {"name": "fp16_sd15_16x8x4096x77x40", "small": False, "b": 16, "h": 8, "sq": 4096, "sk": 77, "d": 40,
     "dtype": "float16"},
    {"name": "bf16_16x10x1024x77x64_bshd", "small": False, "b": 16, "h": 10, "sq": 1024, "sk": 77, "d": 64,
     "dtype": "bfloat16", "bshd": True},
    {"name": "fp16_whisper_16x20x448x1500x64_outliers", "small": False, "b": 16, "h": 20, "sq": 448, "sk": 1500,
     "d": 64, "dtype": "float16", "outliers": True},
]

# Unseen cases (kbx_ray/unseen.py): D <= 256 by contract.
SHAPES = family(most={"d": 256})


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """q, k, v: standard normal (outliers: 0.1% of q and k scaled by 10). With `bshd`, each is the
    `.transpose(1, 2)` view of a contiguous [B, S, H, D] tensor."""
    g = torch.Generator(device).manual_seed(seed)
    b, h, sq, sk, d = case["b"], case["h"], case["sq"], case["sk"], case["d"]
    out = []
    for i, s in enumerate((sq, sk, sk)):
        shape = [b, s, h, d] if case.get("bshd") else [b, h, s, d]
        t = torch.randn(shape, generator=g, device=g.device)
        if case.get("outliers") and i < 2:
            t = torch.where(torch.rand(shape, generator=g, device=g.device) < 0.001, t * 10, t)
        t = t.to(getattr(torch, case["dtype"])).to(device)
        out.append(t.transpose(1, 2) if case.get("bshd") else t)
    kwargs = {"scale": case["scale"]} if "scale" in case else {}
    return tuple(out), kwargs


def cost(case: dict) -> dict:
    b, h, sq, sk, d = case["b"], case["h"], case["sq"], case["sk"], case["d"]
    return {"flops": 4 * b * h * sq * sk * d, "bytes": 2 * b * h * d * (2 * sq + 2 * sk)}
