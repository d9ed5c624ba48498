"""Balance at scale: does one driver keep 256 evaluators busy? Writes results/bench_scale.json.

The whole driver is real: `engine.run_sweep` plans the grid, derives its concurrency
(engine.max_concurrency=0), runs the method coroutines, dispatches through `EvaluatorGroup` and
writes Parquet. Only the evaluators are simulated, in the driver's event loop: 256 Ray actor
processes (about 0.2 GB each) do not fit the 2-core machine this runs on, and their verdicts are
not what is measured. Each simulated evaluation takes a time drawn log-uniformly from 2-20 s
(FIELD.md: a warm evaluation is dominated by timing), with `--stragglers` of them at 120 s, all
scaled by `--time-scale` (0.2: 0.4-4 s) so the run takes about a minute.

Busy fraction: sampled every 0.1 s, the share of a pool's evaluators evaluating at the moments
its queue holds candidates waiting for one (an idle evaluator then is the driver's fault). Also
reported: the share over the window from the first evaluation to the last one's start, which
includes the tail where stragglers hold back the last cells and nothing is left to hand out.

    python scripts/bench/bench_scale.py [--evaluators 256] [--cells 3520] [--time-scale 0.2]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import logging
import math
import os
import platform
import random
import resource
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from kbx_ray.orchestration import engine, evaluator_group  # noqa: E402
from kbx_ray.config.compose import load_config  # noqa: E402
from kbx_ray.config.structured import EngineConfig  # noqa: E402
from kbx_ray.evaluate.settings import EvalConfig  # noqa: E402
from kbx_ray.config.hardware import HardwarePool  # noqa: E402
from kbx_ray.types import EvalResult, Stage  # noqa: E402

log = logging.getLogger("bench_scale")


class _Remote:
    def __init__(self, fn: Any) -> None:
        self.remote = fn


class SimEvaluator:
    """An evaluator handle with the actor's interface; each call sleeps its drawn time."""

    def __init__(self, gpu: str, rng: random.Random, scale: float, stragglers: float,
                 busy: list[tuple[float, float]]) -> None:
        self.gpu, self.rng, self.scale, self.stragglers, self.busy = gpu, rng, scale, stragglers, busy
        self.evaluate = _Remote(self._evaluate)
        self.info = _Remote(self._info)

    async def _info(self) -> dict:
        return {"device": "cuda", "pid": os.getpid()}

    async def _evaluate(self, task: Any, cand: Any, aot: Any = None) -> EvalResult:
        seconds = 120.0 if self.rng.random() < self.stragglers else \
            math.exp(self.rng.uniform(math.log(2.0), math.log(20.0)))
        t0 = time.monotonic()
        await asyncio.sleep(seconds * self.scale)
        self.busy.append((t0, time.monotonic()))
        return EvalResult(task_id=task.task_id, candidate_id=cand.candidate_id, stage=Stage.DONE,
                          call_ok=True, exec_ok=True, device="cuda", gpu_name=self.gpu)


def _sampler(stop: threading.Event, out: list[tuple[float, float, float]], made: list,
             queued: dict[str, list[float]]) -> None:
    """Driver CPU (fraction of one core) and RSS every second; every 0.1 s, for each pool with
    candidates waiting, the fraction of its evaluators evaluating."""
    import psutil

    proc = psutil.Process()
    last_t, last_cpu = time.monotonic(), sum(proc.cpu_times()[:2])
    tick = 0
    while not stop.wait(0.1):
        for group in made:
            if group.stats.waiting > 0:
                queued.setdefault(group.pool.name, []).append(
                    min(1.0, group.stats.in_flight / len(group.actors)))
        tick += 1
        if tick % 10 == 0:
            t, cpu = time.monotonic(), sum(proc.cpu_times()[:2])
            out.append((t, (cpu - last_cpu) / (t - last_t), proc.memory_info().rss / 2**20))
            last_t, last_cpu = t, cpu


def run(args: argparse.Namespace) -> dict[str, Any]:
    rng = random.Random(args.seed)
    busy: dict[str, list[tuple[float, float]]] = {"h100": [], "a100": []}
    per_pool = args.evaluators // 2
    real_group = evaluator_group.EvaluatorGroup
    made: list[Any] = []
    queued: dict[str, list[float]] = {}

    def simulated(pool: HardwarePool, eng: EngineConfig, evaluation: EvalConfig, n_todo: int = 0,
                  handles: Any = None, **_: Any) -> evaluator_group.EvaluatorGroup:
        sims = [SimEvaluator(pool.gpu, rng, args.time_scale, args.stragglers, busy[pool.name])
                for _ in range(per_pool)]
        made.append(real_group(pool, eng, evaluation, n_todo, handles=sims))
        return made[-1]

    samples = max(1, math.ceil(args.cells / 176))
    out = Path(tempfile.mkdtemp(prefix="bench_scale_"))
    cfg = load_config([f"output_dir={out}", "hardware=[h100,a100]", "sink.wandb.mode=disabled",
                       f"sweep.samples={samples}", "engine.max_concurrency=0",
                       "engine.flush_every=256", "engine.flush_s=5", "engine.flush_min_s=1"])
    evaluator_group.EvaluatorGroup = simulated  # the engine imports it from the module at sweep start
    engine._wait_for_pools = lambda p: None  # no GPU nodes here: the evaluators are simulated
    stop, usage = threading.Event(), []
    sampler = threading.Thread(target=_sampler, args=(stop, usage, made, queued), daemon=True)
    sampler.start()
    t0, cpu0 = time.monotonic(), resource.getrusage(resource.RUSAGE_SELF)
    try:
        p = engine.run_sweep(cfg)
    finally:
        stop.set()
        evaluator_group.EvaluatorGroup = real_group
    wall = time.monotonic() - t0
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return _summary(args, p, busy, queued, per_pool, usage, wall, ru.ru_utime + ru.ru_stime -
                    cpu0.ru_utime - cpu0.ru_stime, ru.ru_maxrss / 1024)


def _summary(args: argparse.Namespace, p: Any, busy: dict, queued: dict, per_pool: int,
             usage: list,
             wall: float, cpu_s: float, max_rss_mb: float) -> dict[str, Any]:
    pools_out = {}
    for name, spans in busy.items():
        first, last = min(s for s, _ in spans), max(s for s, _ in spans)
        window = last - first
        in_window = sum(min(e, last) - max(s, first) for s, e in spans if e > first and s < last)
        waits = queued.get(name, [])
        pools_out[name] = {"evaluators": per_pool, "evaluations": len(spans),
                           "busy_while_queued": round(sum(waits) / max(1, len(waits)), 4),
                           "queued_s": round(len(waits) * 0.1, 1),
                           "busy_first_to_last_start": round(in_window / (per_pool * window), 4),
                           "window_s": round(window, 1)}
    all_busy = sum(v["busy_while_queued"] * v["queued_s"] for v in pools_out.values()) / \
        max(1e-9, sum(v["queued_s"] for v in pools_out.values()))
    from kbx_ray.sinks import read_table

    ev = read_table(p.sweep_dir, "evaluations")
    cpus = [c for _, c, _ in usage]
    return {
        "what": "engine.run_sweep with 256 simulated evaluators (2 pools x 128) in the driver's "
                "event loop; times log-uniform 2-20 s, stragglers at 120 s, scaled by time_scale",
        "hardware": {"machine": platform.machine(), "cpus": os.cpu_count(),
                     "python": platform.python_version(), "node": platform.node(),
                     "note": "a 2-core CPU box shared with other jobs: driver CPU is an upper bound"},
        "settings": {"evaluators": args.evaluators, "cells": p.n_cells, "time_scale": args.time_scale,
                     "stragglers": args.stragglers, "max_concurrency": "0 (derived)",
                     "derived_concurrency": engine.scaling.concurrency(p.engine, args.evaluators,
                                                                       0)},
        "busy_fraction": round(all_busy, 4),
        "pools": pools_out,
        "rows": int(len(ev)), "rows_expected": 2 * p.n_cells,
        "wall_s": round(wall, 1),
        "driver": {"cpu_s": round(cpu_s, 1), "cpu_mean_cores": round(cpu_s / wall, 3),
                   "cpu_peak_cores_1s": round(max(cpus, default=0.0), 3),
                   "rss_max_mb": round(max_rss_mb, 1),
                   "rss_start_mb": round(usage[0][2], 1) if usage else None,
                   "rss_end_mb": round(usage[-1][2], 1) if usage else None},
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--evaluators", type=int, default=256)
    ap.add_argument("--cells", type=int, default=3520)
    ap.add_argument("--time-scale", type=float, default=0.2)
    ap.add_argument("--stragglers", type=float, default=0.01, help="fraction of 120 s evaluations")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=str(ROOT / "scripts/bench/results/bench_scale.json"))
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    result = run(args)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    log.info("busy %.1f%%, %d rows in %.1f s, driver %.2f cores mean, %.0f MB max",
             100 * result["busy_fraction"], result["rows"], result["wall_s"],
             result["driver"]["cpu_mean_cores"], result["driver"]["rss_max_mb"])


if __name__ == "__main__":
    main()
