"""KernelBench-X's published GEAK corpus -> replay rows, one kernel per (task, round), every record
accounted for.
More: kbx_ray/llm/README.md, `replay_corpus.py`.
"""
from __future__ import annotations

import json
import os
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from kbx_ray.errors import ConfigError
from kbx_ray.llm import corpus_code
from kbx_ray.llm.replay_files import with_peer_entry

KEYS = ("task_id", "from_round", "to_round", "before", "after", "before_code", "after_code")
_ROUND = re.compile(r"^round_(\d+)$")
_ERROR_CHARS = 300
_RAISED = re.compile(r"^[\w.]*(Error|Exception|Exit|Interrupt)\b:?")


class CorpusError(ConfigError):
    """A corpus file that is not JSON Lines of transition records."""


@dataclass
class Kernel:
    task_id: str            # "Activation/gelu_bf16"
    round: int
    published: str          # the text as published
    verdict: dict           # the study's verdict of it
    source: str             # "all_records.jsonl:3 after_code"
    status: str = "judged"  # judged | skipped
    reason: str = ""        # why skipped; for a judged kernel, what was done to its text
    also: list[str] = field(default_factory=list)  # other records holding the same kernel
    code: str = ""          # what is judged


@dataclass
class Corpus:
    path: Path
    records: list[dict] = field(default_factory=list)  # source, task_id, transition, status,
    #                                                    reason
    kernels: dict[tuple[str, int], Kernel] = field(default_factory=dict)

    def summary(self) -> str:
        rec = Counter(r["status"] for r in self.records)
        ker = Counter(k.status for k in self.kernels.values())
        why = Counter(_reason_kind(k.reason) for k in self.kernels.values()
                      if k.status == "skipped")
        whys = ", ".join(f"{n} {w}" for w, n in sorted(why.items(), key=lambda x: (-x[1], x[0])))
        return (f"corpus {self.path}: {len(self.records)} records read ({rec['used']} used, "
                f"{rec['repeat']} repeats of an earlier record, {rec['skipped']} skipped); "
                f"{len(self.kernels)} kernels (task x round): {ker['judged']} to judge, "
                f"{ker['skipped']} skipped"
                + (f" ({whys})" if whys else ""))


def is_corpus(rows: list[dict]) -> bool:
    return bool(rows) and isinstance(rows[0], dict) and all(k in rows[0] for k in KEYS)


def corpus_files(p: Path) -> list[Path]:
    """The corpus's JSONL files in a folder (all_records.jsonl first), if they hold its records."""
    files = sorted(p.glob("*.jsonl"), key=lambda f: (f.name != "all_records.jsonl", f.name))
    for f in files[:1]:
        first = next((ln for ln in f.read_text(encoding="utf-8").splitlines() if ln.strip()), "")
        try:
            if not is_corpus([json.loads(first)]):
                return []
        except json.JSONDecodeError:
            return []
    return files


def read_corpus(path: Path, known_tasks: set[str] | None = None) -> Corpus:
    """Every record of the corpus at `path` (a folder of .jsonl files, or one file); kernels of
    tasks not in `known_tasks` (default: the KernelBench-X tree beside the corpus) are skipped."""
    path = Path(path)
    files = corpus_files(path) if path.is_dir() else [path]
    corpus = Corpus(path)
    raw: list[tuple[str, dict]] = []
    seen: dict[str, str] = {}
    for f in files:
        for i, line in enumerate(f.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            where = f"{f.name}:{i}"
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as e:
                raise CorpusError(f"corpus file {f}: line {i}: not JSON ({e.msg})") from None
            if not is_corpus([rec]) or None in (_round(rec["from_round"]),
                                                _round(rec["to_round"])):
                raise CorpusError(f"corpus file {f}: line {i} is not a transition record: it needs "
                                  f"{', '.join(KEYS)}, with rounds named round_<n>")
            text = json.dumps(rec, sort_keys=True)
            if text in seen:
                corpus.records.append(_entry(where, rec, "repeat", f"same record as {seen[text]}"))
                continue
            seen[text] = where
            raw.append((where, rec))
    _kernels(corpus, raw, known_tasks if known_tasks is not None else tree_tasks(path))
    for where, rec in raw:
        why = [_unused(corpus.kernels[(_task(rec), _round(rec[f"{s}_round"]))],
                       rec[f"{side}_code"] or "")
               for s, side in (("from", "before"), ("to", "after"))]
        reason = "; ".join(dict.fromkeys(filter(None, why)))
        corpus.records.append(_entry(where, rec, "skipped" if all(why) else "used", reason))
    corpus.records.sort(key=lambda r: (files.index(path / r["source"].split(":")[0])
                                       if path.is_dir() else 0, int(r["source"].split(":")[1])))
    return corpus


def _unused(k: Kernel, text: str) -> str:
    """Why a record's kernel text is not judged ("" when it is)."""
    if text != k.published:
        return f"round {k.round}: another text of this kernel came first ({k.source})"
    return f"round {k.round}: {k.reason}" if k.status == "skipped" else ""


def _kernels(corpus: Corpus, raw: list[tuple[str, dict]], known: set[str]) -> None:
    book = corpus_code.LineBook()
    for _, rec in raw:
        t, a, b = _task(rec), _round(rec["from_round"]), _round(rec["to_round"])
        stats = rec.get("diff_stats") or {}
        book.add_record(f"{t}@{a}", f"{t}@{b}", rec.get("unified_diff") or "",
                        int(stats.get("lines_a") or 0), int(stats.get("lines_b") or 0),
                        (rec["before_code"] or "", rec["after_code"] or ""))
    for where, rec in raw:
        t = _task(rec)
        for side, key in (("before", "from_round"), ("after", "to_round")):
            rnd = _round(rec[key])
            code, verdict = rec[f"{side}_code"] or "", rec[side] or {}
            old = corpus.kernels.get((t, rnd))
            if old is not None:
                old.also.append(f"{where} {side}_code" + ("" if code == old.published else
                                                           " (a different text: not judged)"))
                continue
            k = Kernel(t, rnd, code, verdict, f"{where} {side}_code")
            corpus.kernels[(t, rnd)] = k
            if t not in known:
                k.status, k.reason = "skipped", "task not in the KernelBench-X tree"
            else:
                _prepare(k, book)


def _prepare(k: Kernel, book: corpus_code.LineBook) -> None:
    """The code to judge (harness cut, collapsed newlines rebuilt), or the reason there is none."""
    if not k.published.strip():
        k.status, k.reason = "skipped", "no code published"
        return
    code, line = corpus_code.cut_harness(k.published)
    notes = [f"the study's harness below line {line} cut"] if line else []
    key = f"{k.task_id}@{k.round}"
    if book.sizes.get(key, 0) > k.published.count("\n") + 1 and not corpus_code.parses(code):
        # fewer lines than its record's diff counted: newlines collapsed (a kernel that merely
        # does not parse is judged as it is)
        rebuilt, why = corpus_code.recover(key, k.published, book)
        if rebuilt is None:
            k.status, k.reason = "skipped", why
            return
        code, notes = rebuilt, ["newlines collapsed as published: rebuilt from the corpus's diffs, "
                                "harness cut"]
    k.code, k.reason = with_peer_entry(code, k.task_id.rsplit("/", 1)[-1]), "; ".join(notes)


def replay_rows(corpus: Corpus) -> list[dict]:
    """One replay row per kernel of a task in the tree, and one per round of such a task that the
    corpus holds no kernel for (its completion says so), rounds 0 .. the corpus's last."""
    top = max((k.round for k in corpus.kernels.values()), default=0)
    tasks = sorted({k.task_id for k in corpus.kernels.values()
                    if k.reason != "task not in the KernelBench-X tree"})
    rows = []
    for t in tasks:
        for rnd in range(top + 1):
            k = corpus.kernels.get((t, rnd))
            if k is None:
                text = f"(kbx replay: no kernel: the corpus holds no round-{rnd} kernel of {t})"
                rows.append(_row(t, rnd, text, {}))
            elif k.status == "skipped":
                rows.append(_row(t, rnd, f"(kbx replay: no kernel: {k.reason})", _peer(k)))
            else:
                rows.append(_row(t, rnd, f"```python\n{k.code.rstrip()}\n```\n", _peer(k)))
    return rows


def tree_tasks(corpus_path: Path) -> set[str]:
    """Task ids of the KernelBench-X tree beside the corpus (`data/kernelbenchx/`), else at
    $KBX_EXTERNAL/KernelBenchX/data; empty when neither exists."""
    near = Path(corpus_path).resolve()
    near = near.parent if near.is_file() else near
    external = Path(os.environ.get("KBX_EXTERNAL") or Path(__file__).resolve().parents[2] / ".." /
                    "shared" / "external") / "KernelBenchX" / "data"
    for data in (near.parent, external):
        tree = data / "kernelbenchx"
        if tree.is_dir():
            return {f"{p.parent.name}/{p.stem}" for p in tree.glob("*/*.py")}
    return set()


# ---- helpers -----------------------------------------------------------------------------------
def _round(name: object) -> int | None:
    m = _ROUND.match(str(name))
    return int(m.group(1)) if m else None


def _task(rec: dict) -> str:
    return str(rec["task_id"]).replace("\\", "/").removesuffix(".py").strip("/")


def _entry(where: str, rec: dict, status: str, reason: str) -> dict:
    return {"source": where, "task_id": _task(rec),
            "transition": f"{rec['from_round']}->{rec['to_round']}", "status": status,
            "reason": reason}


def _peer(k: Kernel) -> dict:
    v = k.verdict
    speedup = v.get("speedup")
    return {"round": k.round, "call_ok": v.get("call_ok"), "exec_ok": v.get("exe_ok"),
            "perf_ok": v.get("perf_ok"),
            "speedup": float(speedup) if isinstance(speedup, (int, float)) else None,
            "error": _error(v), "source": k.source,
            "skip": k.reason if k.status == "skipped" else ""}


def _error(v: dict) -> str:
    """The study's error, in one line: its exception line, else (a call that failed) the last line
    of its traceback, which the corpus often cuts mid-line; a kernel that ran has only warnings."""
    lines = [ln.strip() for ln in str(v.get("error") or "").splitlines() if ln.strip()]
    raised = [ln for ln in lines if _RAISED.match(ln)]
    if raised:
        return raised[-1][:_ERROR_CHARS]
    return "" if v.get("call_ok") or not lines else f"(traceback cut) {lines[-1]}"[:_ERROR_CHARS]


def _row(task_id: str, rnd: int, completion: str, peer: dict) -> dict:
    return {"task_id": task_id, "sample": 0, "round": rnd, "branch": 0, "completion": completion,
            "model": "kbx-corpus", "peer": peer}


def _reason_kind(reason: str) -> str:
    return reason.split(":")[0].split(";")[0].split(",")[0]
