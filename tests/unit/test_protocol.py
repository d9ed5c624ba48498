"""The parent/worker wire: JSON header plus raw blobs, tensors rebuilt without pickle."""
from __future__ import annotations

import fcntl
import io
import os
import threading

import pytest
import torch

from kbx_ray.evaluate import protocol


def _roundtrip(header: dict, blobs: list, max_bytes: int = 2 << 30) -> tuple[dict, list]:
    buf = io.BytesIO()
    protocol.send(buf, header, blobs)
    buf.seek(0)
    return protocol.recv(buf, max_bytes)


@pytest.mark.parametrize("t", [
    torch.randn(3, 5),
    torch.randn(4, 6).t(),  # not contiguous: sent contiguous, same values
    torch.arange(7, dtype=torch.int64),
    torch.randn(2, 3).to(torch.bfloat16),
    torch.tensor([True, False, True]),
    torch.tensor(2.5, dtype=torch.float16),  # 0-d
    torch.empty(0, 4),
])
def test_tensor_roundtrip_keeps_values_dtype_and_shape(t):
    meta, raw = protocol.tensor_to_wire(t)
    header, blobs = _roundtrip({"outputs": [meta]}, [raw])
    back = protocol.tensor_from_wire(header["outputs"][0], blobs[0])
    assert back.dtype == t.dtype and back.shape == t.shape
    assert torch.equal(back, t.contiguous())


def test_received_tensor_uses_the_received_buffer_and_is_writable():
    meta, raw = protocol.tensor_to_wire(torch.ones(1000))
    _, blobs = _roundtrip({}, [raw])
    assert isinstance(blobs[0], bytearray)
    back = protocol.tensor_from_wire(meta, blobs[0])
    back.add_(1)  # no read-only buffer warning path: the bytearray itself backs the tensor
    assert blobs[0][:4] == torch.tensor([2.0]).numpy().tobytes()


def test_bytes_and_numpy_blobs_mix_and_sizes_travel_in_the_header():
    meta, arr = protocol.tensor_to_wire(torch.arange(10, dtype=torch.int32))
    header, blobs = _roundtrip({"op": "x"}, [b"abc", arr, b""])
    assert header["blobs"] == [3, 40, 0] and header["op"] == "x"
    assert bytes(blobs[0]) == b"abc" and bytes(blobs[2]) == b""
    assert torch.equal(protocol.tensor_from_wire(meta, blobs[1]), torch.arange(10, dtype=torch.int32))


def test_blobs_over_the_cap_are_refused_before_they_are_read():
    with pytest.raises(protocol.ProtocolError, match="exceed the cap"):
        _roundtrip({}, [b"x" * 100, b"y" * 100], max_bytes=150)


def test_malformed_header_and_truncated_message_are_protocol_errors():
    raw = b"{not json"
    with pytest.raises(protocol.ProtocolError, match="malformed"):
        protocol.recv(io.BytesIO(protocol._LEN.pack(len(raw)) + raw))
    buf = io.BytesIO()
    protocol.send(buf, {}, [b"z" * 64])
    with pytest.raises(protocol.ProtocolError, match="pipe closed"):
        protocol.recv(io.BytesIO(buf.getvalue()[:-10]))


def test_tensor_bytes_that_do_not_match_the_shape_are_refused():
    with pytest.raises(protocol.ProtocolError, match="do not match"):
        protocol.tensor_from_wire({"dtype": "float32", "shape": [4]}, bytearray(12))
    with pytest.raises(protocol.ProtocolError, match="unknown dtype"):
        protocol.tensor_from_wire({"dtype": "__class__", "shape": [1]}, bytearray(4))


class _ShortWriter(io.RawIOBase):
    """An unbuffered file that accepts at most 7 bytes per write, as a raw pipe may."""

    def __init__(self) -> None:
        self.data = bytearray()

    def writable(self) -> bool:
        return True

    def write(self, b) -> int:
        chunk = bytes(memoryview(b)[:7])
        self.data += chunk
        return len(chunk)


def test_short_writes_are_completed():
    w = _ShortWriter()
    meta, raw = protocol.tensor_to_wire(torch.arange(50, dtype=torch.int16))
    protocol.send(w, {"m": meta}, [raw])
    header, blobs = protocol.recv(io.BytesIO(bytes(w.data)))
    assert torch.equal(protocol.tensor_from_wire(header["m"], blobs[0]),
                       torch.arange(50, dtype=torch.int16))


def test_a_large_tensor_crosses_a_real_pipe_while_the_reader_reads():
    r, w = os.pipe()
    protocol.widen_pipe(r)
    assert fcntl.fcntl(r, getattr(fcntl, "F_GETPIPE_SZ", 1032)) >= 1 << 16
    t = torch.randn(3 << 20)  # 12 MB: far more than any pipe buffer, so the writer must block
    meta, raw = protocol.tensor_to_wire(t)
    writer = threading.Thread(target=lambda: protocol.send(os.fdopen(w, "wb"), {"m": meta}, [raw]))
    writer.start()
    with os.fdopen(r, "rb", buffering=0) as fp:
        header, blobs = protocol.recv(fp)
    writer.join(10)
    assert torch.equal(protocol.tensor_from_wire(header["m"], blobs[0]), t)


def test_reply_cap_follows_the_parents_memory_unless_the_config_sets_it():
    """A fixed 2 GiB cap failed KernelBench's 19_ReLU (6 GiB of output) on an H200 as a crash."""
    from kbx_ray.evaluate.parent.spawn import reply_cap_bytes

    assert reply_cap_bytes(8) == 8 << 20
    with open("/proc/meminfo") as f:
        avail = next(int(x.split()[1]) << 10 for x in f if x.startswith("MemAvailable:"))
    auto = reply_cap_bytes(0)
    assert auto >= 2 << 30
    assert auto == 2 << 30 or abs(auto - avail // 2) < avail // 10  # half of what is free now
