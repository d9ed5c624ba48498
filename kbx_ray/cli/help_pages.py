"""The `--help` pages of `kbx` and its subcommands: what each does, its exit codes, examples.

Kept apart from commands.py so the parser stays short; `tests/integration/test_cli.py` checks that
every subcommand's page has a description, its exit codes and an example.
"""
from __future__ import annotations

import textwrap

EXIT_CODES = """\
exit codes:
  0    done{ok}
  1    {one}
  2    a usage error: a bad key or choice, an unknown task or pool, a missing file (one line on
       stderr naming it and the fix)
  3    a bug in kbx_ray: its traceback, then a line saying so
  130  interrupted (Ctrl-C or kill -INT){interrupt}
  141  stdout was closed early (`| head`): the rest of the answer is dropped, quietly"""

SWEEP = """\
Run a sweep (also `python scripts/sweep.py ...`): every task x method x model x sample x pool,
judged by the sandboxed evaluator, into Parquet under output_dir/<sweep_id>/. The results folder
and sweep id are printed at the end; re-running the same command resumes (recorded cells are
skipped); a changed setting that can change a verdict makes a new sweep. Logs and progress go to
stderr (-q: warnings and errors only), Ray's own output to <sweep folder>/ray.log; stdout holds
only the answer: the dry-run's estimate, or the summary line, the results folder and the report."""

SWEEP_KEYS = """\
overrides (key=value, OmegaConf dotlist, later items win):
  GROUP=NAME              pick conf/GROUP/NAME.yaml (a preset), then its keys can be overridden
  hardware=NAME|[A,B]     hardware pools (conf/hardware/); the first is primary; auto: this machine
  a.b.c=VALUE             any key of config/structured.py's Config, each shown at its default in
                          conf/config.yaml; a list is [x,y] (quote it for the shell when it holds
                          * or spaces)

most used keys:
  suite.include=[math,activation/relu,"fusion/*"]   tasks: ids, category folders or globs
  suite.path=DIR                                     another tasks/ tree or an external suite
  sweep.samples=N  sweep.methods=[a,b]  sweep.models=[a,b]  sweep.rounds=[0,1,3]   grid axes
  method.rounds=R  method.options.branches=N  method.options.exemplars=N   (the method's options)
  model.temperature=T  model.max_tokens=N  model.path=HF_ID|DIR   (model.options: the backend's)
  model.options.replicas=N  model.options.engine.max_model_len=N (vllm)
  model.options.base_url=http://host:8000/v1 (openai)  model.options.path=results/ID (replay)
  evaluation.seeds=N  evaluation.timing.budget_s=S
  engine.max_concurrency=N  engine.evaluators=N  engine.ray_address=auto
  output_dir=DIR  sink.wandb.project=NAME
  sweep_id=NAME (name the folder)  force_resume=true (resume it under other verdict settings)

examples:
  python scripts/sweep.py                                   # the default sweep, this machine
  python scripts/sweep.py --dry-run hardware=[h100,a100]
  python scripts/sweep.py suite.include=[math] model=qwen2.5-coder-7b method=repair method.rounds=5
  python scripts/sweep.py sweep=repair_ablation sink.wandb.mode=online
"""

EVAL = """\
Judge candidate kernels on this machine, with the sweep's sandboxed evaluator and no Ray.

  kbx eval TASK FILE      one candidate: a .py file, or a raw LLM answer (its code is extracted
                          as a sweep extracts it: the last fenced Python block defining the entry)
  kbx eval SOURCE         many: a folder of .py files (<Category>/<name>.py, or a docstring
                          `task: <id>`) or a .jsonl of completions ({"task_id", "completion", ...},
                          a sweep's generations) or kernels (KernelBench-X's {"file", "predict"});
                          judged one after another in one process, then one table

key=value overrides follow (evaluation.*, hardware=, suite.* as in `kbx sweep --help`). --json
prints the whole result (one JSON object a line for SOURCE)."""

EVAL_EXAMPLES = """\
examples:
  kbx eval activation/relu my_relu.py
  kbx eval activation/relu answer.md --json       # a pasted LLM answer, fenced code and all
  kbx eval my_kernels/                            # my_kernels/activation/relu.py, ...
  kbx eval preds.jsonl evaluation.seeds=1          # KernelBench-X's predictions"""

TASKS = """\
List the suite's tasks: id, category, level, cases and signature (--json: one object per task,
and a {"id", "skipped"} row for each external problem that cannot be built, with the reason)."""

TASKS_EXAMPLES = """\
examples:
  kbx tasks
  kbx tasks --json | python -c 'import json,sys; print(len(json.load(sys.stdin)))'
  kbx tasks suite=kernelbenchx suite.path=../shared/external/KernelBenchX/data"""

REPORT = """\
Build the report of one or more sweeps: report.md, a self-contained report.html and PNG figures
(several sweeps sit side by side). Prints the path of report.html on stdout."""

REPORT_EXAMPLES = """\
examples:
  kbx report results/<sweep_id>
  kbx report results/<a> results/<b> --out /tmp/compare
  kbx report results/                             # every sweep folder under results/"""


def exit_codes(ok: str = "", one: str = "not used", interrupt: str = "") -> str:
    return EXIT_CODES.format(ok=ok, one=one, interrupt=interrupt)


def sweep_epilog() -> str:
    from kbx_ray.config.compose import CONF_DIR, choice_keys

    lines = ["choices (from the schema, kbx_ray/config/structured.py):"]
    for key, enum, default in choice_keys():
        lines.append(f"  {key}={'|'.join(enum.__members__)}  (default: {default})")
    lines += ["", "presets (GROUP=NAME, from conf/GROUP/):"]
    for group in ("suite", "model", "method", "sweep", "hardware"):
        names = " ".join(sorted(p.stem for p in (CONF_DIR / group).glob("*.yaml")))
        lines += textwrap.wrap(names, 98, initial_indent=f"  {group + '=':<10}",
                               subsequent_indent=" " * 12)
    codes = exit_codes(": every cell recorded (or --dry-run printed its estimate)",
                       "its Ray cluster failed mid-sweep (one `kbx:` line; what was recorded is "
                       "kept, run.json says `failed`, Ray's output is in ray.log; re-run to "
                       "resume)",
                       ": whole cells are kept, run.json says `interrupted`; re-run to resume")
    return SWEEP_KEYS + "\n" + "\n".join(lines) + "\n\n" + codes


def pages() -> dict[str, dict[str, str]]:
    """Subcommand -> the keyword arguments of its `add_parser` (help, description, epilog)."""
    return {
        "sweep": dict(help="run a sweep (same as python scripts/sweep.py)", description=SWEEP,
                      epilog=sweep_epilog()),
        "eval": dict(help="judge candidate files on this machine (no Ray)", description=EVAL,
                     usage="kbx eval [-h] [-q] [--json] TASK FILE [key=value ...]\n"
                           "       kbx eval [-h] [-q] [--json] SOURCE [key=value ...]",
                     epilog=exit_codes(": every candidate is correct", "a candidate is not "
                                       "correct (its verdict is the answer)") + "\n\n"
                     + EVAL_EXAMPLES),
        "tasks": dict(help="list the suite's tasks", description=TASKS,
                      epilog=exit_codes() + "\n\n" + TASKS_EXAMPLES),
        "report": dict(help="report.md, report.html and figures from sweep results",
                       description=REPORT, epilog=exit_codes() + "\n\n" + REPORT_EXAMPLES),
    }
