"""Framing between the trusted parent and the sandbox worker: a JSON header plus raw byte blobs.

Pickle is never used: the worker runs untrusted code, and unpickling its bytes in the parent would
hand that code the parent. Tensors travel as (dtype, shape, raw bytes) and are rebuilt with
`torch.frombuffer`, which cannot execute anything. Standard library and torch only: the worker
imports this on a bare GPU image.
"""
from __future__ import annotations

import json
import struct
from typing import IO, Any

_LEN = struct.Struct(">I")
MAX_HEADER = 16 << 20


class ProtocolError(RuntimeError):
    """The peer sent something that is not a well-formed message (or the pipe closed)."""


def send(fp: IO[bytes], header: dict[str, Any], blobs: list[Any] | None = None) -> None:
    """Blobs are anything with the buffer protocol (bytes, a tensor's numpy view), written as is."""
    views = [memoryview(b).cast("B") for b in blobs or []]
    header = dict(header, blobs=[v.nbytes for v in views])
    raw = json.dumps(header).encode()
    for v in [memoryview(_LEN.pack(len(raw)) + raw), *views]:
        _write_all(fp, v)
    fp.flush()


def _write_all(fp: IO[bytes], view: memoryview) -> None:
    while view.nbytes:  # an unbuffered file may write less than asked
        n = fp.write(view)
        view = view[n if n is not None else view.nbytes:]


def widen_pipe(fd: int, size: int = 1 << 20) -> None:
    """Ask for a bigger pipe buffer (Linux; the default 64 KB costs a context switch per 64 KB of
    output). Best effort: the system's pipe-max-size caps it."""
    try:
        import fcntl

        fcntl.fcntl(fd, getattr(fcntl, "F_SETPIPE_SZ", 1031), size)
    except OSError:
        pass


def _read_exact(fp: IO[bytes], n: int) -> bytearray:
    """`n` bytes read straight into one buffer (no chunk list joined afterwards)."""
    buf = bytearray(n)
    view, got = memoryview(buf), 0
    while got < n:
        k = fp.readinto(view[got:])  # type: ignore[attr-defined]
        if not k:
            raise ProtocolError("pipe closed")
        got += k
    return buf


def recv(fp: IO[bytes], max_bytes: int = 2 << 30) -> tuple[dict[str, Any], list[bytearray]]:
    (n,) = _LEN.unpack(_read_exact(fp, _LEN.size))
    if n > MAX_HEADER:
        raise ProtocolError(f"header of {n} bytes exceeds {MAX_HEADER}")
    try:
        header = json.loads(_read_exact(fp, n))
        sizes = [int(s) for s in header.get("blobs", [])]
    except (ValueError, TypeError, AttributeError) as e:
        raise ProtocolError(f"malformed header: {e}") from None
    if not isinstance(header, dict) or any(s < 0 for s in sizes) or sum(sizes) > max_bytes:
        raise ProtocolError(f"blobs of {sum(sizes)} bytes exceed the cap of {max_bytes}")
    return header, [_read_exact(fp, s) for s in sizes]


PINNED = (1 << 20, 256 << 20)  # GPU outputs of these sizes go through page-locked host memory


def tensor_to_wire(t: Any) -> tuple[dict[str, Any], Any]:
    """A tensor's metadata and its bytes (contiguous, on the CPU): a flat uint8 numpy view of one
    host copy, which `send` writes without copying again."""
    import torch

    c = _pinned_copy(t) if t.is_cuda else None
    if c is None:
        c = t.detach().to("cpu").contiguous()
    raw = c.reshape(-1).view(torch.uint8).numpy() if c.numel() else b""
    # the bytes are always row-major; the layout the candidate returned travels beside them, so
    # the parent can hold it to the contract (a permuted view of a plain copy is not a result)
    return {"dtype": str(c.dtype).replace("torch.", ""), "shape": list(c.shape),
            "stride": list(t.stride()), "offset": int(t.storage_offset())}, raw


def _pinned_copy(t: Any) -> Any:
    """A GPU tensor's values in page-locked host memory (a D2H copy at full speed, its buffer
    reused from torch's host cache), or None where the plain `.to("cpu")` path applies: sizes
    outside `PINNED`, and conjugate or negative views, whose lazy bit that path refuses."""
    import torch

    n = t.numel() * t.element_size()
    if not PINNED[0] <= n <= PINNED[1] or t.is_conj() or t.is_neg():
        return None
    try:
        c = torch.empty(t.shape, dtype=t.dtype, pin_memory=True)
    except Exception:  # noqa: BLE001 - no page-locked memory to be had: the plain path
        return None
    c.copy_(t.detach())
    return c


def empty_host_cache() -> None:
    """Give the page-locked buffers `tensor_to_wire` cached back to the host (after each
    evaluation)."""
    import torch

    fn = (getattr(getattr(torch, "accelerator", None), "empty_host_cache", None)
          or getattr(torch._C, "_host_emptyCache", None))
    try:
        if fn is not None:
            fn()
    except Exception:  # noqa: BLE001 - best effort: the buffers only stay cached
        pass


def tensor_from_wire(meta: Any, raw: bytes | bytearray) -> Any:
    """The tensor over `raw`'s memory (a bytearray from `recv` is used in place, not copied);
    `meta` is `tensor_to_wire`'s dict or the parsed record of it (`reply.OutputMeta`)."""
    import torch

    name, dims = (meta["dtype"], meta["shape"]) if isinstance(meta, dict) else (meta.dtype,
                                                                              meta.shape)
    dtype = getattr(torch, str(name), None)
    if not isinstance(dtype, torch.dtype):
        raise ProtocolError(f"unknown dtype {name!r}")
    shape = [int(s) for s in dims]
    numel = 1
    for s in shape:
        numel *= s
    if numel * dtype.itemsize != len(raw):
        raise ProtocolError("tensor bytes do not match its shape and dtype")
    if numel == 0:
        return torch.empty(shape, dtype=dtype)
    buf = raw if isinstance(raw, bytearray) else bytearray(raw)
    return torch.frombuffer(buf, dtype=torch.uint8).view(dtype).reshape(shape)
