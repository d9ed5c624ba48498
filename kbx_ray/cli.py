"""`kbx`: sweep, eval (one candidate file), tasks (list the suite), report (tables and figures).

Every user-fixable problem (bad key, unknown task, missing pool, unreadable file) ends as one line on
stderr and exit status 2, never as a traceback. Logs go to stderr; stdout carries only what a command
prints as its answer (the dry-run's estimate, `--json`, the task list).
"""
from __future__ import annotations

import argparse
import json
import logging
import sys
from dataclasses import asdict
from pathlib import Path

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
    if args.dry_run:
        p = engine.plan(cfg)
        print(engine.describe(p))
        return 0
    p = engine.run_sweep(cfg)
    log.info("results: %s", p.sweep_dir)
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    from kbx_ray.engine import resolve_pools
    from kbx_ray.evaluate.evaluator import Evaluator
    from kbx_ray.extract import candidate_id
    from kbx_ray.hardware import peak_table
    from kbx_ray.suite import get_task
    from kbx_ray.types import Candidate

    cfg = load_config(args.overrides)
    task = get_task(args.task_id, cfg.suite.path, cfg.suite.name)
    path = Path(args.candidate)
    if not path.is_file():
        raise ConfigError(f"candidate file {path} does not exist")
    code = path.read_text()
    pool = next(iter(resolve_pools(cfg.hardware).values()))
    cfg.evaluation.peak_gbps = pool.peak_gbps
    cfg.evaluation.peak_tflops = peak_table(pool)
    ev = Evaluator(cfg.evaluation)
    try:
        res = ev.evaluate(task, Candidate(candidate_id(task.task_id, code), task.task_id, code, task.name))
    finally:
        ev.close()
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


def build_parser() -> argparse.ArgumentParser:
    from kbx_ray import __version__
    from kbx_ray.provenance import git_state

    commit = (git_state().get("commit") or "")[:12]
    ap = argparse.ArgumentParser(prog="kbx", description=__doc__.splitlines()[0])
    ap.add_argument("-v", "--verbose", action="store_true")
    ap.add_argument("--version", action="version",
                    version=f"kbx_ray {__version__}" + (f" (commit {commit})" if commit else ""))
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("sweep", help="run a sweep (same as python scripts/sweep.py)")
    s.add_argument("--dry-run", action="store_true", help="print the grid and an estimate, run nothing")
    s.add_argument("overrides", nargs="*", help="key=value config overrides")
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


def main(argv: list[str] | None = None) -> int:
    from kbx_ray.suite import SuiteError

    args = build_parser().parse_args(argv)
    _setup_logging(args.verbose)
    try:
        return args.fn(args)
    except (ConfigError, SuiteError, KeyError) as e:
        msg = e.args[0] if isinstance(e, KeyError) and e.args else str(e)
        print(f"kbx: error: {msg}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
