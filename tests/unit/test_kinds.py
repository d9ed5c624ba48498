"""ErrorKind and Stage are str enums: a record written with members holds the same plain strings
(Parquet, JSON, W&B rows) as one written with the strings, and kbx_ray/ produces and compares
kinds and stages through the enums, never through their string values (checked on its ASTs)."""
from __future__ import annotations

import ast
import json
import pickle
from dataclasses import asdict
from pathlib import Path
from types import SimpleNamespace

import pyarrow.parquet as pq

from kbx_ray.records.rows import evaluation_row
from kbx_ray.sinks.parquet import ParquetSink
from kbx_ray.types import STAGES, CaseResult, ErrorKind, EvalResult, Stage, Task

ROOT = Path(__file__).resolve().parents[2]
KINDS = {k.value for k in ErrorKind}
STAGE_NAMES = {s.value for s in Stage}
# where the values may be written as strings, and why
EXEMPT = {
    "kbx_ray/types.py": "the enums' definition",
    "kbx_ray/evaluate/worker/": "the sandbox worker: standard library only; its kinds go over "
                                "the wire as JSON and the parent checks them against ErrorKind",
}


def test_a_member_is_its_string() -> None:
    kind = ErrorKind.TIMING_INVALID
    assert kind == "timing_invalid" and "timing_invalid" == kind and hash(kind) == hash(kind.value)
    assert f"{kind}" == str(kind) == "%s" % kind == "timing_invalid"
    assert type(str(kind)) is str
    assert json.dumps({Stage.STATIC: [kind]}) == '{"static": ["timing_invalid"]}'
    assert pickle.loads(pickle.dumps(kind)) is kind
    assert ErrorKind("mismatch") is ErrorKind.MISMATCH and "mismatch" in {ErrorKind.MISMATCH}
    assert [str(s) for s in STAGES] == ["extract", "static", "compile", "correctness", "timing",
                                        "done"]
    assert STAGES.index("timing") == 4 and EvalResult("t", "c").stage == "extract"


def _result(kind: type) -> EvalResult:
    """The same failed evaluation, its kinds and stages as `kind` (ErrorKind/Stage, or str)."""
    err, stage = kind("timing_invalid"), kind("timing")
    return EvalResult(
        task_id="activation/relu", candidate_id="k1", stage=stage, call_ok=True,
        error_kind=err, error_msg="too fast",
        cases=[CaseResult(case="a", seeds=1, error_kind=kind("mismatch"), message="x")],
        stage_s={kind("static"): 0.5, kind("correctness"): 1.25})


def _row(res: EvalResult) -> dict:
    task = Task("activation/relu", "relu", "Activation", 1, "", "", "", "", "", (), "h")
    cell = SimpleNamespace(cell_id="c", task_id=task.task_id, method=SimpleNamespace(name="m"),
                           model=SimpleNamespace(name="x"), sample=0)
    attempt = SimpleNamespace(result=res, candidate=SimpleNamespace(candidate_id="k1"), round=0,
                              branch=0, parent_candidate_id="", stop_reason="", final=True,
                              generation=None)
    row = evaluation_row("s", cell, task, attempt, 0.0, "cpu")
    return {k: v for k, v in row.items() if k != "finished_at"}


def test_a_record_with_members_writes_the_same_strings_as_one_with_strings(tmp_path: Path) -> None:
    as_enum, as_str = _result(lambda v: ErrorKind(v) if v in KINDS else Stage(v)), _result(str)
    assert isinstance(as_enum.stage, Stage) and isinstance(as_enum.error_kind, ErrorKind)
    rows = _row(as_enum), _row(as_str)
    assert rows[0] == rows[1]
    # the row every sink gets (Parquet, console, W&B) holds plain strings, not members
    assert type(rows[0]["stage"]) is str and type(rows[0]["error_kind"]) is str
    assert rows[0]["stage"] == "timing" and rows[0]["error_kind"] == "timing_invalid"
    assert json.loads(rows[0]["cases"])[0]["error_kind"] == "mismatch"
    assert rows[0]["stage_s"] == '{"static": 0.5, "correctness": 1.25}'
    tables = []
    for name, row in zip(("enum", "str"), rows):
        ParquetSink(tmp_path / name).write_evaluations([row])
        (part,) = (tmp_path / name / "evaluations").glob("part-*.parquet")
        tables.append(pq.read_table(part).drop(["finished_at"]).to_pylist())
    assert tables[0] == tables[1]
    assert (tables[0][0]["stage"], tables[0][0]["error_kind"]) == ("timing", "timing_invalid")
    # `kbx eval --json` prints the result as JSON: the same text either way
    assert json.dumps(asdict(as_enum), indent=2) == json.dumps(asdict(as_str), indent=2)


# ---- the rule: kinds and stages are written as ErrorKind/Stage members in kbx_ray/ ---------------

def _named(node: ast.AST) -> bool:
    """The expression names a stage (`res.stage`, `f.stage`, `stage`, ...). Kinds need no such
    context: an ErrorKind value is caught anywhere (prompts' feedback kinds share stage words)."""
    return "stage" in ast.unparse(node).lower()


def _literals(node: ast.AST | None, values: set[str]) -> list[ast.Constant]:
    """`node` itself, or the items of a tuple/list/set display, that are strings in `values`."""
    items = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else [node]
    return [n for n in items if isinstance(n, ast.Constant) and n.value in values]


def _stage_params(trees: list[ast.Module]) -> dict[str, set[int]]:
    """Callee name -> positions of its parameters that take a stage (functions, classes' own
    `__init__`, dataclass fields), so `Fail("timing", ...)` counts as giving a stage."""
    out: dict[str, set[int]] = {}
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                fields = [s.target.id for s in node.body
                          if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)]
                init = [s for s in node.body
                        if isinstance(s, ast.FunctionDef) and s.name == "__init__"]
                names = [a.arg for a in init[0].args.args[1:]] if init else fields
                out.setdefault(node.name, set()).update(
                    i for i, n in enumerate(names) if "stage" in n)
            elif isinstance(node, ast.FunctionDef) and node.name != "__init__":
                names = [a.arg for a in node.args.args]
                skip = 1 if names[:1] in (["self"], ["cls"]) else 0
                out.setdefault(node.name, set()).update(
                    i - skip for i, n in enumerate(names) if "stage" in n and i >= skip)
    return out


def violations(trees: dict[str, ast.Module]) -> list[str]:
    """Every string literal of an ErrorKind value (anywhere but a docstring) and every literal of
    a Stage value given or compared as a stage, as `path:line: value`."""
    stage_at = _stage_params(list(trees.values()))
    found: list[tuple[str, ast.Constant]] = []
    for path, tree in trees.items():
        docs = {id(n.body[0].value) for n in ast.walk(tree)
                if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                and n.body and isinstance(n.body[0], ast.Expr)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and node.value in KINDS and id(node) not in docs:
                found.append((path, node))
            elif isinstance(node, ast.Compare):
                sides = [node.left, *node.comparators]
                if any(_named(s) for s in sides):
                    found += [(path, c) for s in sides for c in _literals(s, STAGE_NAMES)]
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for t in targets:
                    pairs = (zip(t.elts, node.value.elts) if isinstance(t, ast.Tuple)
                             and isinstance(node.value, ast.Tuple) else [(t, node.value)])
                    found += [(path, c) for tgt, v in pairs if _named(tgt)
                              for c in _literals(v, STAGE_NAMES)]
            elif isinstance(node, ast.Call):
                found += [(path, c) for k in node.keywords if k.arg and "stage" in k.arg
                          for c in _literals(k.value, STAGE_NAMES)]
                f = node.func
                name = f.id if isinstance(f, ast.Name) else getattr(f, "attr", "")
                found += [(path, c) for i in stage_at.get(name, ()) if i < len(node.args)
                          for c in _literals(node.args[i], STAGE_NAMES)]
    return sorted({f"{p}:{c.lineno}: {c.value!r}" for p, c in found})


def _package_trees() -> dict[str, ast.Module]:
    out = {}
    for path in sorted((ROOT / "kbx_ray").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if not any(rel.startswith(e) for e in EXEMPT):
            out[rel] = ast.parse(path.read_text(encoding="utf-8"), rel)
    return out


def test_kbx_ray_writes_kinds_and_stages_as_enum_members() -> None:
    bad = violations(_package_trees())
    assert not bad, ("use ErrorKind/Stage (kbx_ray/types.py), not their strings, or add the file "
                     "to EXEMPT with its reason:\n" + "\n".join(bad))


def test_the_exemptions_are_few_and_exist() -> None:
    assert len(EXEMPT) <= 3
    for rel in EXEMPT:
        assert (ROOT / rel).exists(), rel


def test_the_checker_finds_each_way_of_writing_a_value() -> None:
    src = '''
"""Docstring: mismatch."""
def fail(stage, kind): ...
class Fail(Exception):
    def __init__(self, stage, kind): ...
def f(res, reply):
    """crash"""
    res.error_kind = "infra_error"
    res.stage, ok = "done", True
    if res.stage == "timing" or reply.get("error_kind") in ("crash", "timeout"): ...
    fail("static", ErrorKind.MISMATCH)
    raise Fail("compile", ErrorKind.MISMATCH)
    EvalResult(stage="correctness")
    x = {"timing": 1}   # a stage's word as a dict key: not a stage
    if feedback_kind == "compile": ...  # nor a feedback kind
    cfg.timing, w = "extract", 0
'''
    got = violations({"m.py": ast.parse(src)})
    assert got == ["m.py:10: 'crash'", "m.py:10: 'timeout'", "m.py:10: 'timing'",
                   "m.py:11: 'static'", "m.py:12: 'compile'", "m.py:13: 'correctness'",
                   "m.py:8: 'infra_error'", "m.py:9: 'done'"]
