"""Another harness's kernels -> replay rows, so `model=replay` re-judges them with this harness.
More: kbx_ray/llm/README.md, `replay_files.py`.
"""
from __future__ import annotations

import ast
import os
import re
from pathlib import Path

from kbx_ray.prompting.candidate_file import read_source
from kbx_ray.errors import ConfigError

PEER_ENTRY = "kernel_function"
_VERDICT_KEYS = ("peer_verdict", "verdict", "exe_ok", "ok")
_FENCE = re.compile(r"```(?:python|py)?[ \t]*\n(.*?)(?:```|\Z)", re.S)


class ReplayFilesError(ConfigError):
    """A prediction that names no task, or a folder with no kernels."""


def is_predictions(rows: list[dict]) -> bool:
    """KernelBench-X's shape: kernels keyed by file, not a sweep's generations."""
    return bool(rows) and "task_id" not in rows[0] and "file" in rows[0] and (
        "predict" in rows[0] or "code" in rows[0])


def prediction_rows(rows: list[dict], where: str | Path) -> list[dict]:
    out: list[dict] = []
    for i, r in enumerate(rows, 1):
        if not isinstance(r.get("file"), str) or not ("predict" in r or "code" in r):
            raise ReplayFilesError(f"replay source {where}: line {i} has no \"file\" and "
                                   "\"predict\": KernelBench-X's JSONL needs both")
        code = str(r.get("predict") if "predict" in r else r.get("code") or "")
        out.append(_row(_task_id(r["file"], where), code, _verdict(r), out))
    return out


def folder_rows(folder: Path) -> list[dict]:
    files = sorted(p for p in folder.rglob("*.py") if not p.name.startswith("_"))
    if not files:
        raise ReplayFilesError(f"replay source {folder} holds no .py kernels, no generations/ "
                               "and no .parquet files")
    out: list[dict] = []
    for p in files:
        src = read_source(p)
        if not src.ok:  # recorded as the cell's completion: no code, and the reason why
            out.append({**_row(_task_id(_file_task(p, folder, {}), folder), "", "", out),
                        "completion": f"(kbx replay: no kernel: {src.error_msg})"})
            continue
        meta = _docstring_fields(src.code)
        out.append(_row(_task_id(_file_task(p, folder, meta), folder), src.code,
                        meta.get("peer", ""), out))
    return out


def _file_task(p: Path, folder: Path, meta: dict[str, str]) -> str:
    stem = p.stem.split("__")[0]
    return meta.get("task") or (f"{p.parent.name}/{stem}" if p.parent != folder else stem)


def with_peer_entry(code: str, stem: str) -> str:
    """The code, plus `def <stem>` calling `kernel_function` when only the latter is defined."""
    try:
        names = {n.name for n in ast.parse(code).body if isinstance(n, ast.FunctionDef)}
    except SyntaxError:
        return code
    if stem in names or PEER_ENTRY not in names or not stem.isidentifier():
        return code
    return (f"{code.rstrip()}\n\n\ndef {stem}(*args, **kwargs):  # the peer's entry name, "
            f"{PEER_ENTRY}\n    return {PEER_ENTRY}(*args, **kwargs)\n")


# ---- helpers -----------------------------------------------------------------------------------
def _row(task_id: str, text: str, verdict: str, earlier: list[dict]) -> dict:
    code = _code_of(text)
    code = with_peer_entry(code, task_id.rsplit("/", 1)[-1])
    sample = sum(1 for r in earlier if r["task_id"] == task_id)
    return {"task_id": task_id, "sample": sample, "round": 0, "branch": 0,
            "completion": f"```python\n{code.rstrip()}\n```\n" if code.strip() else "",
            "peer_verdict": verdict, "model": "replay-files"}


def _code_of(text: str) -> str:
    """The first fenced block, else the text itself (the peer's reading of `predict`)."""
    m = _FENCE.search(text)
    return (m.group(1) if m else text).replace("<|im_end|>", "").replace("<|EOT|>", "")


def _verdict(r: dict) -> str:
    for key in _VERDICT_KEYS:
        v = r.get(key)
        if isinstance(v, bool):
            return "pass" if v else "fail"
        if isinstance(v, str) and v.lower() in ("pass", "fail", "true", "false"):
            return "pass" if v.lower() in ("pass", "true") else "fail"
    return ""


def _docstring_fields(code: str) -> dict[str, str]:
    try:
        doc = ast.get_docstring(ast.parse(code)) or ""
    except SyntaxError:
        return {}
    return {k: v.strip() for k, v in re.findall(r"^(task|peer):\s*(\S+)", doc, re.M)}


def _task_id(file: str, where: str | Path) -> str:
    rel = file.replace("\\", "/").removesuffix(".py").strip("/")
    parts = rel.split("/")
    if len(parts) >= 2:
        return "/".join(parts[-2:])
    category = _categories().get(parts[0])
    if category is None:
        raise ReplayFilesError(f"replay source {where}: {file!r} names no category and the "
                               "KernelBench-X tree (KBX_EXTERNAL) has no such file: write it as "
                               "\"<Category>/<name>.py\"")
    return f"{category}/{parts[0]}"


def _categories() -> dict[str, str]:
    """stem -> category, from the KernelBench-X tree next to the checkout (stems are unique)."""
    root = Path(os.environ.get("KBX_EXTERNAL") or Path(__file__).resolve().parents[2] / ".." /
                "shared" / "external") / "KernelBenchX" / "data" / "kernelbenchx"
    return {p.stem: p.parent.name for p in sorted(root.glob("*/*.py"))} if root.is_dir() else {}
