"""A case's memory footprint: the bytes of its distinct input storages plus its outputs, sized
without allocating (GPU memory admission, `evaluate/parent/admission.py`; unseen case growth,
`unseen.py`).
More: kbx_ray/cases/README.md, `footprint.py`.
"""
from __future__ import annotations

import contextlib
import inspect
import json
import logging
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

FALLBACK_FACTOR = 3  # cost bytes x this where neither the task nor fake mode can size a case
CACHE_SIZE = 8192
_CACHE: dict[tuple, tuple[int, str]] = {}


def _tensors(obj: Any) -> list:
    """The tensors in `obj` (the evaluator's one walk, imported here on first use: torch)."""
    from kbx_ray.evaluate.common.trees import tensors

    return tensors(obj)


def _int(n: Any, env: Any) -> int:
    """A size; an unbacked one (a data-dependent output) at its upper bound."""
    import torch

    if isinstance(n, torch.SymInt):
        node = n.node
        if env is not None and not node.has_hint():
            return int(env.bound_sympy(node.expr).upper)
        return int(node.require_hint())
    return int(n)


def _nbytes(t: Any, env: Any) -> int:
    n = 1
    for s in t.shape:
        n *= _int(s, env)
    return n * t.element_size()


def reference_of(mod: Any) -> Any:
    """The task module's reference function: `ENTRY` (an adapted external problem) else the
    function named like the task's folder (tasks/README.md); None if there is none."""
    name = getattr(mod, "ENTRY", None)
    if not isinstance(name, str):
        name = Path(getattr(mod, "__file__", "") or "").parent.name
    ref = getattr(mod, name, None) if name else None
    return ref if callable(ref) else None


def inputs_and_outputs(mod: Any, case: dict, mode: str = "fake", seed: int = 0,
                       ref: Any = None, mutates: tuple[str, ...] | None = None) -> tuple[int, int]:
    """(bytes of the distinct input storages, bytes of the outputs: the returned tensors and the
    `MUTATES` arguments) of one case, drawn on the CPU under FakeTensorMode (`fake`), with a
    ShapeEnv bounding data-dependent output sizes (`shape_env`), or for real (`real`: seconds
    for a GPU-sized case). Raises what fake mode raises where the values matter."""
    import torch  # noqa: F401 - FakeTensorMode needs it loaded
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    ref = ref or reference_of(mod)
    if ref is None:
        raise LookupError("no reference function")
    mutates = tuple(getattr(mod, "MUTATES", ()) if mutates is None else mutates)
    env = ShapeEnv() if mode == "shape_env" else None
    fake = FakeTensorMode(allow_non_fake_inputs=True, shape_env=env) if mode != "real" else None
    with fake or contextlib.nullcontext():
        args, kwargs = mod.make_inputs(case, seed, "cpu")
        storages = {}
        for x in _tensors((args, kwargs)):
            st = x.untyped_storage()
            storages[st._cdata] = _int(st.nbytes(), env)
        out = ref(*args, **kwargs)
        bound = inspect.signature(ref).bind(*args, **kwargs).arguments
        outs = sum(_nbytes(x, env) for x in _tensors(out))
        outs += sum(_nbytes(x, env) for m in mutates for x in _tensors(bound[m]))
    return sum(storages.values()), outs


def _data_dependent() -> tuple[type, ...]:
    from torch._subclasses.fake_tensor import (DataDependentOutputException,
                                               DynamicOutputShapeException)
    from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode

    return DataDependentOutputException, DynamicOutputShapeException, GuardOnDataDependentSymNode


def fake_sizes(mod: Any, case: dict, ref: Any = None,
               mutates: tuple[str, ...] | None = None) -> tuple[int, int] | None:
    """`inputs_and_outputs` under FakeTensorMode, with a ShapeEnv where an output's size depends
    on the data; None where the draw or the reference reads drawn values. Any other failure
    raises."""
    data_dependent = _data_dependent()
    try:
        return inputs_and_outputs(mod, case, "fake", ref=ref, mutates=mutates)
    except data_dependent[1]:  # DynamicOutputShapeException: bound the output's size
        try:
            return inputs_and_outputs(mod, case, "shape_env", ref=ref, mutates=mutates)
        except data_dependent:
            return None
    except data_dependent:
        return None


def measure(mod: Any, case: dict) -> tuple[int, str]:
    """(footprint bytes, how: "declared" by the task's `footprint(case)`, "fake" from fake mode, or
    "fallback": `FALLBACK_FACTOR` x cost bytes), uncached."""
    declared = getattr(mod, "footprint", None)
    if callable(declared):
        return int(declared(case)), "declared"
    try:
        sizes = fake_sizes(mod, case)
    except Exception as e:  # noqa: BLE001 - a draw fake mode cannot run (or no task): the bound
        log.debug("footprint: fake mode failed on %s (%s: %s)", case.get("name"), type(e).__name__, e)
        sizes = None
    if sizes is not None:
        return sum(sizes), "fake"
    return FALLBACK_FACTOR * int(mod.cost(case).get("bytes") or 0), "fallback"


def _key(mod: Any, case: dict) -> tuple | None:
    """The task file's version (task_import.load_module names a module by its file's content
    hash) and the case (a drawn unseen case has a public case's name: its sizes are the key);
    None (not cached) for an object that is no module loaded from a file."""
    path, name = getattr(mod, "__file__", None), getattr(mod, "__name__", None)
    if not (isinstance(path, str) and isinstance(name, str)):
        return None
    try:
        text = json.dumps(case, sort_keys=True, default=str)
    except (TypeError, ValueError):
        text = repr(sorted(case.items(), key=str))
    return name, path, text


def size(mod: Any, case: dict) -> int:
    """The case's footprint in bytes (module docstring), cached per task file and case."""
    return sized(mod, case)[0]


def sized(mod: Any, case: dict) -> tuple[int, str]:
    """`measure`, cached (at most `CACHE_SIZE` entries: every unseen draw is a new case)."""
    key = _key(mod, case)
    if key is None:
        return measure(mod, case)
    hit = _CACHE.get(key)
    if hit is None:
        if len(_CACHE) >= CACHE_SIZE:
            _CACHE.clear()
        hit = _CACHE[key] = measure(mod, case)
    return hit


_CHECKS: dict[tuple, str] = {}


def check(mod: Any, case: dict, real: bool = False) -> str:
    """Whether the task can make `case` (an unseen draw, `unseen.py`): "ok" where its inputs and
    reference run under FakeTensorMode (their sizes then fill `size`'s cache), "invalid" where
    they raise, and where fake mode cannot tell (the draw reads drawn values, or fake mode fails)
    "unknown", unless `real` (a CPU-sized case): then they are run for real, "ok" or "invalid"."""
    key = _key(mod, case)
    hit = _CHECKS.get((real, *key)) if key else None
    if hit is None:
        hit = _check(mod, case, real, key)
        if key:
            if len(_CHECKS) >= CACHE_SIZE:
                _CHECKS.clear()
            _CHECKS[(real, *key)] = hit
    return hit


@contextlib.contextmanager
def _quiet_fake_mode():
    """Fake mode logs every op that raises at error level: a draw the task refuses is no error."""
    logger = logging.getLogger("torch._subclasses.fake_tensor")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(level)


def _check(mod: Any, case: dict, real: bool, key: tuple | None) -> str:
    if reference_of(mod) is None or not callable(getattr(mod, "make_inputs", None)):
        return "unknown"  # nothing to run: a task under construction, a test's stand-in
    try:
        with _quiet_fake_mode():
            sizes = fake_sizes(mod, case)
    except Exception as e:  # noqa: BLE001 - fake mode refused it: real values decide, or no one
        log.debug("footprint.check: fake mode failed on %s (%s: %s)", case, type(e).__name__, e)
        sizes = None
    if sizes is not None and key and not callable(getattr(mod, "footprint", None)):
        _CACHE.setdefault(key, (sum(sizes), "fake"))
    if sizes is None and not real:
        return "unknown"
    if sizes is None:
        try:
            sizes = inputs_and_outputs(mod, case, "real")
        except Exception:  # noqa: BLE001 - the task cannot make this case
            return "invalid"
    return "ok" if _within_cost(mod, case, sum(sizes)) else "invalid"


def _within_cost(mod: Any, case: dict, held: int) -> bool:
    """The case's least traffic (`cost`'s min_bytes, else bytes) fits in the memory it holds: a
    draw that breaks a relation the task assumes without checking it (scatter's k <= n: a shorter
    index than the cost counts) moves less than its cost claims, or gets a negative cost
    (tests/unit/test_cost_bounds.py)."""
    cost = mod.cost(case)
    if min(cost.values()) < 0 or cost.get("min_flops", 0) > cost["flops"]:
        return False  # a relation broken the other way: a causal mask longer than its keys
    return int(cost.get("min_bytes", cost["bytes"])) <= held
