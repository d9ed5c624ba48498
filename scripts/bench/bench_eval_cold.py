"""A cold `kbx eval` of one small task, as a user runs it: a fresh process each time, wall clock
from the command's start to its exit, next to a bare `python -c "import torch, triton"` measured
in the same loop (the floor no eval can beat, and a gauge of how busy the machine is).

    python scripts/bench/bench_eval_cold.py [--task activation/relu] [--runs 5] [--out FILE.json]

The candidate is the task's own solution, pasted into an LLM-style answer (prose around a fenced
block), so the extraction path runs too. Prints one JSON object: per-run walls, their median and
the import floor's median.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _wall(argv: list[str]) -> tuple[float, subprocess.CompletedProcess]:
    t0 = time.perf_counter()
    r = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    return time.perf_counter() - t0, r


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--task", default="activation/relu")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--out")
    args = ap.parse_args()
    solution = ROOT / "tasks" / args.task / "solution.py"
    answer = Path(tempfile.mkdtemp()) / "answer.md"
    answer.write_text(f"Here is the kernel:\n\n```python\n{solution.read_text()}```\n\nDone.\n")
    walls, floors, evals = [], [], []
    for _ in range(args.runs):
        floor, _ = _wall([sys.executable, "-c", "import torch, triton"])
        wall, r = _wall([sys.executable, "-m", "kbx_ray.cli", "eval", args.task, str(answer),
                         "--json"])
        if r.returncode != 0:
            sys.exit(f"kbx eval failed ({r.returncode}): {r.stderr[-2000:]}")
        walls.append(round(wall, 3))
        floors.append(round(floor, 3))
        evals.append(json.loads(r.stdout)["eval_wall_s"])
    out = {"task": args.task, "runs": args.runs, "wall_s": walls,
           "median_wall_s": statistics.median(walls), "eval_wall_s": evals,
           "import_torch_triton_s": floors, "median_import_s": statistics.median(floors),
           "cpus": os.cpu_count(), "load_avg": os.getloadavg()}
    print(json.dumps(out, indent=1))
    if args.out:
        Path(args.out).write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
