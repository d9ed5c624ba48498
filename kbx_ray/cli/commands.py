"""`kbx`: sweep, eval (one candidate file), tasks (list the suite), report (tables and figures).
More: kbx_ray/cli/README.md, `commands.py`.
"""
from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from kbx_ray.cli import help_pages as cli_help
from kbx_ray.cli.eval_files import cmd_eval
from kbx_ray.cli.process import closed_stdout, exit_now, interruptible, setup_logging
from kbx_ray.config.compose import load_config
from kbx_ray.errors import ConfigError

if TYPE_CHECKING:
    from kbx_ray.config.plan import Sweep

log = logging.getLogger("kbx")


def cmd_sweep(args: argparse.Namespace) -> int:
    from kbx_ray.orchestration import engine

    cfg = load_config(args.overrides)
    p = engine.plan(cfg)
    if args.dry_run:
        print(engine.describe(p))
        return 0
    before = p.n_cells - p.n_todo
    try:
        engine.run_sweep(p)
    except KeyboardInterrupt:
        print(f"kbx: interrupted: {_where(p, before)}", file=sys.stderr)
        return 130
    except _cluster_errors() as e:  # Ray's, not the user's nor ours: one line, the rest in ray.log
        why = (str(e).strip().splitlines() or [type(e).__name__])[0][:200]
        print(f"kbx: error: the sweep stopped, the Ray cluster failed ({type(e).__name__}: {why});"
              f" Ray's output is in {p.sweep_dir / 'ray.log'}: {_where(p, before)}",
              file=sys.stderr)
        args.exit_now = True
        return 1
    n = _recorded_cells(p)
    print(f"sweep {p.sweep_id}: {n} of {p.n_cells} cells recorded ({max(0, n - before)} by this "
          f"run)\nresults: {p.sweep_dir}")
    report = p.sweep_dir / "report" / "report.html"
    if report.is_file():
        print(f"report: {report}")
    else:
        log.info("report: python scripts/report.py %s (W&B artifacts were off, so none was built)",
                 p.sweep_dir)
    return 0


def _where(p: Sweep, before: int) -> str:
    """What a stopped sweep kept and how to go on, alike for Ctrl-C and a failure."""
    if not p.sweep_dir.exists():  # nothing was recorded, and the folder was removed again
        return "no cell was recorded, nothing kept; re-run the same command to start again"
    n = _recorded_cells(p)
    return (f"{n} of {p.n_cells} cells recorded in {p.sweep_dir} ({max(0, n - before)} by this "
            "run); re-run the same command to resume")


def _cluster_errors() -> tuple[type[BaseException], ...]:
    import ray.exceptions

    from kbx_ray.orchestration.ray_session import ClusterLost

    return ClusterLost, ray.exceptions.RaySystemError, ray.exceptions.RpcError


def _recorded_cells(p: Sweep) -> int:
    """Cells of this sweep's grid with rows in its folder now."""
    from kbx_ray.sinks import done_cells

    done = done_cells(p.sweep_dir) if p.sweep_dir.exists() else set()
    return sum(1 for c in p.cells() if c.cell_id in done) if done else 0


def cmd_tasks(args: argparse.Namespace) -> int:
    cfg = load_config(args.overrides)
    from kbx_ray.suites.builtin import load_suite

    skipped: dict[str, str] = {}  # external problems that cannot be built: listed, not fatal
    tasks = load_suite(cfg.suite.path, cfg.suite.include or None, cfg.suite.name, skipped,
                       cfg.suite.options)
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
    print(f"report: {paths.html}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    from kbx_ray import __version__
    from kbx_ray.records.provenance import git_state

    commit = (git_state().get("commit") or "")[:12]
    ap = argparse.ArgumentParser(prog="kbx", description=__doc__.splitlines()[0])
    ap.add_argument("-v", "--verbose", action="store_true", help="debug logs on stderr")
    ap.add_argument("-q", "--quiet", action="store_true",
                    help="warnings and errors only on stderr (no progress, no summary)")
    ap.add_argument("--version", action="version",
                    version=f"kbx_ray {__version__}" + (f" (commit {commit})" if commit else ""))
    sub = ap.add_subparsers(dest="cmd", required=True)
    pages = cli_help.pages()
    common = argparse.ArgumentParser(add_help=False)  # -q/-v also after the subcommand
    common.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS,
                        help="debug logs on stderr")
    common.add_argument("-q", "--quiet", action="store_true", default=argparse.SUPPRESS,
                        help="warnings and errors only on stderr")

    def page(name: str) -> argparse.ArgumentParser:
        return sub.add_parser(name, **pages[name], parents=[common],
                              formatter_class=argparse.RawDescriptionHelpFormatter)

    s = page("sweep")
    s.add_argument("--dry-run", action="store_true",
                   help="print the grid and the evaluations and GPU- or CPU-hours at most, per "
                   "method and pool; run nothing")
    s.add_argument("overrides", nargs="*", metavar="key=value",
                   help="config overrides, applied in order (see below)")
    s.set_defaults(fn=cmd_sweep)
    e = page("eval")
    e.add_argument("items", nargs="+", metavar="ARG",
                   help="a task id and a candidate file, or a folder or .jsonl of candidates; "
                   "then config overrides")
    e.add_argument("--json", action="store_true", help="print the whole result as JSON")
    e.set_defaults(fn=cmd_eval)
    t = page("tasks")
    t.add_argument("--json", action="store_true", help="print the list as JSON")
    t.add_argument("overrides", nargs="*", metavar="key=value",
                   help="config overrides (suite=, suite.path=, suite.include=)")
    t.set_defaults(fn=cmd_tasks)
    r = page("report")
    r.add_argument("dirs", nargs="+", help="results/<sweep_id> dirs, or dirs holding several")
    r.add_argument("--out", help="output dir (default: <first dir>/report)")
    r.set_defaults(fn=cmd_report)
    return ap


def _user_errors() -> tuple[type[BaseException], ...]:
    """What a user's own input raises: a bad key or choice, an unknown task, pool, backend or
    method. Any other exception is ours: its traceback is shown, with a line saying so."""
    from kbx_ray.config.hardware import UnknownHardwareError
    from kbx_ray.registry import RegistryError
    from kbx_ray.errors import SuiteError

    return ConfigError, SuiteError, RegistryError, UnknownHardwareError


def main(argv: list[str] | None = None, command_line: bool | None = None) -> int:
    """`kbx ARGS`; `command_line` (default: when argv is None, as the `kbx` entry point calls it)
    lets a sweep whose Ray cluster is gone exit at once (`exit_now`) instead of returning."""
    args = build_parser().parse_args(argv)
    code = _main(args)
    if getattr(args, "exit_now", False) and (argv is None if command_line is None else command_line):
        exit_now(code)
    return code


def _main(args: argparse.Namespace) -> int:
    setup_logging(getattr(args, "verbose", False), getattr(args, "quiet", False))
    user_errors = _user_errors()
    try:
        with interruptible():
            code = args.fn(args)
            sys.stdout.flush()  # a closed pipe shows here, not at exit
            return code
    except BrokenPipeError:
        return closed_stdout()
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
