"""Free GPU memory -> NaN bytes, before each checked call, so an unwritten output reads as wrong.

Standard library and torch only (the worker imports it; its globals are watched by the sentinels
through `main._HARNESS`).
"""
from __future__ import annotations

import torch

POISON_MB = 256


def poison(device: str, input_bytes: int = 0) -> None:
    """Make every block the candidate can allocate read as NaN (0xFF bytes) until it writes it.

    Freed blocks cached by the allocator hold old inputs, copies and outputs (inputs are drawn on
    the GPU here). Release the free segments; then take every remaining free block (the holes in
    segments still in use, found in the allocator's snapshot) by asking for its exact size, plus
    one big block and 64 MB of small blocks (requests up to 1 MB never come from big blocks);
    fill them all and free them, so the candidate's `empty` is carved from poison."""
    if device != "cuda":
        return
    torch.cuda.empty_cache()
    try:
        _fill_free_blocks(input_bytes)
    except torch.OutOfMemoryError:  # a nearly full GPU: poison what fitted, leave room to run
        torch.cuda.empty_cache()


def _fill_free_blocks(input_bytes: int) -> None:
    held = []
    try:
        for seg in torch.cuda.memory_snapshot():
            held += [torch.empty(blk["size"], dtype=torch.uint8, device="cuda")
                     for blk in seg.get("blocks", []) if blk.get("state") == "inactive"]
    except (RuntimeError, KeyError, TypeError):  # an allocator without snapshots: big blocks only
        pass
    held.append(torch.empty(min(max(POISON_MB << 20, 2 * input_bytes), 8 << 30),
                            dtype=torch.uint8, device="cuda"))
    held += [torch.empty((1 << 20) - 512, dtype=torch.uint8, device="cuda") for _ in range(64)]
    for t in held:
        t.fill_(0xFF)
    del held
