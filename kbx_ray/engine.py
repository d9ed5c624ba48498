"""Ray orchestration: cells -> method coroutines -> evaluator pools -> records -> sinks.

The driver is the only process that writes sinks. It runs every pending cell as a coroutine under a
semaphore; a method awaits `generate` (a backend) and `evaluate` (a free evaluator actor of the
cell's hardware pool, one candidate at a time per actor so timing has the GPU to itself). A cell's
rows are written together once it completes, so a killed driver leaves only whole cells behind and a
re-run skips exactly the cells already recorded.
"""
from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from kbx_ray import hardware
from kbx_ray.config import Cell, Config, ConfigError, expand, sweep_id, to_dict
from kbx_ray.llm.base import GenParams, build_backend
from kbx_ray.methods.base import Attempt, build_method
from kbx_ray.records import evaluation_row, generation_row
from kbx_ray.sinks import build_sinks, done_cells
from kbx_ray.suite import load_suite
from kbx_ray.types import Candidate, EvalResult, Task, stable_hash

log = logging.getLogger(__name__)


@dataclass
class SweepPlan:
    sweep_id: str
    sweep_dir: Path
    tasks: dict[str, Task]
    pools: dict[str, hardware.HardwarePool]
    cells: list[Cell]
    todo: list[Cell]


def resolve_pools(names: list[str]) -> dict[str, hardware.HardwarePool]:
    pools = {}
    for name in names:
        try:
            pool = hardware.detect_local() if name == "auto" else hardware.get_pool(name)
        except KeyError as e:
            raise ConfigError(str(e)) from None
        pools[pool.name] = pool
    return pools


def plan(cfg: Config) -> SweepPlan:
    """Everything that can be checked before Ray starts: config, tasks, pools, the grid, resume."""
    tasks = load_suite(cfg.suite.path, cfg.suite.include or None)
    pools = resolve_pools(cfg.hardware)
    cells = expand(cfg, tasks, list(pools))
    sid = sweep_id(cfg)
    sweep_dir = Path(cfg.output_dir) / sid
    done = done_cells(sweep_dir) if sweep_dir.exists() else set()
    todo = [c for c in cells if c.cell_id not in done]
    return SweepPlan(sid, sweep_dir, {t.task_id: t for t in tasks}, pools, cells, todo)


def describe(p: SweepPlan, cfg: Config) -> str:
    per_pool = {name: sum(1 for c in p.cells if c.hardware == name) for name in p.pools}
    cases = sum(len(t.cases) for t in p.tasks.values()) / max(1, len(p.tasks))
    gpu_s = sum(n for name, n in per_pool.items() if p.pools[name].is_gpu) * cases * (
        2 * cfg.evaluation.timing.budget_s + 0.2)
    return (f"sweep {p.sweep_id}: {len(p.cells)} cells ({len(p.tasks)} tasks; per pool "
            f"{per_pool}); {len(p.cells) - len(p.todo)} already recorded, {len(p.todo)} to run; "
            f"estimated {gpu_s / 3600:.2f} GPU-hours at most (timing budget "
            f"{cfg.evaluation.timing.budget_s:g} s per case and side)")


class EvaluatorPool:
    """A fixed set of evaluator actors for one hardware pool, handed out one candidate at a time."""

    def __init__(self, pool: hardware.HardwarePool, cfg: Config, n: int) -> None:
        import ray

        from kbx_ray.evaluate.actor import EvaluatorActor

        ecfg = cfg.evaluation
        ecfg.peak_gbps = pool.peak_gbps
        ecfg.peak_tflops = {k: hardware.peak_for(pool, k) for k in
                            ("float32", "float16", "bfloat16", "int8", "tf32")}
        if not pool.is_gpu:
            ecfg.device = "cpu"
        opts = hardware.ray_options(pool)
        opts.setdefault("num_cpus", 1)
        self.pool = pool
        self.actors = [EvaluatorActor.options(max_restarts=2, **opts).remote(ecfg)
                       for _ in range(n)]
        self.free: asyncio.Queue = asyncio.Queue()
        for a in self.actors:
            self.free.put_nowait(a)
        self.ray = ray

    async def evaluate(self, task: Task, cand: Candidate, retries: int = 2) -> EvalResult:
        for attempt in range(retries + 1):
            actor = await self.free.get()
            try:
                res: EvalResult = await actor.evaluate.remote(task, cand)
                problem = hardware.check_gpu_name(self.pool, res.gpu_name or res.device)
                if problem:
                    raise ConfigError(problem)
                return res
            except self.ray.exceptions.RayActorError as e:
                log.warning("evaluator actor died on %s (attempt %d): %s", task.task_id, attempt + 1,
                            str(e).splitlines()[0])
                last = str(e).splitlines()[0]
            finally:
                self.free.put_nowait(actor)
        return EvalResult(task_id=task.task_id, candidate_id=cand.candidate_id, stage="compile",
                          error_kind="infra_error", error_msg=f"evaluator died {retries + 1} times: {last}")


async def _run_cells(p: SweepPlan, cfg: Config, sinks: Any, evaluators: dict[str, EvaluatorPool]) -> None:
    backends = {}
    sem = asyncio.Semaphore(cfg.engine.max_concurrency)
    pending_gen: list[dict] = []
    pending_eval: list[dict] = []
    last_flush = time.monotonic()
    cells_in_buffer = 0

    def flush() -> None:
        nonlocal last_flush, cells_in_buffer
        if pending_gen:
            sinks.write_generations(list(pending_gen))
            pending_gen.clear()
        if pending_eval:
            sinks.write_evaluations(list(pending_eval))
            pending_eval.clear()
        last_flush, cells_in_buffer = time.monotonic(), 0

    async def run_cell(cell: Cell) -> None:
        nonlocal cells_in_buffer
        task = p.tasks[cell.task_id]
        key = stable_hash(asdict(cell.model))
        if key not in backends:
            backends[key] = build_backend(cell.model)
        backend = backends[key]

        async def generate(prompt: Any, rnd: int, branch: int = 0) -> Any:
            params = GenParams(temperature=cell.model.temperature, max_tokens=cell.model.max_tokens,
                               seed=int(stable_hash(cell.cell_id, rnd, branch, n=8), 16) % (2**31),
                               meta={"task_id": task.task_id, "sample": cell.sample, "round": rnd,
                                     "branch": branch, "method": cell.method.name})
            return await backend.generate(prompt.messages, params)

        async def evaluate(cand: Candidate) -> EvalResult:
            return await evaluators[cell.hardware].evaluate(task, cand)

        async with sem:
            started = time.time()
            attempts: list[Attempt] = await build_method(cell.method)(task, generate, evaluate)
        pending_gen.extend(generation_row(p.sweep_id, cell, a) for a in attempts)
        pending_eval.extend(evaluation_row(p.sweep_id, cell, task, a, started) for a in attempts)
        cells_in_buffer += 1
        if cells_in_buffer >= cfg.engine.flush_every or time.monotonic() - last_flush > cfg.engine.flush_s:
            flush()

    try:
        await asyncio.gather(*(run_cell(c) for c in p.todo))
    finally:
        flush()


def run_sweep(cfg: Config) -> SweepPlan:
    """Plan, start Ray, run every pending cell, and return the plan (rows are on disk)."""
    import ray

    p = plan(cfg)
    log.info(describe(p, cfg))
    if not p.todo:
        log.info("nothing to do: every cell of %s is already recorded in %s", p.sweep_id, p.sweep_dir)
        return p
    if not ray.is_initialized():
        ray.init(address=cfg.engine.ray_address, include_dashboard=False, log_to_driver=True,
                 configure_logging=False)
    for pool in p.pools.values():
        if not hardware.pool_available(pool):
            raise ConfigError(hardware.unavailable_message(pool))
    p.sweep_dir.mkdir(parents=True, exist_ok=True)
    n_eval = cfg.engine.evaluators
    sinks = build_sinks(p.sweep_dir, p.sweep_id, cfg.wandb)
    sinks.start(len(p.todo), to_dict(cfg))
    try:
        async def main() -> None:
            evaluators = {name: EvaluatorPool(pool, cfg, _actors_for(pool, n_eval))
                          for name, pool in p.pools.items()}
            await _run_cells(p, cfg, sinks, evaluators)

        asyncio.run(main())
    finally:
        sinks.close()
    return p


def _actors_for(pool: hardware.HardwarePool, requested: int) -> int:
    """One evaluator per GPU of the pool's type in the cluster (or `engine.evaluators` if set)."""
    import ray

    if requested > 0:
        return requested
    if not pool.is_gpu:
        cpus = int(ray.cluster_resources().get("CPU", 1))
        return max(1, min(4, cpus // 2))
    key = f"accelerator_type:{pool.accelerator_type}" if pool.accelerator_type else None
    gpus = sum(n.get("Resources", {}).get("GPU", 0) for n in ray.nodes()
               if n.get("Alive") and (key is None or key in n.get("Resources", {})))
    return max(1, int(gpus // max(pool.num_gpus_per_actor, 1)))
