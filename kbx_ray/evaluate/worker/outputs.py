"""What the candidate's entry returned -> checked dense tensors -> wire metadata and raw bytes.

Standard library and torch only (the worker imports it; its globals are watched by the sentinels
through `main._HARNESS`).
"""
from __future__ import annotations

from typing import Any

import torch

from kbx_ray.evaluate import protocol
from kbx_ray.evaluate.reply import OutputMeta
from kbx_ray.evaluate.worker.candidate_errors import CandidateError


def flatten_output(out: Any, device: str) -> list[Any]:
    """The returned tensors: None, one tensor or a flat tuple/list of plain dense tensors on
    `device`; anything else is the candidate's error (a tensor subclass is disqualified)."""
    if out is None:
        return []
    outs = ([out] if isinstance(out, torch.Tensor)
            else list(out) if isinstance(out, (list, tuple)) else None)
    if outs is None or not all(isinstance(t, torch.Tensor) for t in outs):
        raise CandidateError("runtime_error", f"the entry function returned {type(out).__name__}, "
                                              "expected a tensor, a tuple of tensors or None")
    for t in outs:
        if type(t) is not torch.Tensor:  # noqa: E721 - a subclass runs its own code when read
            raise CandidateError("disqualified", f"the entry function returned a "
                                 f"{type(t).__name__}, a torch.Tensor subclass (its values could "
                                 "be computed lazily)")
        if t.layout != torch.strided or t.device.type != device:
            raise CandidateError("runtime_error", f"an output is a {t.layout} tensor on "
                                 f"{t.device}; expected a dense tensor on {device}")
    return outs


def structure(out: Any) -> str:
    if out is None:
        return "none"
    return "tensor" if isinstance(out, torch.Tensor) else f"tuple{len(out)}"


def encode(outs: list[Any], blobs: list[Any]) -> tuple[OutputMeta, ...]:
    """Outputs to the wire; one that cannot be read as plain bytes (a conjugate or negative view,
    a storage the candidate freed) is the candidate's error, not the harness's."""
    metas = []
    for i, t in enumerate(outs):
        try:
            meta, raw = protocol.tensor_to_wire(t)
        except Exception as e:  # noqa: BLE001
            raise CandidateError("runtime_error", f"output {i} cannot be read back as plain "
                                 f"{t.dtype} values ({type(e).__name__}: {e}); return a "
                                 "materialised tensor (e.g. .resolve_conj())") from None
        metas.append(OutputMeta(dtype=meta["dtype"], shape=tuple(meta["shape"]),
                                stride=tuple(meta["stride"]), offset=meta["offset"]))
        blobs.append(raw)
    return tuple(metas)
