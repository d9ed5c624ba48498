"""Input drawing shared by the task files (tasks/<category>/<name>/task.py), instead of copies.

Each task file stays self-describing: its docstring, reference, cases, `make_inputs` and `cost`
are its own; what it takes from here is how a standard case is drawn, so that every task means the
same thing by the same case key:
More: kbx_ray/README.md, `taskkit.py`.
"""
from __future__ import annotations

from collections.abc import Sequence

import torch

from kbx_ray.unseen import family  # noqa: F401 - re-exported: tasks declare SHAPES through taskkit

OUTLIER_RATE = 0.001   # share of the normals that `outliers` scales
OUTLIER_SCALE = 10


def normal(g: torch.Generator, shape: Sequence[int], outliers: bool | None = False,
           std: float = 1.0) -> torch.Tensor:
    """Normal values times `std` on the generator's device; with `outliers`, a second draw picks
    0.1% of them to scale by 10 (after `std`)."""
    x = torch.randn(shape, generator=g, device=g.device)
    if std != 1.0:
        x = x * std
    if outliers:
        x = torch.where(torch.rand(shape, generator=g, device=g.device) < OUTLIER_RATE, x * OUTLIER_SCALE, x)
    return x


def int8(g: torch.Generator, shape: Sequence[int], std: float, outliers: bool | None = False) -> torch.Tensor:
    """Quantized-activation-like int8 values: round(std * normal) (outliers as in `normal`),
    clamped to [-127, 127]."""
    return normal(g, shape, outliers, std).round().clamp(-127, 127).to(torch.int8)


def sprinkle(g: torch.Generator, x: torch.Tensor, rate: float, value: float) -> torch.Tensor:
    """`x` with a share `rate` of its elements (a fresh uniform draw) set to `value` (NaN, 0, -inf)."""
    return torch.where(torch.rand(x.shape, generator=g, device=g.device) < rate, value, x)


def signed_magnitudes(g: torch.Generator, z: torch.Tensor) -> torch.Tensor:
    """Magnitudes uniform in [0.5, 2] with the signs of `z`: a divisor that is never near zero."""
    return (0.5 + 1.5 * torch.rand(z.shape, generator=g, device=g.device)) * torch.where(z < 0, -1.0, 1.0)


def stored(shape: list[int], view: str | None) -> list[int]:
    """The shape of the contiguous tensor that `view` is taken from."""
    shape = list(shape)
    if view == "t":
        shape[-1], shape[-2] = shape[-2], shape[-1]
    elif view == "s":
        shape[-1] *= 2
    return shape


def finish_one(x: torch.Tensor, dtype: torch.dtype, device: str, view: str | None) -> torch.Tensor:
    """Cast, move to the device, then take the view (`.transpose(-1, -2)` or `[..., ::2]`), so that
    a transposed or strided input is a view of a contiguous device tensor."""
    x = x.to(dtype).to(device)
    if view == "t":
        return x.transpose(-1, -2)
    if view == "s":
        return x[..., ::2]
    return x


def dtype_of(case: dict) -> torch.dtype:
    """The torch dtype the case names."""
    return getattr(torch, case["dtype"])


def draw(g: torch.Generator, case: dict) -> torch.Tensor:
    """A one-input case's standard normals in the storage shape of its `view` (float32, before the
    cast: a task transforms them first)."""
    return normal(g, stored(case["shape"], case.get("view")), bool(case.get("outliers")))


def finish(x: torch.Tensor, case: dict, device: str) -> torch.Tensor:
    """A one-input case's tensor as the candidate gets it: the case dtype, on the device, viewed."""
    return finish_one(x, dtype_of(case), device, case.get("view"))


def _views(case: dict) -> list[str | None]:
    return case.get("views", [None] * len(case["shapes"]))


def operands(g: torch.Generator, case: dict) -> list[torch.Tensor]:
    """Standard normals for each of a case's `shapes`, in the storage shape of its view, drawn in
    order."""
    outliers = bool(case.get("outliers", False))
    return [normal(g, stored(s, v), outliers) for s, v in zip(case["shapes"], _views(case))]


def finish_operands(tensors: tuple[torch.Tensor, ...], case: dict, device: str) -> tuple[torch.Tensor, ...]:
    """Each operand in the case dtype, on the device, in its view."""
    dtype = dtype_of(case)
    return tuple(finish_one(t, dtype, device, v) for t, v in zip(tensors, _views(case)))


def edges(x: torch.Tensor, values: Sequence[float]) -> torch.Tensor:
    """`x` with its first row's leading elements (logical order, any view) set to `values`: the
    adversarial points a task's contract defines (signed zeros at a branch cut, ties), placed in
    every draw so that no verdict depends on whether a random draw happened to hit them. At least
    one drawn value stays (a one-element input keeps its value: its case tests a size)."""
    row = x[(0,) * (x.dim() - 1)]  # a view: the write lands in x, whatever its strides
    k = min(len(values), row.shape[0], x.numel() - 1)
    row[:k] = torch.tensor(list(values[:k]), dtype=x.dtype, device=x.device)
    return x


def numel(shape: list[int]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def broadcast_cost(case: dict, flops_per_element: int) -> dict:
    """Cost of an elementwise op over broadcast `shapes`: `flops_per_element` per output element;
    every operand read once and the broadcast output written once."""
    shapes = case["shapes"]
    rank = max(map(len, shapes))
    out = numel([max(sizes) for sizes in zip(*[[1] * (rank - len(s)) + list(s) for s in shapes])])
    size = torch.tensor([], dtype=dtype_of(case)).element_size()
    return {"flops": flops_per_element * out, "bytes": (sum(map(numel, shapes)) + out) * size}
