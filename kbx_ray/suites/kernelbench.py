"""KernelBench problem folders (level1/19_ReLU.py, ...) -> Tasks, through generated shims (shim.py).
More: kbx_ray/suites/README.md, `kernelbench.py`.
"""
from __future__ import annotations

import ast
import os
import re
import sys
import textwrap
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

import torch

from kbx_ray.registry import register
from kbx_ray.errors import SuiteError
from kbx_ray.suites.task_import import select_ids
from kbx_ray.suites import SuiteFormat, movement, shim
from kbx_ray.types import Task

WEIGHT_SEED = 42
TOLERANCE = {"float32": 1e-4, "float64": 1e-4, "float16": 1e-2, "bfloat16": 1e-2}
ATOL = RTOL = TOLERANCE["float32"]
_LEVEL = re.compile(r"level[_-]?(\d+)", re.I)


class KernelBenchProblem:
    """One problem file's code, run in the judge (the reference) and in the worker (inputs and
    the candidate's ModelNew)."""

    tolerance = {d: (t, t) for d, t in TOLERANCE.items()}

    def __init__(self, origin: str, source: str) -> None:
        self.ns: dict[str, Any] = {"__name__": "kbx_kernelbench_problem"}
        code = compile(source, origin, "exec", dont_inherit=True)
        exec(code, self.ns)  # noqa: S102 - the suite's own code, trusted like tasks/
        self.models: dict[str, Any] = {}   # the reference Model, built once per device
        self.bytes = 0                     # inputs + parameters + outputs, seen on the first call

    def make_inputs(self, case: dict, seed: int, device: str) -> tuple[tuple, dict]:
        with shim.drawing_on(device, seed):
            inputs = self.ns["get_inputs"]()
        return tuple(shim.tree_map(lambda t: t.to(device), list(inputs))), {}

    def build(self, cls: Callable[..., Any], device: str | torch.device) -> Any:
        """`cls(*get_init_inputs())` right after seeding, on the CPU, then moved to `device`."""
        with shim.seeded(WEIGHT_SEED), shim.OnDevice("cpu"):
            init = self.ns["get_init_inputs"]()
            with shim.seeded(WEIGHT_SEED):
                model = cls(*init)
        return model.to(device) if isinstance(model, torch.nn.Module) else model

    def reference(self, *inputs: Any) -> Any:
        device = next((t.device for t in shim.tensors(inputs)), torch.device("cpu"))
        model = self.models.get(str(device))
        if model is None:
            model = self.models[str(device)] = self.build(self.ns["Model"], device)
        with torch.no_grad():
            out = model(*inputs)
        if not self.bytes:
            self.bytes = sum(map(shim.nbytes, (inputs, list(model.parameters()), out)))
        return out

    def bind_candidate(self, cls: Callable[..., Any], device: str) -> Callable[..., Any]:
        """Called by the worker at load: the candidate's ModelNew, built as Model is, becomes the
        function that runs each case."""
        model = self.build(cls, device)
        if not callable(model):
            raise TypeError(f"ModelNew(*get_init_inputs()) gave a {type(model).__name__}, "
                            "which cannot be called on the inputs")

        def forward(*inputs: Any) -> Any:
            with torch.no_grad():
                return model(*inputs)
        return forward

    def cost(self, case: dict) -> dict[str, int]:
        return {"flops": 0, "bytes": self.bytes}


# ---- the folder -> Tasks -----------------------------------------------------------------------
def _natural(p: Path) -> tuple:
    return tuple(int(s) if s.isdigit() else s for s in re.split(r"(\d+)", p.stem))


def problem_files(root: Path) -> dict[str, Path]:
    """task id ("level1/19_ReLU") -> file, in level and problem-number order."""
    levels = [root] if _LEVEL.fullmatch(root.name) else sorted(
        (d for d in root.iterdir() if d.is_dir() and _LEVEL.fullmatch(d.name)), key=_natural)
    files = {f"{d.name}/{p.stem}": p for d in levels
             for p in sorted(d.glob("*.py"), key=_natural) if not p.name.startswith("_")}
    if not files:
        raise SuiteError(f"no KernelBench problems under {root}: expected level1/, level2/, "
                         "... folders of <n>_<Name>.py files (set suite.path to their parent)")
    return files


def _signature(path: Path, source: str) -> str:
    """`class ModelNew(nn.Module) with __init__(...) and forward(...)`, after checking the file."""
    try:
        tree = ast.parse(source)
    except SyntaxError as e:
        raise SuiteError(f"malformed KernelBench problem {path}: line {e.lineno}: "
                         f"{e.msg}") from None
    top = {n.name: n for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
    model = top.get("Model")
    methods = {n.name: n for n in getattr(model, "body", []) if isinstance(n, ast.FunctionDef)}
    missing = ["class Model(nn.Module)"] if not isinstance(model, ast.ClassDef) else (
        [] if "forward" in methods else ["Model.forward()"])
    missing += [f"{f}()" for f in ("get_inputs", "get_init_inputs")
                if not isinstance(top.get(f), ast.FunctionDef)]
    if missing:
        raise SuiteError(f"malformed KernelBench problem {path}: it defines no "
                         f"{', no '.join(missing)}")
    init = ast.unparse(methods["__init__"].args) if "__init__" in methods else "self"
    return (f"class ModelNew(nn.Module) with __init__({init}) and "
            f"forward({ast.unparse(methods['forward'].args)})")


def _description(task_id: str) -> str:
    return f"KernelBench problem {task_id}.\n\n" + textwrap.fill(
        "The reference below defines `Model`, `get_inputs()` and `get_init_inputs()`. Write "
        "`ModelNew`, a torch.nn.Module with the same constructor signature as `Model`, whose "
        "forward returns the same outputs as Model's, computed by Triton kernels. The harness "
        "calls torch.manual_seed(42) right before building Model(*get_init_inputs()), and again "
        "before building ModelNew(*get_init_inputs()), so parameters created the same way in the "
        "same order (for example the same nn.Linear layers) get the same values. forward is "
        "called on get_inputs() under torch.no_grad(); outputs must match within "
        f"atol = rtol = {ATOL:g} (float32; 1e-2 for float16 and bfloat16).", 100)


def _movement(task_id: str, source: str) -> tuple[bool, str]:
    """Whether the problem only moves data, by the aten ops its forward runs (`movement.py`;
    KernelBench gives no flop count, and zero flops would make every problem data movement)."""
    problem = KernelBenchProblem(task_id + ".py", source)

    def build() -> tuple[Callable[..., Any], tuple]:
        with shim.seeded(WEIGHT_SEED):
            model = problem.ns["Model"](*problem.ns["get_init_inputs"]())
        return model, tuple(problem.ns["get_inputs"]())
    with hub_offline():
        return movement.decide_forward(build)


def _render(task_id: str, level: int, signature: str, source: str) -> str:
    return shim.header(_description(task_id), __name__, task_id + ".py") + "\n".join([
        "from kbx_ray.suites.kernelbench import KernelBenchProblem", "",
        "ENTRY = 'ModelNew'", f"CATEGORY = {'KernelBench/' + task_id.split('/')[0]!r}",
        f"LEVEL = {level}", f"SIGNATURE = {signature!r}", f"REFERENCE_SOURCE = {source!r}",
        "CASES = [{'name': 'default', 'small': True}]", "MUTATES = ()",
        f"DATA_MOVEMENT = {_movement(task_id, source)!r}",
        f"PROBLEM = KernelBenchProblem({task_id + '.py'!r}, REFERENCE_SOURCE)",
        "TOLERANCE = PROBLEM.tolerance", "make_inputs = PROBLEM.make_inputs", "cost = PROBLEM.cost",
        "bind_candidate = PROBLEM.bind_candidate",
        "ModelNew = PROBLEM.reference  # the contract's <name>: the reference", ""])


@contextmanager
def hub_offline() -> Iterator[None]:
    """The Hugging Face hub is offline inside the block, whether or not huggingface_hub is already
    imported, and as it was outside it.

    huggingface_hub reads HF_HUB_OFFLINE once, at import, into `huggingface_hub.constants`, and asks
    that constant (`is_offline_mode()`) before each request; transformers asks huggingface_hub.
    Setting the variable alone is too late in a process that has already imported either (vLLM
    does), where a level-4 problem would try the network and wait out its retries, so the constant
    is set too. On the way out both are put back, so the rest of the process (a vLLM engine that
    downloads its model) is not left offline."""
    before = os.environ.get("HF_HUB_OFFLINE")
    os.environ["HF_HUB_OFFLINE"] = "1"
    constants = sys.modules.get("huggingface_hub.constants")
    had = getattr(constants, "HF_HUB_OFFLINE", None)
    if constants is not None:
        constants.HF_HUB_OFFLINE = True
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("HF_HUB_OFFLINE", None)
        else:
            os.environ["HF_HUB_OFFLINE"] = before
        if constants is not None:
            constants.HF_HUB_OFFLINE = had
        elif (imported := sys.modules.get("huggingface_hub.constants")) is not None:
            # first imported inside the block: the value the import would have read outside it
            imported.HF_HUB_OFFLINE = (
                (before or os.environ.get("TRANSFORMERS_OFFLINE") or "").upper()
                in {"1", "ON", "YES", "TRUE"})


def _probe(path: Path, source: str) -> None:
    """The problem builds here: its module runs and get_init_inputs() answers (offline, see
    `hub_offline`: a model fetched from the Hugging Face hub fails fast instead of waiting on the
    network)."""
    try:
        with hub_offline():
            _build(path, source)
    except ModuleNotFoundError as e:
        raise SuiteError(f"needs {e.name} (pip install {e.name}; a level-4 problem also needs its "
                         "model's config and weights from the Hugging Face hub)") from None
    except Exception as e:  # noqa: BLE001 - the problem's own code ran: name it, not us
        first = (str(e).splitlines() or [""])[0][:200]
        if "huggingface" in first.lower():
            raise SuiteError("needs its model's config and weights from the Hugging Face hub, "
                             "which are not cached here (offline)") from None
        raise SuiteError(f"building it raised {type(e).__name__}: {first}") from None


def _build(path: Path, source: str) -> None:
    problem = KernelBenchProblem(path.name, source)
    with shim.OnDevice("cpu"):
        problem.ns["get_init_inputs"]()


def load(root: Path, include: list[str] | None,
         skipped: dict[str, str] | None = None) -> list[Task]:
    """Every selected problem that builds; the others go to `skipped` (id -> one-line reason)."""
    files = problem_files(root)
    tasks = []
    for task_id in select_ids(list(files), include):
        source = files[task_id].read_text()
        m = _LEVEL.fullmatch(task_id.split("/")[0])
        level = int(m.group(1)) if m else 0
        try:
            signature = _signature(files[task_id], source)
            path = shim.shim_path("kernelbench", task_id, source)
            if not path.exists():
                _probe(files[task_id], source)
            shim.ensure_shim(path, lambda: _render(task_id, level, signature, source))
            tasks.append(shim.task_from_shim(path, task_id, str(files[task_id])))
        except SuiteError as e:
            if skipped is None:
                raise
            skipped[task_id] = str(e)
    return tasks


def _ids(root: Path) -> tuple[list[str], list[str]]:
    ids = list(problem_files(root))
    return ids, ids


@register("suite", "kernelbench")
def suite_format() -> SuiteFormat:
    return SuiteFormat("a KernelBench folder holding level1/, level2/, ...", load, _ids)
