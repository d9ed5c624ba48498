"""task: Quantization/matmul_w8a8
expect: mismatch
peer: fail
why: honest dynamic int8 quantization in Triton (per K-group of 32: per-row activation and
per-column weight scales, round-to-nearest, exact integer accumulation); its RMSE on the K=256
random cases (~0.12-0.15) is above KernelBench-X's 0.1, so both harnesses fail it."""
import torch
import triton
import triton.language as tl


@triton.jit
def _qmm_kernel(a_ptr, w_ptr, o_ptr, M, N, K, sam, sak, swk, swn, som, son,
                BM: tl.constexpr, BN: tl.constexpr, GROUP: tl.constexpr):
    """Per K-group of GROUP: activations scaled per row, weights per column, both to int8."""
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    acc = tl.zeros([BM, BN], dtype=tl.float32)
    for k0 in range(0, K, GROUP):
        rk = k0 + tl.arange(0, GROUP)
        a = tl.load(a_ptr + rm[:, None] * sam + rk[None, :] * sak,
                    mask=(rm[:, None] < M) & (rk[None, :] < K), other=0.0).to(tl.float32)
        w = tl.load(w_ptr + rk[:, None] * swk + rn[None, :] * swn,
                    mask=(rk[:, None] < K) & (rn[None, :] < N), other=0.0).to(tl.float32)
        sa = tl.max(tl.abs(a), axis=1) / 127.0
        sw = tl.max(tl.abs(w), axis=0) / 127.0
        sa = tl.where(sa > 0, sa, 1.0)
        sw = tl.where(sw > 0, sw, 1.0)
        qa = tl.minimum(tl.maximum(tl.floor(a / sa[:, None] + 0.5), -127.0), 127.0).to(tl.int32)
        qw = tl.minimum(tl.maximum(tl.floor(w / sw[None, :] + 0.5), -127.0), 127.0).to(tl.int32)
        dot = tl.sum(qa[:, :, None] * qw[None, :, :], axis=1)   # exact int32 accumulation
        acc += dot.to(tl.float32) * sa[:, None] * sw[None, :]
    tl.store(o_ptr + rm[:, None] * som + rn[None, :] * son, acc,
             mask=(rm[:, None] < M) & (rn[None, :] < N))


def matmul_w8a8(input: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    M, K = input.shape
    N = weight.shape[1]
    out = torch.empty(M, N, device=input.device, dtype=torch.float32)
    grid = (triton.cdiv(M, 16), triton.cdiv(N, 16))
    _qmm_kernel[grid](input, weight, out, M, N, K, input.stride(0), input.stride(1),
                      weight.stride(0), weight.stride(1), out.stride(0), out.stride(1),
                      BM=16, BN=16, GROUP=32)
    return out.to(input.dtype)
