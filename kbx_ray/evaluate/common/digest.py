"""A tensor's bytes reduced to one integer, computed alike in the worker and the parent (exact
integer arithmetic on the tensor's device). Standard library and torch only (the worker imports
it; its globals are watched by the sentinels through `main._HARNESS`)."""
from __future__ import annotations

from typing import Any

ROW = 1 << 16          # words weighted 1..ROW per row: a row's sum fits an int64
SLAB = 1 << 22         # words widened to int64 at a time (32 MB of scratch)
PRIME = (1 << 61) - 1  # rows combined modulo this on the host


def digest(t: Any) -> int:
    """Of `t`'s values in row-major order: 32-bit words (bytes where the size is not a multiple of
    four), each weighted by its position in a row, rows summed exactly, then combined."""
    import torch

    if t.numel() == 0:
        return 0
    raw = t.detach().contiguous().reshape(-1).view(torch.uint8)
    words = raw.view(torch.int32) if raw.numel() % 4 == 0 else raw
    weight = torch.arange(1, ROW + 1, dtype=torch.int64, device=t.device)
    acc = words.numel()
    for start in range(0, words.numel(), SLAB):
        part = words[start:start + SLAB].to(torch.int64)
        pad = (-part.numel()) % ROW
        if pad:
            part = torch.cat([part, part.new_zeros(pad)])
        for s in (part.view(-1, ROW) * weight).sum(dim=1).tolist():
            acc = (acc * 1_000_003 + s) % PRIME
    return acc
