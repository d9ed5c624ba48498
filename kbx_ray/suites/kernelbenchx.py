"""KernelBench-X tasks (a JSON list plus <Category>/<name>.py files) -> Tasks, through shims.
More: kbx_ray/suites/README.md, `kernelbenchx.py`.
"""
from __future__ import annotations

import inspect
import json
import logging
import os
import warnings
from collections import OrderedDict
from typing import Any, Callable

import torch

from kbx_ray.registry import register
from kbx_ray.errors import SuiteError
from kbx_ray.suites.task_import import select_ids
from kbx_ray.suites import SuiteFormat, kbx_tree, movement, recorder, shim, tensorize
from kbx_ray.suites.kbx_comparison import PeerCheck
from kbx_ray.types import Task

log = logging.getLogger(__name__)
PEER_ENTRY = "kernel_function"   # the peer accepts this name as well as the task's stem
_RESERVED = {"ENTRY", "CATEGORY", "LEVEL", "SIGNATURE", "REFERENCE_SOURCE", "TEST_SOURCE",
             "CASES", "MUTATES", "PROBLEM", "TOLERANCE", "HELPERS", "make_inputs", "cost", "check",
             "bind_candidate", "KernelBenchXProblem", "PEER_FILE"}


def survey_device() -> str:
    """Where cases are probed: the evaluation device, a GPU where there is one
    (KBX_SURVEY_DEVICE=cpu probes on the CPU, for a CPU pool on a GPU host). A driver without a
    GPU probes on the CPU and skips the CUDA-only problems as `needs cuda`."""
    asked = os.environ.get("KBX_SURVEY_DEVICE", "").strip()
    if asked == "cpu" or not torch.cuda.is_available():
        return "cpu"
    return "cuda"


class KernelBenchXProblem:
    """One task file's code, run in the judge (reference, inputs) and in the worker (inputs)."""

    tolerance = {"float32": (1e-5, 1e-5), "float64": (1e-5, 1e-5), "float16": (5e-3, 5e-3),
                 "bfloat16": (5e-3, 5e-3)}

    def __init__(self, name: str, origin: str, reference_source: str, test_source: str,
                 test_line: int = 1, helpers: dict[str, str] | None = None,
                 tensorized: bool = False, thresholds: dict[str, float] | None = None,
                 mutates: tuple[str, ...] = ()) -> None:
        self.name, self.origin, self.mutates = name, origin, tuple(mutates)
        self.tensorized = tensorized
        self.ns = shim.with_helpers({"__name__": "kbx_kernelbenchx_problem", "__file__": origin},
                                    helpers or {}, origin)
        exec(compile(reference_source, origin, "exec", dont_inherit=True), self.ns)  # noqa: S102
        self.raw = self.ns[name]           # what the test code calls
        self.sig = inspect.signature(self.raw)
        self.reference = self.bind_candidate(self.raw, "") if tensorized else self.raw
        self.check = PeerCheck(self.tolerance, thresholds) if thresholds is not None or \
            self.mutates else None
        self.test = recorder.compile_test(test_source, origin, test_line)
        self.recordings: OrderedDict[tuple, list[recorder.Call]] = OrderedDict()  # by seed, device

    def make_inputs(self, case: dict, seed: int, device: str) -> tuple[tuple, dict]:
        key = (seed, str(device))
        if key not in self.recordings:
            if len(self.recordings) >= 4:
                self.recordings.popitem(last=False)
            self.recordings[key] = recorder.record(self.raw, self.name, self.ns, self.test,
                                                   seed, device)[0]
        calls = self.recordings[key]
        if case["call"] >= len(calls):
            raise RuntimeError(f"{self.origin}: the test code made {len(calls)} calls this time; "
                               f"case {case['name']} is call {case['call'] + 1}")
        call = calls[case["call"]]
        return shim.retarget(shim.clone(call.args), device), shim.retarget(
            shim.clone(call.kwargs), device)

    def bind_candidate(self, entry: Callable[..., Any], device: str) -> Callable[..., Any]:
        """In the worker: the candidate's return turned into tensors as the reference's is."""
        return tensorize.wrap(entry, self.sig) if self.tensorized else entry

    def cost(self, case: dict) -> dict[str, int]:
        return {"flops": 0, "bytes": int(case.get("bytes", 0))}

    def survey(self, device: str) -> tuple[list[dict], tuple[str, ...], bool]:
        """CASES, MUTATES and whether outputs need tensorizing, from one run of the test code on
        `device` with seed 0."""
        with warnings.catch_warnings():  # deprecation notes of the problem's own torch calls
            warnings.simplefilter("ignore")
            calls, results = recorder.record(self.raw, self.name, self.ns, self.test, 0, device,
                                             survey=True)
        if results is None:
            raise SuiteError(f"{self.origin}: the test code never assigns test_results")
        if not calls:
            raise SuiteError(f"{self.origin}: the test code never calls {self.name}()")
        for c in calls:
            if not tensorize.plain(c.out):
                tensorize.to_tensors(c.out)  # raises, naming the type, when it has no tensor form
        mutates = tuple(dict.fromkeys(m for c in calls for m in (*c.mutated, *c.returned)))
        tensorized = not all(tensorize.plain(c.out) for c in calls)
        cases = recorder.cases_of(calls, results)
        self.movement = movement.decide(self.raw, calls)  # by its ops, not its name or category
        self.structure = movement.structure(self.raw, self.sig, calls)  # values that shape outputs
        for case, c in zip(cases, calls):  # the mutated arguments each call passes, in order
            passed = self.sig.bind(*c.args, **c.kwargs).arguments
            case["mutated_args"] = [m for m in mutates if m in passed]
        return cases, mutates, tensorized


# ---- the tree -> Tasks -------------------------------------------------------------------------
def _description(e: dict) -> str:
    parts = [str(e.get("description") or f"Implement {e['name']}.").strip()]
    for key, title in (("func_inputs", "Signature and inputs"), ("math", "Math"),
                       ("example", "Example")):
        if e.get(key):
            parts.append(f"{title}:\n{str(e[key]).strip()}")
    return "\n\n".join(parts)


def _needs_cuda(x: BaseException, device: str) -> bool:
    text = f"{type(x).__name__}: {x}".lower()
    return device == "cpu" and (isinstance(x, NotImplementedError) or "cuda" in text
                                or "not implemented" in text)


def _render(loc: kbx_tree.Located, origin: str, parts: tuple[str, str, str, int],
            helpers: dict[str, str], device: str) -> str:
    name, ref, test, line = parts
    thresholds = loc.entry.get("precision_thresholds")
    thresholds = dict(thresholds) if isinstance(thresholds, dict) else None
    try:
        problem = KernelBenchXProblem(name, origin, ref, test, line, helpers)
        cases, mutates, tensorized = problem.survey(device)
    except SuiteError:
        raise
    except Exception as x:  # noqa: BLE001 - the problem's own code ran: name it, not us
        first = (str(x).splitlines() or [""])[0][:200]
        if _needs_cuda(x, device):
            raise SuiteError(f"needs cuda: {type(x).__name__}: {first}") from None
        raise SuiteError(f"KernelBench-X file {origin}: running it raised {type(x).__name__}: "
                         f"{first}") from None
    level = loc.entry.get("level", loc.entry.get("difficulty", 0))
    extra = (["check = PROBLEM.check"] if thresholds is not None or mutates else []) + (
        ["bind_candidate = PROBLEM.bind_candidate"] if tensorized else [])
    return shim.header(_description(loc.entry), __name__, origin) + "\n".join([
        "from kbx_ray.suites.kernelbenchx import KernelBenchXProblem", "",
        f"ENTRY = {name!r}", f"CATEGORY = {loc.task_id.split('/')[0]!r}",
        f"LEVEL = {int(level) if str(level).isdigit() else 0}",
        f"SIGNATURE = {name + str(inspect.signature(problem.raw))!r}",
        f"PEER_FILE = {loc.task_id + '.py'!r}",
        f"REFERENCE_SOURCE = {ref.rstrip() + chr(10)!r}", f"TEST_SOURCE = {test!r}",
        f"HELPERS = {helpers!r}", f"CASES = {cases!r}", f"MUTATES = {mutates!r}",
        f"DATA_MOVEMENT = {problem.movement!r}", f"STRUCTURE = {problem.structure!r}",
        f"PROBLEM = KernelBenchXProblem(ENTRY, {origin!r}, REFERENCE_SOURCE, TEST_SOURCE, {line}, "
        f"HELPERS, {tensorized!r}, {thresholds!r}, MUTATES)",
        "TOLERANCE = PROBLEM.tolerance", "make_inputs = PROBLEM.make_inputs", "cost = PROBLEM.cost",
        *extra, f"{name} = PROBLEM.reference  # the contract's <name>: the reference", ""])


def _build(loc: kbx_tree.Located, base: Any, device: str) -> Task:
    origin = loc.path.relative_to(base).as_posix()
    parts = kbx_tree.split(loc.path, loc.path.stem)
    if parts[0] in _RESERVED:
        raise SuiteError(f"{origin}: the function name {parts[0]!r} is reserved by the adapter")
    helpers = kbx_tree.helper_sources(parts[2], loc.path)
    key = (json.dumps(loc.entry, sort_keys=True), loc.path.read_text(), helpers, device)
    out = shim.ensure_shim(shim.shim_path("kernelbenchx", loc.task_id, *key),
                           lambda: _render(loc, origin, parts, helpers, device))
    return shim.task_from_shim(out, loc.task_id, str(loc.path))


def load(root: Any, include: list[str] | None, skipped: dict[str, str] | None = None) -> list[Task]:
    """The listed tasks (with `include`, also unlisted files named by their exact id); each one
    that cannot be built goes to `skipped` (id -> one-line reason) instead."""
    listing, entries = kbx_tree.task_list(root)
    located, broken = kbx_tree.locate(listing, entries)
    ids = [i for i, loc in located.items() if loc.listed] + list(broken)
    if include:
        named = {str(p).strip().rstrip("/") for p in include}
        ids = [i for i in select_ids(list(located) + list(broken), include)
               if i in broken or located[i].listed or i in named]
    device = survey_device()
    tasks = []
    for task_id in ids:
        if task_id in broken:
            _skip(skipped, task_id, broken[task_id])
            continue
        try:
            tasks.append(_build(located[task_id], listing.parent, device))
        except SuiteError as e:
            _skip(skipped, task_id, str(e))
    return tasks


def _skip(skipped: dict[str, str] | None, task_id: str, reason: str) -> None:
    if skipped is None:
        log.warning("skipped %s: %s", task_id, reason)
    else:
        skipped[task_id] = reason


def _ids(root: Any) -> tuple[list[str], list[str]]:
    located, broken = kbx_tree.locate(*kbx_tree.task_list(root))
    listed = [i for i, loc in located.items() if loc.listed] + list(broken)
    return listed, listed + [i for i in located if i not in listed]


@register("suite", "kernelbenchx")
def suite_format() -> SuiteFormat:
    return SuiteFormat("a KernelBench-X folder holding kernelbenchx_v1.json and "
                       "<Category>/<name>.py files", load, _ids)
