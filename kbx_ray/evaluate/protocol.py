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


def send(fp: IO[bytes], header: dict[str, Any], blobs: list[bytes] | None = None) -> None:
    blobs = blobs or []
    header = dict(header, blobs=[len(b) for b in blobs])
    raw = json.dumps(header).encode()
    fp.write(_LEN.pack(len(raw)))
    fp.write(raw)
    for b in blobs:
        fp.write(b)
    fp.flush()


def _read_exact(fp: IO[bytes], n: int) -> bytes:
    chunks, left = [], n
    while left:
        chunk = fp.read(left)
        if not chunk:
            raise ProtocolError("pipe closed")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def recv(fp: IO[bytes], max_bytes: int = 2 << 30) -> tuple[dict[str, Any], list[bytes]]:
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


def tensor_to_wire(t: Any) -> tuple[dict[str, Any], bytes]:
    """A tensor's metadata and its bytes (contiguous, on the CPU)."""
    import torch

    c = t.detach().to("cpu").contiguous()
    raw = c.reshape(-1).view(torch.uint8).numpy().tobytes() if c.numel() else b""
    return {"dtype": str(c.dtype).replace("torch.", ""), "shape": list(c.shape)}, raw


def tensor_from_wire(meta: dict[str, Any], raw: bytes) -> Any:
    import torch

    dtype = getattr(torch, str(meta["dtype"]), None)
    if not isinstance(dtype, torch.dtype):
        raise ProtocolError(f"unknown dtype {meta['dtype']!r}")
    shape = [int(s) for s in meta["shape"]]
    numel = 1
    for s in shape:
        numel *= s
    if numel * dtype.itemsize != len(raw):
        raise ProtocolError("tensor bytes do not match its shape and dtype")
    if numel == 0:
        return torch.empty(shape, dtype=dtype)
    return torch.frombuffer(bytearray(raw), dtype=torch.uint8).view(dtype).reshape(shape)
