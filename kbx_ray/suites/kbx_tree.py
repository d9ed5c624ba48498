"""A KernelBench-X tree on disk -> (task id, JSON entry, file), and the helper modules its test code
imports.
More: kbx_ray/suites/README.md, `kbx_tree.py`.
"""
from __future__ import annotations

import ast
import importlib.util
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from kbx_ray.errors import SuiteError

SEPARATOR = re.compile(r"^#{40,}[ \t]*$", re.M)
_KNOWN = {"torch", "triton", "numpy", "np", "math", "typing"}


@dataclass(frozen=True)
class Located:
    task_id: str           # "Math/div"
    entry: dict            # its JSON entry ({"name": stem} for an unlisted file)
    path: Path             # the problem file
    listed: bool           # in the task list (an unlisted file loads only by id)


def task_list(root: Path) -> tuple[Path, list[dict]]:
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


def locate(listing: Path, entries: list[dict]) -> tuple[dict[str, Located], dict[str, str]]:
    """Every task of the tree (listed ones first, in list order, then the unlisted files), and
    the entries that locate no single file, by the id they would have, with the reason."""
    base = listing.parent
    files = [p for p in sorted(base.rglob("*.py")) if "utils" not in p.relative_to(base).parts]
    by_rel = {p.relative_to(base).as_posix(): p for p in files}
    by_stem: dict[str, list[Path]] = {}
    for p in files:
        by_stem.setdefault(p.stem, []).append(p)
    out: dict[str, Located] = {}
    broken: dict[str, str] = {}
    for e in entries:
        try:
            path = _find(e, by_rel, by_stem, listing)
        except SuiteError as x:
            where = str(e.get("file") or f"{e.get('category', '?')}/{e['name']}")
            broken[where.removesuffix(".py")] = str(x)
            continue
        task_id = f"{path.parent.name}/{path.stem}"
        if task_id in out:
            broken[f"{task_id}#{e['name']}"] = (f"{listing.name}: entries "
                                                f"{out[task_id].entry['name']!r} and {e['name']!r} "
                                                f"both name the file {task_id}.py")
            continue
        out[task_id] = Located(task_id, e, path, True)
    folders = {loc.path.parent for loc in out.values()}
    for p in files:
        task_id = f"{p.parent.name}/{p.stem}"
        if p.parent in folders and task_id not in out and SEPARATOR.search(p.read_text()):
            out[task_id] = Located(task_id, _variant_entry(p, out), p, False)
    return out, broken


def _find(e: dict, by_rel: dict[str, Path], by_stem: dict[str, list[Path]], listing: Path) -> Path:
    """The entry's file: its `file` field (a path under the list's folder, or its basename, as
    the peer falls back to), else `<category>/<name>.py`."""
    if isinstance(e.get("file"), str) and e["file"]:
        rel = e["file"].replace("\\", "/").lstrip("./")
        hits = [p for r, p in by_rel.items() if r == rel or r.endswith("/" + rel)]
        hits = hits or by_stem.get(Path(rel).stem, [])
        where = rel
    else:
        category = e.get("category")
        hits = [p for p in by_stem.get(e["name"], []) if category in (None, p.parent.name)]
        where = f"{category or '<Category>'}/{e['name']}.py"
    if len(hits) != 1:
        why = "no file" if not hits else f"{len(hits)} files (give its entry a \"file\")"
        raise SuiteError(f"KernelBench-X task {e['name']!r} in {listing.name}: {why} {where} "
                         f"under {listing.parent}")
    return hits[0]


def _variant_entry(path: Path, listed: dict[str, Located]) -> dict:
    """An unlisted file's entry: its base task's (relu for relu_fp16), renamed, else a stub."""
    base_id = f"{path.parent.name}/{re.sub(r'_(fp16|bf16|fp32|fp64|int8)$', '', path.stem)}"
    base = listed.get(base_id)
    entry = {k: v for k, v in (base.entry if base else {}).items() if k not in ("file", "name")}
    return {**entry, "name": path.stem, "file": f"{path.parent.name}/{path.name}",
            "unlisted": True}


def split(path: Path, stem: str) -> tuple[str, str, str, int]:
    """(function name, reference source, test source, the test's first line), checked.

    The function the test code calls is the one named like the file's stem (the peer's rule), or
    the only function above the separator."""
    source = path.read_text()
    m = SEPARATOR.search(source)
    if m is None:
        raise SuiteError(f"malformed KernelBench-X file {path}: no separator line of '#' "
                         "characters between the reference and the test code")
    ref, test = source[:m.start()], source[m.end():]
    try:
        ref_tree, test_tree = ast.parse(ref), ast.parse(test)
    except SyntaxError as e:
        raise SuiteError(f"malformed KernelBench-X file {path}: line {e.lineno}: {e.msg}") from None
    funcs = [n.name for n in ref_tree.body if isinstance(n, ast.FunctionDef)]
    called = {n.func.id for n in ast.walk(test_tree)
              if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
    name = stem if stem in funcs else next((f for f in funcs if f in called), None)
    name = name or (funcs[0] if len(funcs) == 1 else None)
    problems = [] if name else [f"no function {stem}() before the separator"]
    if not any(isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "test_results"
                                                 for t in n.targets) for n in test_tree.body):
        problems.append("no `test_results = test_...()` after the separator")
    if problems:
        raise SuiteError(f"malformed KernelBench-X file {path}: {'; '.join(problems)}")
    return str(name), ref, test, source[:m.end()].count("\n") + 1


def helper_sources(test: str, path: Path) -> dict[str, str]:
    """Sources of the modules the test code imports that are neither installed nor standard: the
    tree's own helpers, looked up in a `utils/` folder (or the folder itself) above the file."""
    wanted = set()
    for node in ast.walk(ast.parse(test)):
        if isinstance(node, ast.Import):
            wanted |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            wanted.add(node.module.split(".")[0])
    out = {}
    for name in sorted(wanted - _KNOWN - set(sys.stdlib_module_names)):
        found = next((d / sub / f"{name}.py" for d in path.parents for sub in ("utils", ".")
                      if (d / sub / f"{name}.py").is_file()), None)
        if found is not None:
            out[name] = found.read_text()
        elif importlib.util.find_spec(name) is None:
            raise SuiteError(f"{path.name}: its test code imports {name}, found in no utils/ "
                             f"folder above it and not installed (pip install {name})")
    return out
