"""A cold `kbx eval` of one small task, as a user runs it: a fresh process each time, wall clock
from the command's start to its exit, next to a bare `python -c "import torch, triton"` measured
in the same loop (the floor no eval can beat, and a gauge of how busy the machine is).

    python scripts/bench/bench_eval_cold.py [--task activation/relu] [--runs 5] [--out FILE.json]
        [--against DIR]   # another tree (git archive <rev> kbx_ray tasks conf | tar -x -C DIR),
                          # run in the same loop, order alternating, for a ratio that a busy
                          # machine moves less than the walls

The candidate is the task's own solution; this tree's runs paste it into an LLM-style answer
(prose around a fenced block), so the extraction path runs too (a tree from before extraction gets
the .py file). Prints one JSON object: per-run walls and their medians per arm, the import floor.
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


def _wall(argv: list[str], root: Path) -> tuple[float, subprocess.CompletedProcess]:
    t0 = time.perf_counter()
    r = subprocess.run(argv, capture_output=True, text=True, cwd=tempfile.gettempdir(),
                       env={**os.environ, "PYTHONPATH": str(root)})
    return time.perf_counter() - t0, r


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--task", default="activation/relu")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--against", help="another tree to time in the same loop")
    ap.add_argument("--out")
    args = ap.parse_args()
    solution = ROOT / "tasks" / args.task / "solution.py"
    answer = Path(tempfile.mkdtemp()) / "answer.md"
    answer.write_text(f"Here is the kernel:\n\n```python\n{solution.read_text()}```\n\nDone.\n")
    arms = {"this": (ROOT, answer)}
    if args.against:
        other = Path(args.against).resolve()
        arms["against"] = (other, other / "tasks" / args.task / "solution.py")
    walls: dict[str, list[float]] = {name: [] for name in arms}
    floors = []
    for i in range(args.runs):
        floor, _ = _wall([sys.executable, "-c", "import torch, triton"], ROOT)
        floors.append(round(floor, 3))
        for name in (list(arms) if i % 2 == 0 else list(reversed(arms))):
            root, cand = arms[name]
            wall, r = _wall([sys.executable, "-m", "kbx_ray.cli", "eval", args.task, str(cand),
                             "--json"], root)
            if r.returncode != 0:
                sys.exit(f"kbx eval ({name}) failed ({r.returncode}): {r.stderr[-2000:]}")
            walls[name].append(round(wall, 3))
    out = {"task": args.task, "runs": args.runs, "wall_s": walls,
           "median_wall_s": {k: statistics.median(v) for k, v in walls.items()},
           "import_torch_triton_s": floors, "median_import_s": statistics.median(floors),
           "cpus": os.cpu_count(), "load_avg_end": os.getloadavg()}
    if args.against:
        out["against"] = args.against
        out["ratio_against_over_this"] = round(
            out["median_wall_s"]["against"] / out["median_wall_s"]["this"], 3)
    print(json.dumps(out, indent=1))
    if args.out:
        Path(args.out).write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
