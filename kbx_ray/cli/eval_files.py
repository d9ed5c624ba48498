"""`kbx eval`: candidate files -> verdicts, judged here by one Evaluator (no Ray).

One candidate (`kbx eval TASK FILE`) is read as a sweep reads a completion: a raw LLM answer has its
code extracted (extract.py), a plain `.py` file is judged as written. Many candidates (`kbx eval
SOURCE`, a folder of `.py` files or a JSONL of completions or kernels, read as `model=replay` reads
them) are judged one after another by the same evaluator, then shown as one table.
"""
from __future__ import annotations

import argparse
import json
import logging
import threading
from dataclasses import asdict
from pathlib import Path
from typing import Any, Iterator

from kbx_ray.config.compose import load_config
from kbx_ray.config.structured import Config
from kbx_ray.errors import ConfigError

log = logging.getLogger("kbx")


def split_args(items: list[str]) -> tuple[list[str], list[str]]:
    """(paths and the task id, key=value overrides): an item with `=` that is not a file is an
    override, wherever it stands."""
    plain = [i for i in items if "=" not in i or Path(i).exists()]
    return plain, [i for i in items if i not in plain]


def cmd_eval(args: argparse.Namespace) -> int:
    plain, overrides = split_args(args.items)
    cfg = load_config(overrides)
    if len(plain) == 1 and _is_batch(Path(plain[0])):
        return _batch(args, cfg, Path(plain[0]))
    if len(plain) != 2:
        raise ConfigError("kbx eval takes TASK FILE (one candidate) or SOURCE (a folder of .py "
                          "files or a .jsonl of completions), then key=value overrides: see "
                          "`kbx eval --help`")
    from kbx_ray.suites.builtin import get_task

    with _Judge(cfg) as judge:  # its worker starts now, while the task loads
        task = get_task(plain[0], cfg.suite.path, cfg.suite.name, cfg.suite.options)
        path = Path(plain[1])
        if not path.exists() and not path.is_symlink():
            raise ConfigError(f"candidate file {path} does not exist")
        res = judge.file(task, path)
    return _answer(args, res)


def _is_batch(path: Path) -> bool:
    return path.is_dir() or path.suffix in (".jsonl", ".ndjson")


class _Judge:
    """One Evaluator for every candidate of the command, started so that a cold start is short:
    a cold `kbx eval` is mostly two processes importing torch (and Triton), this one and the
    sandbox worker, and the first sizing of a case under fake tensors (footprint.py). So the
    worker is spawned first, before this process imports torch (loading a task does), and this
    process loads the task, the evaluator and the fake-tensor machinery while the worker starts."""

    def __init__(self, cfg: Config) -> None:
        self.cfg = cfg
        self._device, self._sandbox, self._warm = _early_sandbox(cfg)
        self._ev: Any = None

    @property
    def ev(self) -> Any:
        """The Evaluator, built on first use around the worker already starting."""
        if self._ev is None:
            from kbx_ray.config.plan import resolve_pools
            from kbx_ray.evaluate.parent.evaluator import Evaluator
            from kbx_ray.config.hardware import peak_table

            pool = next(iter(resolve_pools(self.cfg.hardware).values()))
            self.cfg.evaluation.peak_gbps = pool.peak_gbps
            self.cfg.evaluation.peak_tflops = peak_table(pool)
            ev = Evaluator(self.cfg.evaluation)
            if ev.device == self._device:  # the worker it would have started
                self._sandbox.cfg = ev.cfg.sandbox  # the same values; later edits reach it
                ev.sandbox = self._sandbox
            else:  # a wrong guess: its own worker after all
                self._warm.join()
                self._sandbox.kill()
                self._warm = _started(ev.sandbox)
            self._ev = ev
        return self._ev

    def __enter__(self) -> "_Judge":
        return self

    def __exit__(self, exc_type: Any, *exc: Any) -> None:
        if exc_type is None:  # else (a typo in the task id, say) the line is not kept waiting
            self._warm.join()
        if self._ev is not None:
            self._ev.close()
        self._sandbox.kill()

    def _ready(self, task: Any) -> None:
        """Size the task's first case under fake tensors (the evaluator does, for its unseen
        cases: the first use imports torch._dynamo) while the worker finishes starting."""
        from kbx_ray.cases import footprint
        from kbx_ray.suites.task_import import load_module

        self.ev  # noqa: B018 - built now, beside the worker's start
        if self._warm.is_alive() and task.cases:
            try:
                footprint.size(load_module(task.path), task.cases[0])
            except Exception as e:  # noqa: BLE001 - only a warm-up; the evaluation sizes it again
                log.debug("warm-up sizing of %s: %s", task.task_id, e)
        self._warm.join()

    def text(self, task: Any, text: str, as_file: bool) -> Any:
        """The verdict on a completion's text: its code extracted as a sweep extracts it; a file
        with no fenced block and no code found is judged as written (its syntax error, say)."""
        from kbx_ray.prompting.extract import candidate_id, extract
        from kbx_ray.types import Candidate, EvalResult, Generation, Stage

        cand = extract(Generation(text=text), task.task_id, task.name)
        if cand.error_kind and as_file and "```" not in text:
            cand = Candidate(candidate_id(task.task_id, text), task.task_id, text, task.name)
        if cand.error_kind:
            return EvalResult(task.task_id, cand.candidate_id, Stage.EXTRACT,
                              error_kind=cand.error_kind, error_msg=cand.error_msg)
        self._ready(task)
        return self.ev.evaluate(task, cand)

    def file(self, task: Any, path: Path) -> Any:
        from kbx_ray.prompting.candidate_file import read_source
        from kbx_ray.types import EvalResult, Stage, stable_hash

        src = read_source(path)
        if not src.ok:  # unreadable, binary, not UTF-8, empty or huge: the candidate's verdict
            return EvalResult(task.task_id, stable_hash(task.task_id, src.error_kind,
                                                        src.error_msg), Stage.EXTRACT,
                              error_kind=src.error_kind, error_msg=src.error_msg)
        return self.text(task, src.code, as_file=True)


def _early_sandbox(cfg: Config) -> tuple[str, Any, threading.Thread]:
    """(device, sandbox, the thread starting its worker) for the device this machine most likely
    evaluates on, guessed without importing torch (a wrong guess only costs the worker)."""
    import dataclasses
    import os

    from kbx_ray.evaluate.parent.sandbox import Sandbox

    device = str(cfg.evaluation.device)
    if device == "auto":
        device = "cuda" if os.path.exists("/dev/nvidiactl") else "cpu"
    sandbox = Sandbox(dataclasses.replace(cfg.evaluation.sandbox, device=device), stateful=True)
    return device, sandbox, _started(sandbox)


def _started(sandbox: Any) -> threading.Thread:
    """A thread starting `sandbox`'s worker; a failure is left for the evaluation, which starts
    the worker again and says why."""
    def start() -> None:
        try:
            sandbox.start()
        except Exception as e:  # noqa: BLE001
            log.debug("sandbox worker start: %s", e)

    thread = threading.Thread(target=start, daemon=True)
    thread.start()
    return thread


def _answer(args: argparse.Namespace, res: Any) -> int:
    from kbx_ray.suites.peer import of_result

    if args.json:
        print(json.dumps({**asdict(res), "stricter_reason": of_result(res)}, indent=2))
    else:
        _print_result(res)
        if of_result(res):
            print(f"stricter than the peer harnesses: {of_result(res)}")
    return 0 if res.exec_ok else 1


def _console() -> Any:
    import sys

    from rich.console import Console

    return Console(width=None if sys.stdout.isatty() else 200)


def _print_result(res: Any) -> None:
    from rich.table import Table

    c = _console()
    status = "[green]PASS[/]" if res.exec_ok else f"[red]FAIL[/] {res.error_kind}"
    where = res.gpu_name or res.device
    c.print(f"{res.task_id}: {status} (stage {res.stage}, call_ok={res.call_ok}"
            + (f", {res.eval_wall_s:.2f} s on {where})" if where else ")"))
    if res.error_msg:
        c.print(res.error_msg, markup=False)
    if res.flags:
        c.print(f"flags: {', '.join(res.flags)}")
    if res.timing_skipped:
        c.print(f"timing skipped: {res.timing_skipped}")
    if res.cases:
        t = Table("case", "ok", "max abs err", "cand ms", "eager ms", "speedup", "SOL")
        for cr in res.cases:
            fmt = lambda v, f: "-" if v is None else format(v, f)  # noqa: E731
            t.add_row(cr.case, "yes" if cr.ok else "no", f"{cr.max_abs_err:.2g}",
                      fmt(cr.cand_ms, ".4f"), fmt(cr.ref_ms, ".4f"), fmt(cr.speedup, ".2f"),
                      fmt(cr.sol_fraction, ".1%"))
        c.print(t)
    if res.speedup:
        c.print(f"geomean speedup {res.speedup:.2f}x")


def _rows(source: Path) -> Iterator[dict]:
    """(task_id, sample, round, completion) rows of a folder or JSONL, as `model=replay` reads
    them: another harness's kernels, or a sweep's generations."""
    from kbx_ray.llm.replay import read_source

    rows, _ = read_source(source)
    for r in rows:
        if "task_id" not in r or "completion" not in r:
            raise ConfigError(f"{source}: each line needs \"task_id\" and \"completion\" (a "
                              "sweep's generations) or \"file\" and \"predict\" (KernelBench-X's)")
        yield r


def _batch(args: argparse.Namespace, cfg: Config, source: Path) -> int:
    """Every candidate of `source`, judged in this process; a table (or JSON lines) of verdicts."""
    from kbx_ray.suites.builtin import get_task

    if not source.exists():
        raise ConfigError(f"{source} does not exist: kbx eval SOURCE takes a folder of .py files "
                          "or a .jsonl of completions")
    rows = list(_rows(source))
    tasks: dict[str, Any] = {}
    results = []
    with _Judge(cfg) as judge:
        for r in rows:  # every task id checked before the first evaluation
            if r["task_id"] not in tasks:
                tasks[r["task_id"]] = get_task(r["task_id"], cfg.suite.path, cfg.suite.name,
                                               cfg.suite.options)
        for i, r in enumerate(rows, 1):
            res = judge.text(tasks[r["task_id"]], str(r["completion"] or ""), as_file=False)
            log.info("%d/%d %s sample %s: %s", i, len(rows), r["task_id"], r.get("sample", 0),
                     "pass" if res.exec_ok else res.error_kind)
            results.append((r, res))
    if args.json:
        for r, res in results:
            print(json.dumps({"sample": r.get("sample", 0), "round": r.get("round", 0),
                              **asdict(res)}))
    else:
        _print_table(results)
    return 0 if all(res.exec_ok for _, res in results) else 1


def _print_table(results: list[tuple[dict, Any]]) -> None:
    from rich.table import Table

    t = Table("task", "sample", "verdict", "stage", "speedup", "message")
    for r, res in results:
        verdict = "[green]pass[/]" if res.exec_ok else f"[red]{res.error_kind}[/]"
        msg = (res.error_msg or "").splitlines()[0][:120] if res.error_msg else ""
        t.add_row(res.task_id, str(r.get("sample", 0)), verdict, res.stage,
                  f"{res.speedup:.2f}x" if res.speedup else "-", msg)
    c = _console()
    c.print(t)
    c.print(f"{sum(res.exec_ok for _, res in results)} of {len(results)} correct")
