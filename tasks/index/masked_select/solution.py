"""Triton masked_select in three deterministic passes over BLOCK-sized chunks of the row-major
logical index: (1) count the true mask elements of every chunk; (2) one program turns the counts
into exclusive offsets (a running prefix sum, chunk after chunk) and the total; the host reads
the total to allocate the output; (3) every chunk recomputes its local prefix sum of the mask and
scatters its selected elements (read through the strides of x) to offset + local rank."""
import torch
import triton
import triton.language as tl

BLOCK = 1024


@triton.jit
def _count_kernel(m_ptr, cnt_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = tl.load(m_ptr + offs, mask=offs < n, other=0).to(tl.int32)
    tl.store(cnt_ptr + pid, tl.sum(m, axis=0))


@triton.jit
def _scan_kernel(cnt_ptr, off_ptr, total_ptr, n_chunks, BLOCK: tl.constexpr):
    running = tl.zeros((), dtype=tl.int64)
    for start in range(0, n_chunks, BLOCK):
        i = start + tl.arange(0, BLOCK)
        c = tl.load(cnt_ptr + i, mask=i < n_chunks, other=0).to(tl.int64)
        incl = tl.cumsum(c, axis=0)
        tl.store(off_ptr + i, running + incl - c, mask=i < n_chunks)
        running += tl.sum(c, axis=0)
    tl.store(total_ptr, running)


@triton.jit
def _select_kernel(x_ptr, m_ptr, off_ptr, out_ptr, n, D1, D2, s0, s1, s2, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    valid = offs < n
    m = tl.load(m_ptr + offs, mask=valid, other=0).to(tl.int32)
    rank = tl.cumsum(m, axis=0) - m  # exclusive rank of each selected element within the chunk
    base = tl.load(off_ptr + pid)
    i0 = offs // (D1 * D2)
    i1 = (offs // D2) % D1
    i2 = offs % D2
    sel = valid & (m != 0)
    vals = tl.load(x_ptr + i0 * s0 + i1 * s1 + i2 * s2, mask=sel)
    tl.store(out_ptr + base + rank, vals, mask=sel)


def masked_select(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    n = x.numel()
    x3 = x
    while x3.dim() < 3:
        x3 = x3.unsqueeze(0)
    mask = mask.contiguous()
    n_chunks = max(1, triton.cdiv(n, BLOCK))
    counts = torch.empty(n_chunks, dtype=torch.int32, device=x.device)
    offsets = torch.empty(n_chunks, dtype=torch.int64, device=x.device)
    total = torch.empty(1, dtype=torch.int64, device=x.device)
    mask_u8 = mask.view(torch.uint8)
    _count_kernel[(n_chunks,)](mask_u8, counts, n, BLOCK=BLOCK, num_warps=4)
    _scan_kernel[(1,)](counts, offsets, total, n_chunks, BLOCK=1024, num_warps=4)
    out = torch.empty(int(total.item()), dtype=x.dtype, device=x.device)
    if out.numel() > 0:
        _select_kernel[(n_chunks,)](x3, mask_u8, offsets, out, n, x3.shape[1], x3.shape[2], *x3.stride(),
                                    BLOCK=BLOCK, num_warps=4)
    return out
