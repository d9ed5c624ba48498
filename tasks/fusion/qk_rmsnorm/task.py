"""Per-head RMSNorm of queries and keys ("QK-norm", as in Qwen3 and OLMo-style attention).

Implement `qk_rmsnorm(q, k, q_weight, k_weight, eps=1e-6)` returning `(q_out, k_out)`. Every head
vector (the last dimension, of size Dh) of `q` and of `k` is RMS-normalized independently and
scaled by the shared per-dimension weight, all in float32:

    q_out[b, s, h, :] = q[b, s, h, :] / sqrt(mean(q[b, s, h, :] ** 2) + eps) * q_weight
    k_out[b, s, h, :] = k[b, s, h, :] / sqrt(mean(k[b, s, h, :] ** 2) + eps) * k_weight

- `q` has shape `[B, S, Hq, Dh]` and `k` has shape `[B, S, Hk, Dh]` (Hk may differ from Hq), with
  the same dtype (float32, float16 or bfloat16), on the GPU. `q_weight` and `k_weight` have shape
  `[Dh]` and the same dtype. The last dimension of q and k is contiguous, but q and k may be views
  into one fused QKV projection output of shape `[B, S, (Hq + 2 * Hk) * Dh]` (so token rows are
  further apart than Hq * Dh). Dh is arbitrary (<= 1024).
- Return two new tensors, with the shapes and dtype of q and k, rounded once to the dtype. Inputs
  must not be modified.

Both outputs are compared with the reference below using the default tolerance for the dtype.
"""
import torch

from kbx_ray.taskkit import family

CATEGORY = "Fusion"
LEVEL = 3


def qk_rmsnorm(q: torch.Tensor, k: torch.Tensor, q_weight: torch.Tensor, k_weight: torch.Tensor,
               eps: float = 1e-6) -> tuple[torch.Tensor, torch.Tensor]:
    """PyTorch reference: float32 math, one rounding to the input dtype."""
    def rms(t, w):
        tf = t.float()
        return (tf * torch.rsqrt(tf.pow(2).mean(-1, keepdim=True) + eps) * w.float()).to(t.dtype)
    return rms(q, q_weight), rms(k, k_weight)


CASES = [
    {"name": "fp32_small", "small": True, "b": 2, "s": 5, "hq": 4, "hk": 2, "dh": 16, "dtype": "float32"},
    {"name": "bf16_qkv_small", "small": True, "b": 1, "s": 7, "hq": 4, "hk": 1, "dh": 64, "dtype": "bfloat16",
     "fused": True},
    {"name": "fp16_outliers_small", "small": True, "b": 3, "s": 3, "hq": 2, "hk": 2, "dh": 80,
     "dtype": "float16", "outliers": True},
    {"name": "s1_qkv_small", "small": True, "b": 4, "s": 1, "hq": 8, "hk": 8, "dh": 32, "dtype": "float32",
     "fused": True},
    {"name": "programs_small", "small": True, "b": 2, "s": 10, "hq": 4, "hk": 2, "dh": 64, "dtype": "float32"},
    {"name": "bf16_qkv_4x2048_32q8k_128", "small": False, "b": 4, "s": 2048, "hq": 32, "hk": 8, "dh": 128,
     "dtype": "bfloat16", "fused": True},
    {"name": "fp16_8x1024_40q40k_128_outliers", "small": False, "b": 8, "s": 1024, "hq": 40, "hk": 40,
     "dh": 128, "dtype": "float16", "outliers": True},
    {"name": "fp32_2x4096_16q4k_96", "small": False, "b": 2, "s": 4096, "hq": 16, "hk": 4, "dh": 96,
     "dtype": "float32"},
]

# Unseen cases (kbx_ray/unseen.py): Dh <= 1024 by contract.
SHAPES = family(most={"dh": 1024})


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """q, k: normal with per-head scales in [0.3, 3) (outliers: 0.1% scaled by 10); weights:
    1 + 0.2 * normal. With `fused`, q and k are views into a contiguous [B, S, (Hq + 2Hk) * Dh]
    tensor (q first, then k, then v)."""
    g = torch.Generator(device).manual_seed(seed)
    b, s, hq, hk, dh = case["b"], case["s"], case["hq"], case["hk"], case["dh"]
    h = hq + 2 * hk
    qkv = torch.randn(b, s, h, dh, generator=g, device=g.device) * (0.3 + 2.7 * torch.rand(b, s, h, 1, generator=g, device=g.device))
    if case.get("outliers"):
        qkv = torch.where(torch.rand(b, s, h, dh, generator=g, device=g.device) < 0.001, qkv * 10, qkv)
    q_weight = 1 + 0.2 * torch.randn(dh, generator=g, device=g.device)
    k_weight = 1 + 0.2 * torch.randn(dh, generator=g, device=g.device)
    dtype = getattr(torch, case["dtype"])
    qkv, q_weight, k_weight = (t.to(dtype).to(device) for t in (qkv, q_weight, k_weight))
    if case.get("fused"):
        flat = qkv.reshape(b, s, h * dh)
        q = flat[..., :hq * dh].view(b, s, hq, dh)
        k = flat[..., hq * dh:(hq + hk) * dh].view(b, s, hk, dh)
    else:
        q, k = qkv[:, :, :hq].contiguous(), qkv[:, :, hq:hq + hk].contiguous()
    return (q, k, q_weight, k_weight), {}


def cost(case: dict) -> dict:
    b, s, hq, hk, dh = case["b"], case["s"], case["hq"], case["hk"], case["dh"]
    n = b * s * (hq + hk) * dh
    size = torch.tensor([], dtype=getattr(torch, case["dtype"])).element_size()
    return {"flops": 4 * n, "bytes": (2 * n + 2 * dh) * size}
