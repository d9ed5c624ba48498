"""Triton NLL loss, deterministic: each program gathers input[i, target[i]] for BLOCK rows (only
rows whose target is not ignore_index) and writes a partial sum and a partial count; a single
program adds them in order and divides."""
import torch
import triton
import triton.language as tl

BLOCK = 1024


@triton.jit
def _partial_kernel(x_ptr, t_ptr, psum_ptr, pcnt_ptr, N, sxn, sxc, ignore_index, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    rows = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    in_range = rows < N
    t = tl.load(t_ptr + rows, mask=in_range, other=ignore_index)
    valid = in_range & (t != ignore_index)
    v = tl.load(x_ptr + rows * sxn + t * sxc, mask=valid, other=0.0)
    tl.store(psum_ptr + pid, tl.sum(v, axis=0))
    tl.store(pcnt_ptr + pid, tl.sum(valid.to(tl.int32), axis=0))


@triton.jit
def _final_kernel(psum_ptr, pcnt_ptr, out_ptr, P, BLOCK: tl.constexpr):
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    cnt = tl.zeros((BLOCK,), dtype=tl.int32)
    for start in range(0, P, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(psum_ptr + offs, mask=offs < P, other=0.0)
        cnt += tl.load(pcnt_ptr + offs, mask=offs < P, other=0)
    tl.store(out_ptr, -tl.sum(acc, axis=0) / tl.sum(cnt, axis=0).to(tl.float32))


def nll_loss(input: torch.Tensor, target: torch.Tensor, ignore_index: int = -100) -> torch.Tensor:
    N = input.shape[0]
    out = torch.empty((), dtype=torch.float32, device=input.device)
    target = target.contiguous()
    P = triton.cdiv(N, BLOCK)
    psum = torch.empty(P, dtype=torch.float32, device=input.device)
    pcnt = torch.empty(P, dtype=torch.int32, device=input.device)
    _partial_kernel[(P,)](input, target, psum, pcnt, N, input.stride(0), input.stride(1), ignore_index,
                          BLOCK=BLOCK, num_warps=4)
    _final_kernel[(1,)](psum, pcnt, out, P, BLOCK=min(1024, triton.next_power_of_2(P)), num_warps=4)
    return out
