"""Triton layer norm + per-token int8 quantization: one program per row. Rows up to MAX_BLOCK
elements stay in registers (one read); longer rows are swept in chunks (statistics, then the
absolute maximum of y, then the quantized store). Rounding is half-to-even via the float32
magic-number trick (adding and subtracting 1.5 * 2**23), exact for |v| < 2**22."""
import torch
import triton
import triton.language as tl

MAX_BLOCK = 8192


@triton.jit
def _round_half_even(v):
    magic = 12582912.0  # 1.5 * 2**23: the sum lands where the fp32 spacing is 1, rounding to even
    return (v + magic) - magic


@triton.jit
def _ln_w8a8_kernel(x_ptr, w_ptr, b_ptr, q_ptr, s_ptr, D, stride_r, stride_c, eps,
                    BLOCK: tl.constexpr, SINGLE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * stride_r
    q_row = q_ptr + row * D
    if SINGLE:
        cols = tl.arange(0, BLOCK)
        mask = cols < D
        x = tl.load(x_row + cols * stride_c, mask=mask, other=0.0).to(tl.float32)
        mean = tl.sum(x, axis=0) / D
        diff = tl.where(mask, x - mean, 0.0)
        rstd = 1.0 / tl.sqrt(tl.sum(diff * diff, axis=0) / D + eps)
        w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        b = tl.load(b_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        y = diff * rstd * w + b
        amax = tl.max(tl.where(mask, tl.abs(y), 0.0), axis=0)
        scale = tl.maximum(amax, 1e-8) / 127.0
        qv = tl.minimum(tl.maximum(_round_half_even(y / scale), -128.0), 127.0)
        tl.store(q_row + cols, qv.to(tl.int8), mask=mask)
    else:
        acc = tl.zeros((BLOCK,), dtype=tl.float32)
        for start in range(0, D, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            acc += tl.load(x_row + cols * stride_c, mask=cols < D, other=0.0).to(tl.float32)
        mean = tl.sum(acc, axis=0) / D
        acc = tl.zeros((BLOCK,), dtype=tl.float32)
        for start in range(0, D, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            mask = cols < D
            x = tl.load(x_row + cols * stride_c, mask=mask, other=0.0).to(tl.float32)
            diff = tl.where(mask, x - mean, 0.0)
            acc += diff * diff
        rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / D + eps)
        amax_acc = tl.zeros((BLOCK,), dtype=tl.float32)
        for start in range(0, D, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            mask = cols < D
            x = tl.load(x_row + cols * stride_c, mask=mask, other=0.0).to(tl.float32)
            w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
            b = tl.load(b_ptr + cols, mask=mask, other=0.0).to(tl.float32)
            y = (x - mean) * rstd * w + b
            amax_acc = tl.maximum(amax_acc, tl.where(mask, tl.abs(y), 0.0))
        scale = tl.maximum(tl.max(amax_acc, axis=0), 1e-8) / 127.0
        for start in range(0, D, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            mask = cols < D
            x = tl.load(x_row + cols * stride_c, mask=mask, other=0.0).to(tl.float32)
            w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
            b = tl.load(b_ptr + cols, mask=mask, other=0.0).to(tl.float32)
            y = (x - mean) * rstd * w + b
            qv = tl.minimum(tl.maximum(_round_half_even(y / scale), -128.0), 127.0)
            tl.store(q_row + cols, qv.to(tl.int8), mask=mask)
    tl.store(s_ptr + row, scale)


def layernorm_w8a8(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor,
                   eps: float = 1e-5) -> tuple[torch.Tensor, torch.Tensor]:
    M, D = x.shape
    q = torch.empty((M, D), dtype=torch.int8, device=x.device)
    scale = torch.empty(M, dtype=torch.float32, device=x.device)
    if M == 0:
        return q, scale
    weight, bias = weight.contiguous(), bias.contiguous()
    block = triton.next_power_of_2(D)
    single = block <= MAX_BLOCK
    if not single:
        block = 4096
    num_warps = min(16, max(1, block // 512)) if single else 8
    _ln_w8a8_kernel[(M,)](x, weight, bias, q, scale, D, x.stride(0), x.stride(1), eps,
                          BLOCK=block, SINGLE=single, num_warps=num_warps)
    return q, scale
