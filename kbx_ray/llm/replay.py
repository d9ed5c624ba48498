"""The `replay` backend: serves completions from a previous sweep's generations table.
More: kbx_ray/llm/README.md, `replay.py`.
"""
from __future__ import annotations

import json
import logging
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from kbx_ray.config.structured import ModelConfig
from kbx_ray.errors import ConfigError
from kbx_ray.llm import replay_corpus, replay_files
from kbx_ray.llm.base import GenParams, Messages
from kbx_ray.registry import register
from kbx_ray.config.schema import Choice
from kbx_ray.types import Generation

log = logging.getLogger(__name__)

REQUIRED = ("task_id", "sample", "round", "completion")
OPTIONAL = ("branch", "method", "model", "finish_reason", "prompt_tokens", "completion_tokens",
            "created_at")
Key = tuple[str, int, int, int, str | None]


class ReplayError(ConfigError):
    """The replay source cannot answer: a bad path, a missing column, a missing or ambiguous key."""


class OnMissing(Choice):
    error = "error"
    skip = "skip"


class Duplicates(Choice):
    error = "error"
    first = "first"
    last = "last"


@dataclass
class ReplayOptions:
    path: str = ""                  # sweep folder, generations/ folder, .parquet or .jsonl
    on_missing: OnMissing = OnMissing.error  # skip: an empty completion (no_code_block)
    match_method: bool = True       # rows that name a method answer only that method
    where: dict[str, Any] = field(default_factory=dict)  # keep rows with these column values
    duplicates: Duplicates = Duplicates.error  # a key with different completions


def read_rows(path: str | Path, columns: tuple[str, ...] = REQUIRED + OPTIONAL) -> list[dict]:
    return read_source(path, columns)[0]


def read_source(path: str | Path, columns: tuple[str, ...] = REQUIRED + OPTIONAL,
                ) -> tuple[list[dict], bool]:
    """(rows, whether they are another harness's kernels: replay_files.py's JSONL or folder)."""
    p = Path(path).expanduser()
    if not p.exists():
        raise ReplayError(f"replay source {p} does not exist: set model.options.path to a sweep "
                          "folder, its generations/ folder, a .parquet file, a .jsonl file or "
                          "KernelBench-X's kbx_corpus folder (model=kbx_corpus looks for it "
                          "under $KBX_EXTERNAL/KernelBenchX/data: set KBX_EXTERNAL)")
    if p.is_dir() and (p / "generations").is_dir():
        p = p / "generations"
    if p.is_dir() and replay_corpus.corpus_files(p):
        return _corpus_rows(p), True
    if p.suffix in (".jsonl", ".ndjson", ".json"):
        rows = []
        for i, line in enumerate(p.read_bytes().splitlines(), 1):
            try:
                rows += [json.loads(line.decode("utf-8"))] if line.strip() else []
            except json.JSONDecodeError as e:
                raise ReplayError(f"replay source {p}: line {i}: not JSON ({e.msg})") from None
            except UnicodeDecodeError as e:
                raise ReplayError(f"replay source {p}: line {i}: not UTF-8 (byte "
                                  f"0x{line[e.start]:02x} at column {e.start + 1}): JSON Lines "
                                  "are UTF-8") from None
        if replay_files.is_predictions(rows):
            return replay_files.prediction_rows(rows, p), True
        if replay_corpus.is_corpus(rows):
            return _corpus_rows(p), True
        return rows, False
    if p.is_dir() and not any(p.rglob("*.parquet")):  # another harness's kernels, one per file
        return replay_files.folder_rows(p), True
    import pyarrow.dataset as ds

    data = ds.dataset(p, format="parquet")
    return data.to_table(columns=[c for c in columns if c in data.schema.names]).to_pylist(), False


_SAID: set[str] = set()


def _corpus_rows(p: Path) -> list[dict]:
    """The corpus's replay rows; its accounting is said once per process (the source is read at
    planning and again when the sweep starts)."""
    corpus = replay_corpus.read_corpus(p)
    if str(p) not in _SAID:
        _SAID.add(str(p))
        log.info("replay: %s", corpus.summary())
    return replay_corpus.replay_rows(corpus)


def index_rows(rows: list[dict], opts: ReplayOptions, where: str) -> dict[Key, dict]:
    """(task_id, sample, round, branch, method or None) -> row; ambiguity is an error by default."""
    missing = [c for c in REQUIRED if rows and c not in rows[0]]
    if missing or not rows:
        raise ReplayError(f"replay source {where} has no rows or lacks columns {missing}: it needs "
                          f"{', '.join(REQUIRED)}")
    rows = [r for r in rows if all(r.get(k) == v for k, v in opts.where.items())]
    rows.sort(key=lambda r: r.get("created_at") or 0.0)
    table: dict[Key, dict] = {}
    clashes: list[Key] = []
    for r in rows:
        method = r.get("method") if opts.match_method else None
        key = (str(r["task_id"]), int(r["sample"]), int(r["round"]), int(r.get("branch") or 0),
               method or None)
        old = table.get(key)
        if old is not None and old["completion"] != r["completion"] and opts.duplicates != "last":
            if opts.duplicates == "error":
                clashes.append(key)
            continue
        table[key] = r
    if clashes:
        raise ReplayError(f"replay source {where}: {len(clashes)} keys have different completions "
                          f"(first: {clashes[0]}); narrow it with model.options.where={{model: ..., "
                          "sweep_id: ...}} or set model.options.duplicates=first|last")
    return table


class ReplayBackend:
    name = "replay"

    def __init__(self, table: dict[Key, dict], opts: ReplayOptions, label: str,
                 from_files: bool = False) -> None:
        self.table, self.opts, self.label = table, opts, label
        self.from_files = from_files  # another harness's kernels: they name the tasks to run
        self.skipped = 0
        self.methods = {k[4] for k in table} - {None}  # the methods the source's rows name

    def lookup(self, meta: dict) -> dict | None:
        base = (str(meta.get("task_id", "")), int(meta.get("sample", 0)), int(meta.get("round", 0)),
                int(meta.get("branch", 0)))
        method = meta.get("method")
        # a budget of a sweep's rounds axis (`repair@R2`) also takes its base method's rows: the
        # separate runs at each k replay one R-round run
        plain = method.rpartition("@R")[0] if isinstance(method, str) and "@R" in method else None
        return (self.table.get((*base, method)) or (plain and self.table.get((*base, plain)))
                or self.table.get((*base, None)))

    # the `Replayer` protocol (llm/base.py) that a backend registered with replays=True offers
    @property
    def source(self) -> str:
        return str(self.opts.path)

    @property
    def skips_missing(self) -> bool:
        return self.opts.on_missing == "skip"

    def held_tasks(self) -> dict[str, int] | None:
        return held_tasks(self)

    def unanswered(self, cells: Iterable[Any]) -> tuple[int, int, str]:
        return unanswered(self, cells)

    def other_methods(self, method: str) -> list[str]:
        """The source's methods, when none of them is `method` (or its base): what
        `match_method=false` would replay under it."""
        plain = method.rpartition("@R")[0] if "@R" in method else None
        return [] if {method, plain} & self.methods else sorted(self.methods)

    async def generate(self, messages: Messages, params: GenParams) -> Generation:
        t0 = time.perf_counter()
        row = self.lookup(params.meta)
        if row is None:
            m = params.meta
            if self.opts.on_missing != "skip":
                raise ReplayError(
                    f"replay: no completion for task {m.get('task_id')} sample {m.get('sample', 0)} "
                    f"round {m.get('round', 0)} branch {m.get('branch', 0)} (method "
                    f"{m.get('method')}) in {self.opts.path}; replay a run with these rounds and "
                    "branches, or set model.options.on_missing=skip")
            self.skipped += 1
            log.debug("replay: no row for %s; answering with an empty completion", m)
            return Generation(text="", latency_s=time.perf_counter() - t0, model=self.label)
        return Generation(text=row["completion"] or "",
                          prompt_tokens=int(row.get("prompt_tokens") or 0),
                          completion_tokens=int(row.get("completion_tokens") or 0),
                          latency_s=time.perf_counter() - t0,
                          finish_reason=row.get("finish_reason") or "stop",
                          model=row.get("model") or self.label,
                          peer_verdict=row.get("peer_verdict") or "",
                          peer=dict(row.get("peer") or {}))


def held_tasks(backend: ReplayBackend) -> dict[str, int] | None:
    """Task id -> samples held, in input order, when the source is another harness's kernels
    (each a sample; a corpus's kernels are rounds of one): the tasks and samples a sweep of them
    covers. None for a sweep's generations, which answer whatever grid of rounds and methods is
    asked of them."""
    if not backend.from_files:
        return None
    return dict(Counter(k[0] for k in dict.fromkeys((k[0], k[1]) for k in backend.table
                                                    if k[3] == 0)))


def unanswered(backend: ReplayBackend, cells: Iterable[Any]) -> tuple[int, int, str]:
    """(cells whose first round the source cannot answer, cells checked, the first one named).
    Later rounds depend on verdicts and are checked when they are asked for."""
    missing, total, first = 0, 0, ""
    branches: dict[str, int] = {}  # method name -> its branches (typed once)
    for cell in cells:
        total += 1
        if cell.method.name not in branches:
            branches[cell.method.name] = getattr(cell.method.typed_options(), "branches", 1)
        for branch in range(branches[cell.method.name]):
            meta = {"task_id": cell.task_id, "sample": cell.sample, "round": 0, "branch": branch,
                    "method": cell.method.name}
            if backend.lookup(meta) is None:
                missing += 1
                first = first or (f"task {cell.task_id} sample {cell.sample} branch {branch} "
                                  f"(method {cell.method.name})")
                break
    return missing, total, first


@register("backend", "replay", replays=True, options=ReplayOptions)
def build(cfg: ModelConfig) -> ReplayBackend:
    opts: ReplayOptions = cfg.typed_options()
    if not opts.path:
        raise ReplayError("model=replay needs model.options.path: a sweep folder, its generations/ "
                          "folder, a .parquet file or a .jsonl file")
    opts.where = dict(opts.where)
    cols = REQUIRED + OPTIONAL + tuple(k for k in opts.where if k not in REQUIRED + OPTIONAL)
    rows, from_files = read_source(opts.path, cols)
    table = index_rows(rows, opts, opts.path)
    log.debug("replay: %d completions from %s", len(table), opts.path)
    return ReplayBackend(table, opts, getattr(cfg, "name", "replay"), from_files)
