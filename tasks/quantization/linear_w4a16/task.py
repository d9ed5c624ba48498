"""W4A16 linear layer: float16 activations times packed 4-bit weights with group-wise scales.

Implement `linear_w4a16(x, qweight, scales, group_size)` for float16 activations `x` [M, K],
packed weights `qweight` (uint8, [N, K // 2]), float16 `scales` [N, K // group_size] and an int
`group_size`, returning a new float16 tensor `out` [M, N] = x @ W^T, where W [N, K] is:

    Packing: byte qweight[n, j] holds two 4-bit weights of row n:
        bits 0-3 (low nibble,  qweight[n, j] & 0xF) -> column k = 2 * j
        bits 4-7 (high nibble, qweight[n, j] >> 4)  -> column k = 2 * j + 1
    Zero point and sign: each nibble is an unsigned integer u in 0..15 with a fixed zero point of
        8, so the signed weight is w_int = u - 8, in -8..7.
    Groups and scales: columns are split into K // group_size consecutive groups of group_size;
        W[n, k] = float32(w_int[n, k]) * float32(scales[n, k // group_size])
    out[m, n] = float16( sum over k of float32(x[m, k]) * W[n, k] )

- K is even and a multiple of group_size; group_size is even (32, 64, 128 or a non-power-of-two
  such as 40 occur). M and N are arbitrary (M = 1 is the decode case). All inputs are contiguous
  and must not be modified.
- Accumulate in float32 and round once to float16. Dequantizing W to float16 for tensor-core
  products (float32 accumulation) is accurate enough.

Checked against the reference below (float64) by `check`: every element must be within 1e-2
relative + 1e-2 absolute of the reference (outputs have unit scale), with cosine similarity
>= 0.9999 and relative L1 error <= 5e-3.
"""
import torch

from kbx_ray.taskkit import family, normal

CATEGORY = "Quantization"
LEVEL = 4


def linear_w4a16(x: torch.Tensor, qweight: torch.Tensor, scales: torch.Tensor, group_size: int) -> torch.Tensor:
    """PyTorch reference: unpack, dequantize in float32, multiply in float64."""
    n = qweight.shape[0]
    low = (qweight & 0xF).to(torch.int32) - 8        # columns 0, 2, 4, ...
    high = (qweight >> 4).to(torch.int32) - 8        # columns 1, 3, 5, ...
    w_int = torch.stack([low, high], dim=-1).reshape(n, -1)
    w = w_int.float() * scales.float().repeat_interleave(group_size, dim=1)
    return (x.double() @ w.double().t()).to(torch.float16)


CASES = [
    {"name": "small", "small": True, "m": 16, "n": 32, "k": 64, "group": 32},
    {"name": "decode_m1_small", "small": True, "m": 1, "n": 48, "k": 128, "group": 64},
    {"name": "odd_group40_small", "small": True, "m": 5, "n": 19, "k": 80, "group": 40},
    {"name": "outliers_small", "small": True, "m": 24, "n": 16, "k": 64, "group": 16, "outliers": True},
    {"name": "tiles_small", "small": True, "m": 70, "n": 140, "k": 192, "group": 32},
    {"name": "decode_1x4096_to_11008_g128", "small": False, "m": 1, "n": 11008, "k": 4096, "group": 128},
    {"name": "batch16_8192_to_8192_g64", "small": False, "m": 16, "n": 8192, "k": 8192, "group": 64},
    {"name": "prefill_4096x4096_to_4096_g128_outliers", "small": False, "m": 4096, "n": 4096, "k": 4096,
     "group": 128, "outliers": True},
    {"name": "odd_333x3000_to_1000_g40", "small": False, "m": 333, "n": 1000, "k": 3000, "group": 40},
]

# Unseen cases (kbx_ray/unseen.py): K stays a multiple of the group size.
SHAPES = family(multiple={"k": "group"})


def make_inputs(case: dict, seed: int, device: str) -> tuple[tuple, dict]:
    """x standard normal (outliers: 0.1% scaled by 10), float16. Nibbles uniform in 0..15 packed as
    the docstring says. scales uniform in [0.5, 1.5] / (4.6 * sqrt(K)) in float16 (w_int has
    standard deviation about 4.6), so outputs have unit scale."""
    g = torch.Generator(device).manual_seed(seed)
    m, n, k, gs = case["m"], case["n"], case["k"], case["group"]
    x = normal(g, [m, k], case.get("outliers"))
    u = torch.randint(0, 16, (n, k), generator=g, dtype=torch.int32, device=g.device)
    qweight = (u[:, 0::2] | (u[:, 1::2] << 4)).to(torch.uint8)
    scales = (0.5 + torch.rand(n, k // gs, generator=g, device=g.device)) / (4.6 * k ** 0.5)
    return (x.half().to(device), qweight.to(device), scales.half().to(device), gs), {}


def cost(case: dict) -> dict:
    m, n, k, gs = case["m"], case["n"], case["k"], case["group"]
    return {"flops": 2 * m * n * k, "bytes": 2 * m * k + n * k // 2 + 2 * n * (k // gs) + 2 * m * n}


def check(out: list, ref: list, case: dict) -> str | None:
    """Strict comparison (see the module docstring)."""
    o, r = out[0], ref[0]
    if o.shape != r.shape or o.dtype != r.dtype:
        return f"expected {r.dtype} {tuple(r.shape)}, got {o.dtype} {tuple(o.shape)}"
    o, r = o.double(), r.double()
    if not torch.isfinite(o).all():
        return "output has non-finite values"
    err = (o - r).abs()
    bad = err > 1e-2 * r.abs() + 1e-2
    if bad.any():
        i = int(bad.flatten().nonzero()[0])
        return (f"{int(bad.sum())} elements off, e.g. flat index {i}: "
                f"{o.flatten()[i].item():.6g} vs {r.flatten()[i].item():.6g}")
    cos = float((o * r).sum() / (o.norm() * r.norm()).clamp_min(1e-30))
    rel_l1 = float(err.sum() / r.abs().sum().clamp_min(1e-30))
    if cos < 0.9999 or rel_l1 > 5e-3:
        return f"cosine {cos:.6f} (need >= 0.9999), relative L1 {rel_l1:.2e} (need <= 5e-3)"
    return None
