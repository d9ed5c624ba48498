"""Fused QKV bias add + head split + transpose (GPT-2's `c_attn` output turned into per-head
query, key and value tensors).

Implement `qkv_bias_split_heads(qkv, bias, num_heads)` for `qkv` of shape `[B, S, 3 * E]` and
`bias` of shape `[3 * E]`, with `E = num_heads * Dh`. Return three new contiguous tensors
`(q, k, v)`, each of shape `[B, num_heads, S, Dh]`:

    y = qkv + bias                                  # float32 add, rounded once to the dtype
    q[b, h, s, :] = y[b, s, 0 * E + h * Dh : 0 * E + (h + 1) * Dh]
    k[b, h, s, :] = y[b, s, 1 * E + h * Dh : 1 * E + (h + 1) * Dh]
    v[b, h, s, :] = y[b, s, 2 * E + h * Dh : 2 * E + (h + 1) * Dh]

- `qkv` and `bias` share a dtype (float32, float16 or bfloat16), on the GPU. The last dimension of
  `qkv` is contiguous, but token rows need not be adjacent (qkv may be a slice of a wider buffer).
- Inputs must not be modified. All three outputs are compared with the reference below using the
  default tolerance for the dtype.
"""
import torch

from kbx_ray.taskkit import normal

CATEGORY = "Fusion"
LEVEL = 3


def qkv_bias_split_heads(qkv: torch.Tensor, bias: torch.Tensor,
                         num_heads: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """PyTorch reference: float32 add, one rounding, then split and transpose."""
    b, s, e3 = qkv.shape
    y = (qkv.float() + bias.float()).to(qkv.dtype)
    y = y.view(b, s, 3, num_heads, e3 // (3 * num_heads)).permute(2, 0, 3, 1, 4)
    return y[0].contiguous(), y[1].contiguous(), y[2].contiguous()


CASES = [
    {"name": "fp32_small", "small": True, "b": 2, "s": 5, "h": 3, "dh": 16, "dtype": "float32"},
    {"name": "fp16_small", "small": True, "b": 1, "s": 9, "h": 2, "dh": 64, "dtype": "float16"},
    {"name": "bf16_sliced_outliers_small", "small": True, "b": 2, "s": 4, "h": 4, "dh": 24, "dtype": "bfloat16",
     "sliced": True, "outliers": True},
    {"name": "s1_small", "small": True, "b": 3, "s": 1, "h": 4, "dh": 32, "dtype": "float32"},
    {"name": "fp16_gpt2xl_16x1024x25x64", "small": False, "b": 16, "s": 1024, "h": 25, "dh": 64,
     "dtype": "float16"},
    {"name": "bf16_4x2048x32x128_outliers", "small": False, "b": 4, "s": 2048, "h": 32, "dh": 128,
     "dtype": "bfloat16", "outliers": True},
    {"name": "fp32_sliced_8x1000x12x64", "small": False, "b": 8, "s": 1000, "h": 12, "dh": 64,
     "dtype": "float32", "sliced": True},
]


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """qkv: standard normal (outliers: 0.1% scaled by 10); bias: 0.5 * normal. With `sliced`, qkv
    is the first 3E columns of a [B, S, 3E + 8] tensor."""
    g = torch.Generator(device).manual_seed(seed)
    b, s, h, dh = case["b"], case["s"], case["h"], case["dh"]
    e3 = 3 * h * dh
    width = e3 + 8 if case.get("sliced") else e3
    qkv = normal(g, [b, s, width], case.get("outliers"))
    bias = 0.5 * torch.randn(e3, generator=g, device=g.device)
    dtype = getattr(torch, case["dtype"])
    qkv, bias = qkv.to(dtype).to(device), bias.to(dtype).to(device)
    if case.get("sliced"):
        qkv = qkv[..., :e3]
    return (qkv, bias, h), {}


def cost(case: dict) -> dict:
    n = case["b"] * case["s"] * 3 * case["h"] * case["dh"]
    size = torch.tensor([], dtype=getattr(torch, case["dtype"])).element_size()
    return {"flops": n, "bytes": 2 * n * size + 3 * case["h"] * case["dh"] * size}
