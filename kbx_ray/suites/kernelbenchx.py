"""KernelBench-X tasks (a JSON list plus <Category>/<name>.py files) -> Tasks, through shims.

Each file holds the reference function, a separator line of '#' characters, then test code that
calls the reference on a few inputs and ends with `test_results = test_<name>()`. The adapter runs
that test code with the reference wrapped by a recorder (recorder.py): every call it makes becomes a
case, named by the `test_results` key its output lands in ("call_<i>" when it lands in none), whose
inputs are the recorded arguments. The candidate (a function with the reference's name and
signature) is thus judged on exactly the inputs test_results is built from, each call's outputs
compared one by one (stricter than comparing test_results after any post-processing), by the same
worker and judge as every task.
- seeds: the test's own seeding calls (torch.manual_seed, random.seed, ...) are neutralised and the
  evaluation seed seeds torch, random and numpy, so each seed draws fresh random inputs; literal
  inputs stay as written;
- devices: test code written for "cuda" runs on the evaluation device (the CPU under the
  interpreter);
- tolerance: KernelBench-X's: float32 1e-5, float16 and bfloat16 5e-3, integers exact;
- arguments the reference changes in place are declared mutated (compared like outputs);
- cost: bytes of inputs and outputs; FLOPs are unknown (0), so SOL is bandwidth-only.
Drawing inputs runs the test code, and with it the reference (a call's output may feed the next),
in the worker too; the worker still never compares, and the judge recomputes every reference.
"""
from __future__ import annotations

import ast
import inspect
import json
import keyword
import re
from collections import OrderedDict
from pathlib import Path
from typing import Any

from kbx_ray.suite import SuiteError, select_ids
from kbx_ray.suites import recorder, shim
from kbx_ray.types import Task

_SEPARATOR = re.compile(r"^#{40,}[ \t]*$", re.M)
_SHIM_NAMES = {"ENTRY", "CATEGORY", "LEVEL", "SIGNATURE", "REFERENCE_SOURCE", "TEST_SOURCE",
               "CASES", "MUTATES", "PROBLEM", "TOLERANCE", "make_inputs", "cost",
               "KernelBenchXProblem"}


class KernelBenchXProblem:
    """One task file's code, run in the judge (reference, inputs) and in the worker (inputs)."""

    tolerance = {"float32": (1e-5, 1e-5), "float16": (5e-3, 5e-3), "bfloat16": (5e-3, 5e-3)}

    def __init__(self, name: str, origin: str, reference_source: str, test_source: str,
                 test_line: int = 1) -> None:
        self.name, self.origin = name, origin
        self.ns: dict[str, Any] = {"__name__": "kbx_kernelbenchx_problem"}
        code = compile(reference_source, origin, "exec", dont_inherit=True)
        exec(code, self.ns)  # noqa: S102 - the suite's own code, trusted like tasks/
        self.reference = self.ns[name]
        self.test = recorder.compile_test(test_source, origin, test_line)
        self.recordings: OrderedDict[tuple, list[recorder.Call]] = OrderedDict()  # by seed, device

    def make_inputs(self, case: dict, seed: int, device: str) -> tuple[tuple, dict]:
        key = (seed, str(device))
        if key not in self.recordings:
            if len(self.recordings) >= 4:
                self.recordings.popitem(last=False)
            self.recordings[key] = recorder.record(self.reference, self.name, self.ns, self.test,
                                                   seed, device)[0]
        calls = self.recordings[key]
        if case["call"] >= len(calls):
            raise RuntimeError(f"{self.origin}: the test code made {len(calls)} calls this time; "
                               f"case {case['name']} is call {case['call'] + 1}")
        return shim.clone(calls[case["call"]].args), shim.clone(calls[case["call"]].kwargs)

    def cost(self, case: dict) -> dict[str, int]:
        return {"flops": 0, "bytes": int(case.get("bytes", 0))}

    def survey(self) -> tuple[list[dict], tuple[str, ...]]:
        """CASES and MUTATES, from one run of the test code on the CPU with seed 0."""
        calls, results = recorder.record(self.reference, self.name, self.ns, self.test, 0, "cpu",
                                         survey=True)
        if results is None:
            raise SuiteError(f"{self.origin}: the test code never assigns test_results")
        if not calls:
            raise SuiteError(f"{self.origin}: the test code never calls {self.name}()")
        bad = next((c.out for c in calls if not recorder.plain_output(c.out)), None)
        if bad is not None:
            raise SuiteError(f"{self.origin}: {self.name}() returned a {type(bad).__name__}; the "
                             "harness compares a tensor, a tuple of tensors or None")
        return recorder.cases_of(calls, results), tuple(dict.fromkeys(
            m for c in calls for m in c.mutated))


# ---- the JSON and the folder -> Tasks ----------------------------------------------------------
def _task_list(root: Path) -> tuple[Path, list[dict]]:
    if root.is_file():
        listing = root
    else:
        found = sorted(root.glob("*.json"),
                       key=lambda p: (not p.name.startswith("kernelbenchx"), p.name))
        if not found:
            raise SuiteError(f"no KernelBench-X task list in {root}: point suite.path at the "
                             "folder holding kernelbenchx_v1.json (or at the file itself)")
        listing = found[0]
    try:
        entries = json.loads(listing.read_text())
    except json.JSONDecodeError as e:
        raise SuiteError(f"{listing}: not valid JSON ({e.msg}, line {e.lineno})") from None
    if not isinstance(entries, list) or not entries:
        raise SuiteError(f"{listing}: expected a non-empty JSON list of task objects")
    for i, e in enumerate(entries):
        if not isinstance(e, dict) or not isinstance(e.get("name"), str) or not e["name"]:
            raise SuiteError(f"{listing}: entry {i} has no \"name\"")
    return listing, entries


def _locate(base: Path, listing: Path, entries: list[dict]) -> dict[str, tuple[dict, Path]]:
    """task id ("Activation/relu") -> (its JSON entry, its file)."""
    files: dict[str, list[Path]] = {}
    for p in sorted(base.rglob("*.py")):
        files.setdefault(p.stem, []).append(p)
    out = {}
    for e in entries:
        name, category = e["name"], e.get("category")
        hits = [p for p in files.get(name, []) if category in (None, p.parent.name)]
        if len(hits) != 1:
            where = f"{category or '<Category>'}/{name}.py"
            why = "no file" if not hits else f"{len(hits)} files (give its entry a \"category\")"
            raise SuiteError(f"KernelBench-X task {name!r} in {listing.name}: {why} {where} "
                             f"under {base}")
        out[f"{category or hits[0].parent.name}/{name}"] = (e, hits[0])
    return out


def _split(path: Path, entry_name: str) -> tuple[str, str, str, int]:
    """(function name, reference source, test source, the test's first line), checked."""
    source = path.read_text()
    m = _SEPARATOR.search(source)
    if m is None:
        raise SuiteError(f"malformed KernelBench-X file {path}: no separator line of '#' "
                         "characters between the reference and the test code")
    ref, test = source[:m.start()], source[m.end():]
    try:
        ref_tree, test_tree = ast.parse(ref), ast.parse(test)
    except SyntaxError as e:
        raise SuiteError(f"malformed KernelBench-X file {path}: line {e.lineno}: {e.msg}") from None
    funcs = [n.name for n in ref_tree.body if isinstance(n, ast.FunctionDef)]
    name = entry_name if entry_name in funcs else (funcs[0] if len(funcs) == 1 else None)
    problems = [] if name else [f"no function {entry_name}() before the separator"]
    if not any(isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "test_results"
                                                 for t in n.targets) for n in test_tree.body):
        problems.append("no `test_results = test_...()` after the separator")
    if name and (keyword.iskeyword(name) or name in _SHIM_NAMES):
        problems.append(f"the function name {name!r} is reserved by the adapter")
    if problems:
        raise SuiteError(f"malformed KernelBench-X file {path}: {'; '.join(problems)}")
    return str(name), ref, test, source[:m.end()].count("\n") + 1


def _description(e: dict) -> str:
    parts = [str(e.get("description") or f"Implement {e['name']}.").strip()]
    for key, title in (("func_inputs", "Signature and inputs"), ("math", "Math"),
                       ("example", "Example")):
        if e.get(key):
            parts.append(f"{title}:\n{str(e[key]).strip()}")
    return "\n\n".join(parts)


def _render(task_id: str, e: dict, origin: str, name: str, ref: str, test: str, line: int) -> str:
    try:
        problem = KernelBenchXProblem(name, origin, ref, test, line)
        cases, mutates = problem.survey()
    except SuiteError:
        raise
    except Exception as x:  # noqa: BLE001 - the problem's own code ran: name it, not us
        raise SuiteError(f"KernelBench-X file {origin}: running it raised {type(x).__name__}: "
                         f"{(str(x).splitlines() or [''])[0]}") from None
    level = e.get("level", e.get("difficulty", 0))
    return shim.header(_description(e), __name__, origin) + "\n".join([
        "from kbx_ray.suites.kernelbenchx import KernelBenchXProblem", "",
        f"ENTRY = {name!r}", f"CATEGORY = {task_id.split('/')[0]!r}",
        f"LEVEL = {int(level) if str(level).isdigit() else 0}",
        f"SIGNATURE = {name + str(inspect.signature(problem.reference))!r}",
        f"REFERENCE_SOURCE = {ref.rstrip() + chr(10)!r}", f"TEST_SOURCE = {test!r}",
        f"CASES = {cases!r}", f"MUTATES = {mutates!r}",
        f"PROBLEM = KernelBenchXProblem(ENTRY, {origin!r}, REFERENCE_SOURCE, TEST_SOURCE, {line})",
        "TOLERANCE = PROBLEM.tolerance", "make_inputs = PROBLEM.make_inputs", "cost = PROBLEM.cost",
        f"{name} = PROBLEM.reference  # the contract's <name>: the reference", ""])


def load(root: Path, include: list[str] | None) -> list[Task]:
    listing, entries = _task_list(root)
    base = listing.parent
    located = _locate(base, listing, entries)
    tasks = []
    for task_id in select_ids(list(located), include):
        entry, path = located[task_id]
        origin = path.relative_to(base).as_posix()
        name, ref, test, line = _split(path, entry["name"])
        key = (json.dumps(entry, sort_keys=True), path.read_text())
        out = shim.ensure_shim(shim.shim_path("kernelbenchx", task_id, *key),
                               lambda: _render(task_id, entry, origin, name, ref, test, line))
        tasks.append(shim.task_from_shim(out, task_id, str(path)))
    return tasks
