"""GPU outputs reach the wire through page-locked memory: the same metadata and bytes as the plain
`.to("cpu")` path, and the same refusals (conjugate and negative views)."""
from __future__ import annotations

import pytest
import torch

from kbx_ray.evaluate import protocol

pytestmark = pytest.mark.gpu


def _plain(t: torch.Tensor, monkeypatch: pytest.MonkeyPatch) -> tuple[dict, bytes]:
    """`tensor_to_wire` without its page-locked path."""
    with monkeypatch.context() as m:
        m.setattr(protocol, "_pinned_copy", lambda t: None)
        meta, raw = protocol.tensor_to_wire(t)
    return meta, bytes(raw)


def _outputs() -> list[torch.Tensor]:
    g = torch.Generator(device="cuda").manual_seed(5)
    x = torch.randn(1024, 1024, device="cuda", generator=g)
    return [x, x.t(), x.to(torch.bfloat16)[:, 3:], x[:1].expand(512, 1024), x.half()[::2],
            torch.complex(x, -x), (x > 0), torch.arange(1 << 19, device="cuda"),
            x[:4], torch.randn(1 << 26, device="cuda", generator=g)]


@pytest.mark.parametrize("i", range(10))
def test_pinned_bytes_equal_the_plain_path(i, monkeypatch):
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    t = _outputs()[i]
    n = t.numel() * t.element_size()
    pinned = protocol._pinned_copy(t)
    assert (pinned is not None) == (protocol.PINNED[0] <= n <= protocol.PINNED[1])
    if pinned is not None:
        assert pinned.is_pinned() and pinned.is_contiguous()
    meta, raw = protocol.tensor_to_wire(t)
    assert (meta, bytes(raw)) == _plain(t, monkeypatch)


def test_lazy_views_go_the_plain_way(monkeypatch):
    """Conjugate and negative views never take the page-locked path: what comes of them (bytes,
    or a refusal) is the plain path's, whatever this torch does with their lazy bit."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    z = torch.complex(torch.randn(1024, 1024, device="cuda"), torch.randn(1024, 1024,
                                                                          device="cuda"))
    for lazy in (z.conj(), z.conj().imag):  # a conjugate view, a negative one
        assert protocol._pinned_copy(lazy) is None
        got = []
        for read in (protocol.tensor_to_wire, lambda t: _plain(t, monkeypatch)):
            try:
                meta, raw = read(lazy)
                got.append((meta, bytes(raw)))
            except Exception as e:  # noqa: BLE001 - the type is what is compared
                got.append(type(e))
        assert got[0] == got[1], [g if isinstance(g, type) else g[0] for g in got]
    protocol.empty_host_cache()
