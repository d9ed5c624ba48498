"""`kbx`: sweep, eval (one candidate file), tasks (list the suite), report (tables and figures).

Every user-fixable problem (bad key, unknown task, missing pool, missing file) ends as one line on
stderr and exit status 2, never as a traceback; a candidate file that cannot be judged (unreadable,
binary, not UTF-8, empty, huge) is a verdict (exit 1). An internal error shows its traceback and a
line saying it is a bug (exit 3); Ctrl-C, one line (exit 130), even where kbx inherited SIGINT
ignored or blocked (see `interruptible`). Logs go to stderr; stdout carries only what a command
prints as its answer (the dry-run's estimate, `--json`, the task list, a sweep's results folder).
"""
from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
import threading
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any, Iterator

from kbx_ray.config import ConfigError, load_config

log = logging.getLogger("kbx")


def _setup_logging(verbose: bool = False) -> None:
    from rich.console import Console
    from rich.logging import RichHandler

    handler = RichHandler(console=Console(stderr=True), show_path=False, rich_tracebacks=False)
    logging.basicConfig(level=logging.DEBUG if verbose else logging.INFO, format="%(message)s",
                        handlers=[handler], force=True)
    for noisy in ("ray", "wandb", "urllib3", "filelock"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def cmd_sweep(args: argparse.Namespace) -> int:
    from kbx_ray import engine

    cfg = load_config(args.overrides)
    p = engine.plan(cfg)
    if args.dry_run:
        print(engine.describe(p))
        return 0
    before = p.n_cells - p.n_todo
    try:
        engine.run_sweep(cfg, p)
    except KeyboardInterrupt:
        n = _recorded_cells(p)
        print(f"kbx: interrupted: {n} of {p.n_cells} cells recorded in {p.sweep_dir} "
              f"({max(0, n - before)} by this run); re-run the same command to resume",
              file=sys.stderr)
        return 130
    n = _recorded_cells(p)
    print(f"sweep {p.sweep_id}: {n} of {p.n_cells} cells recorded ({max(0, n - before)} by this "
          f"run)\nresults: {p.sweep_dir}")
    return 0


def _recorded_cells(p: Any) -> int:
    """Cells of this sweep's grid with rows in its folder now."""
    from kbx_ray.sinks import done_cells

    done = done_cells(p.sweep_dir) if p.sweep_dir.exists() else set()
    return sum(1 for c in p.cells() if c.cell_id in done) if done else 0


def cmd_eval(args: argparse.Namespace) -> int:
    from kbx_ray.engine import resolve_pools
    from kbx_ray.evaluate.parent.evaluator import Evaluator
    from kbx_ray.extract import candidate_id
    from kbx_ray.hardware import peak_table
    from kbx_ray.candidate_file import read_source
    from kbx_ray.suite import get_task
    from kbx_ray.types import Candidate, EvalResult, stable_hash

    cfg = load_config(args.overrides)
    task = get_task(args.task_id, cfg.suite.path, cfg.suite.name)
    path = Path(args.candidate)
    if not path.exists() and not path.is_symlink():
        raise ConfigError(f"candidate file {path} does not exist")
    src = read_source(path)
    if not src.ok:  # unreadable, binary, not UTF-8, empty or huge: the candidate's verdict
        return _answer(args, EvalResult(task.task_id, stable_hash(task.task_id, src.error_kind,
                                                                  src.error_msg), "extract",
                                        error_kind=src.error_kind, error_msg=src.error_msg))
    code = src.code
    pool = next(iter(resolve_pools(cfg.hardware).values()))
    cfg.evaluation.peak_gbps = pool.peak_gbps
    cfg.evaluation.peak_tflops = peak_table(pool)
    ev = Evaluator(cfg.evaluation)
    try:
        res = ev.evaluate(task, Candidate(candidate_id(task.task_id, code), task.task_id, code, task.name))
    finally:
        ev.close()
    return _answer(args, res)


def _answer(args: argparse.Namespace, res: Any) -> int:
    from kbx_ray.suites.peer import of_result

    if args.json:
        print(json.dumps({**asdict(res), "stricter_reason": of_result(res)}, indent=2))
    else:
        _print_result(res)
        if of_result(res):
            print(f"stricter than the peer harnesses: {of_result(res)}")
    return 0 if res.exec_ok else 1


def _print_result(res) -> None:  # noqa: ANN001
    from rich.console import Console
    from rich.table import Table

    c = Console()
    status = "[green]PASS[/]" if res.exec_ok else f"[red]FAIL[/] {res.error_kind}"
    c.print(f"{res.task_id}: {status} (stage {res.stage}, call_ok={res.call_ok}, "
            f"{res.eval_wall_s:.2f} s on {res.gpu_name or res.device})")
    if res.error_msg:
        c.print(res.error_msg, markup=False)
    if res.flags:
        c.print(f"flags: {', '.join(res.flags)}")
    if res.timing_skipped:
        c.print(f"timing skipped: {res.timing_skipped}")
    t = Table("case", "ok", "max abs err", "cand ms", "eager ms", "speedup", "SOL")
    for cr in res.cases:
        fmt = lambda v, f: "-" if v is None else format(v, f)  # noqa: E731
        t.add_row(cr.case, "yes" if cr.ok else "no", f"{cr.max_abs_err:.2g}", fmt(cr.cand_ms, ".4f"),
                  fmt(cr.ref_ms, ".4f"), fmt(cr.speedup, ".2f"), fmt(cr.sol_fraction, ".1%"))
    c.print(t)
    if res.speedup:
        c.print(f"geomean speedup {res.speedup:.2f}x")


def cmd_tasks(args: argparse.Namespace) -> int:
    cfg = load_config(args.overrides)
    from kbx_ray.suite import load_suite

    skipped: dict[str, str] = {}  # external problems that cannot be built: listed, not fatal
    tasks = load_suite(cfg.suite.path, cfg.suite.include or None, cfg.suite.name, skipped)
    rows = [{"id": t.task_id, "category": t.category, "level": t.level,
             "cases": [c["name"] for c in t.cases], "signature": t.signature} for t in tasks]
    if args.json:
        print(json.dumps(rows + [{"id": k, "skipped": v} for k, v in skipped.items()], indent=2))
    else:
        for r in rows:
            print(f"{r['id']:<40} {r['category']:<15} L{r['level']}  {len(r['cases'])} cases  "
                  f"{r['signature']}")
        for task_id, why in skipped.items():
            print(f"skipped {task_id}: {why}")
        print(f"{len(rows)} tasks" + (f", {len(skipped)} skipped" if skipped else ""))
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from kbx_ray.report import ReportError, build_report

    dirs = [Path(d) for d in args.dirs]
    try:
        paths = build_report(dirs, Path(args.out) if args.out else dirs[0] / "report")
    except ReportError as e:
        raise ConfigError(str(e)) from None
    log.info("report: %s and %s (%d figures)", paths.markdown, paths.html, len(paths.figures))
    return 0


SWEEP_HELP = """\
Run a sweep (also `python scripts/sweep.py ...`): every task x method x model x sample x pool,
judged by the sandboxed evaluator, into Parquet under output_dir/<sweep_id>/. The results folder
and sweep id are printed at the end; re-running the same command resumes (recorded cells are
skipped); a changed setting that can change a verdict makes a new sweep."""

_KEYS = """\
overrides (key=value, OmegaConf dotlist, later items win):
  GROUP=NAME              pick conf/GROUP/NAME.yaml (a preset), then its keys can be overridden
  hardware=NAME|[A,B]     hardware pools (conf/hardware/); the first is primary; auto: this machine
  a.b.c=VALUE             any key of kbx_ray/config.py's Config, each shown at its default in
                          conf/config.yaml; a list is [x,y] (quote it for the shell when it holds
                          * or spaces)

most used keys:
  suite.include=[math,activation/relu,"fusion/*"]   tasks: ids, category folders or globs
  suite.path=DIR                                     another tasks/ tree or an external suite
  sweep.samples=N  sweep.methods=[a,b]  sweep.models=[a,b]  sweep.rounds=[0,1,3]   grid axes
  method.rounds=R  method.branches=N  method.exemplars=N
  model.temperature=T  model.max_tokens=N  model.path=HF_ID|DIR  model.replicas=N
  model.base_url=http://host:8000/v1 (model=openai)  model.options.path=results/ID (model=replay)
  evaluation.seeds=N  evaluation.timing.budget_s=S
  engine.max_concurrency=N  engine.evaluators=N  engine.ray_address=auto
  output_dir=DIR  wandb.project=NAME
  sweep_id=NAME (name the folder)  force_resume=true (resume it under other verdict settings)

examples:
  python scripts/sweep.py --dry-run hardware=[h100,a100]
  python scripts/sweep.py suite.include=[math] model=qwen2.5-coder-7b method=repair method.rounds=5
  python scripts/sweep.py sweep=repair_ablation wandb.mode=online
"""


def _sweep_epilog() -> str:
    from kbx_ray.config import CONF_DIR, choice_keys

    import textwrap

    lines = ["choices (from the schema, kbx_ray/config.py):"]
    for key, enum, default in choice_keys():
        lines.append(f"  {key}={'|'.join(enum.__members__)}  (default: {default})")
    lines += ["", "presets (GROUP=NAME, from conf/GROUP/):"]
    for group in ("suite", "model", "method", "sweep", "hardware"):
        names = " ".join(sorted(p.stem for p in (CONF_DIR / group).glob("*.yaml")))
        lines += textwrap.wrap(names, 98, initial_indent=f"  {group + '=':<10}",
                               subsequent_indent=" " * 12)
    return _KEYS + "\n" + "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    from kbx_ray import __version__
    from kbx_ray.provenance import git_state

    commit = (git_state().get("commit") or "")[:12]
    ap = argparse.ArgumentParser(prog="kbx", description=__doc__.splitlines()[0])
    ap.add_argument("-v", "--verbose", action="store_true")
    ap.add_argument("--version", action="version",
                    version=f"kbx_ray {__version__}" + (f" (commit {commit})" if commit else ""))
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("sweep", help="run a sweep (same as python scripts/sweep.py)",
                       description=SWEEP_HELP, epilog=_sweep_epilog(),
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    s.add_argument("--dry-run", action="store_true",
                   help="print the grid and the GPU-hours at most, per method and pool; run "
                   "nothing")
    s.add_argument("overrides", nargs="*", metavar="key=value",
                   help="config overrides, applied in order (see below)")
    s.set_defaults(fn=cmd_sweep)
    e = sub.add_parser("eval", help="evaluate one candidate file against one task, locally")
    e.add_argument("task_id")
    e.add_argument("candidate")
    e.add_argument("--json", action="store_true")
    e.add_argument("overrides", nargs="*")
    e.set_defaults(fn=cmd_eval)
    t = sub.add_parser("tasks", help="list the suite's tasks")
    t.add_argument("--json", action="store_true")
    t.add_argument("overrides", nargs="*")
    t.set_defaults(fn=cmd_tasks)
    r = sub.add_parser("report", help="report.md, report.html and figures from sweep results")
    r.add_argument("dirs", nargs="+", help="results/<sweep_id> dirs, or dirs holding several")
    r.add_argument("--out", help="output dir (default: <first dir>/report)")
    r.set_defaults(fn=cmd_report)
    return ap


def _user_errors() -> tuple[type[BaseException], ...]:
    """What a user's own input raises: a bad key or choice, an unknown task, pool, backend or
    method. Any other exception is ours: its traceback is shown, with a line saying so."""
    from kbx_ray.hardware import UnknownHardwareError
    from kbx_ray.registry import RegistryError
    from kbx_ray.suite import SuiteError

    return ConfigError, SuiteError, RegistryError, UnknownHardwareError


@contextmanager
def interruptible() -> Iterator[None]:
    """SIGINT raises KeyboardInterrupt inside the block, however the process inherited it; the
    disposition and mask are put back after (kbx called in-process leaves its caller as it was).

    A process starts with SIGINT ignored when its parent ignored it (a background job of a shell
    without job control, as scripts and CI runners start them; nohup-like wrappers), and with it
    blocked when its parent blocked it (Ray starts its processes so). Python then installs no
    handler, or never sees the signal, so a sweep ran on to its end, exit 0, past Ctrl-C or
    `kill -INT` instead of stopping with what it had recorded. As `ray job stop` relies on for a
    job's entrypoint (Ray unblocks SIGINT there), a command line that documents Ctrl-C takes it.
    Only in the main thread, where Python runs signal handlers."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = signal.getsignal(signal.SIGINT)
    mask = signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    if before == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        if before == signal.SIG_IGN:
            signal.signal(signal.SIGINT, signal.SIG_IGN)
        if signal.SIGINT in mask:
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    _setup_logging(args.verbose)
    user_errors = _user_errors()
    try:
        with interruptible():
            return args.fn(args)
    except user_errors as e:
        msg = e.args[0] if isinstance(e, KeyError) and e.args else str(e)
        print(f"kbx: error: {msg}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # outside a sweep's cells (planning, an eval): nothing to resume
        print("kbx: interrupted", file=sys.stderr)
        return 130
    except Exception:  # noqa: BLE001 - ours, not the user's: shown in full, and said so
        import traceback

        traceback.print_exc()
        print("kbx: internal error: this is a bug in kbx_ray, not in your input; please report it "
              "with the traceback above", file=sys.stderr)
        return 3


if __name__ == "__main__":
    sys.exit(main())
