"""What batching a candidate's cases into one worker call could save (issue 9's technique list).

    python scripts/bench/bench_roundtrip.py [--out scripts/bench/results/bench_roundtrip_cpu.json]

The evaluator sends the sandbox worker one request per case and seed, so that it can stop at the
first failing case (most candidates fail, and the verdict is the parent's, so the worker cannot stop
by itself). Batching would save each request's fixed cost: the pipe round trip and the worker's
dispatch. Measured side by side here: the round trip of an empty request (`hello`) on a warm worker,
and the requests one evaluation makes (counted on bench_eval's tasks' solutions, which pass every
case: the most requests a candidate makes). Against the evaluator's per-candidate wall time on the
H200 (`bench_eval_h200.json`), their product is the most batching could gain.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
TASKS = ["activation/relu", "math/exp", "reduce/sum", "normalization/layer_norm",
         "fusion/add_gelu", "matrix_multiply/matmul", "loss/cross_entropy", "index/index_select"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trips", type=int, default=2000)
    ap.add_argument("--out", default=str(ROOT / "scripts/bench/results/bench_roundtrip_cpu.json"))
    args = ap.parse_args()
    from kbx_ray.evaluate.parent.evaluator import EvalConfig, Evaluator
    from kbx_ray.evaluate.parent.sandbox import Sandbox
    from kbx_ray.prompting.extract import candidate_id
    from kbx_ray.suites.builtin import get_task
    from kbx_ray.types import Candidate

    ev = Evaluator(EvalConfig(device="cpu", cpu_timing=True))
    counts: dict[str, dict[str, int]] = {}
    real = Sandbox.request

    def counting(self, header: dict, timeout: float):  # noqa: ANN001, ANN202
        op = header.get("op", "")
        counts[current].setdefault(op, 0)
        counts[current][op] += 1
        return real(self, header, timeout)

    Sandbox.request = counting  # type: ignore[method-assign]
    try:
        for task_id in TASKS:
            current = task_id
            counts[task_id] = {}
            task = get_task(task_id)
            code = Path(task.solution_path).read_text()
            res = ev.evaluate(task, Candidate(candidate_id(task_id, code), task_id, code, task.name))
            assert res.exec_ok, (task_id, res.error_msg)
        Sandbox.request = real  # type: ignore[method-assign]
        ev.sandbox.request({"op": "hello"}, 300)
        trips = []
        for _ in range(args.trips):
            t0 = time.perf_counter()
            ev.sandbox.request({"op": "hello"}, 30)
            trips.append(time.perf_counter() - t0)
    finally:
        Sandbox.request = real  # type: ignore[method-assign]
        ev.close()
    rtt_ms = statistics.median(trips) * 1e3
    per_cand = {t: sum(c.values()) - c.get("hello", 0) for t, c in counts.items()}
    h200 = json.loads((ROOT / "scripts/bench/results/bench_eval_h200.json").read_text())
    walls = [v["wall_s"] for k, v in h200["per_candidate"].items() if k.split(":")[1] == "solution"]
    doc = {"benchmark": "bench_roundtrip", "measured_at": time.strftime("%Y-%m-%d %H:%M UTC",
                                                                        time.gmtime()),
           "hardware": f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs "
                       "(sandbox worker on the CPU: the pipe and dispatch are the same on a GPU host)",
           "roundtrip_ms_median": round(rtt_ms, 4),
           "roundtrip_ms_p90": round(sorted(trips)[int(0.9 * len(trips))] * 1e3, 4),
           "requests_per_passing_candidate": per_cand, "requests_by_op": counts,
           "h200_solution_eval_wall_s_median": round(statistics.median(walls), 3),
           "most_batching_could_save": round(max(per_cand.values()) * rtt_ms / 1e3
                                             / statistics.median(walls), 5)}
    Path(args.out).write_text(json.dumps(doc, indent=1) + "\n")
    print(json.dumps({k: v for k, v in doc.items() if not isinstance(v, dict)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
