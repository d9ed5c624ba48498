"""Ray orchestration: cells -> method coroutines -> evaluator pools -> records -> sinks.

The driver is the only process that writes sinks. `max_concurrency` worker coroutines pull cells
from a lazy iterator (so driver memory does not grow with the grid), run the cell's method with
`generate` (a backend, through the generation log) and `evaluate` (the primary pool) injected, then
evaluate the final candidate on every other pool. A cell's rows are written together once it
completes, so a killed driver leaves only whole cells, and a re-run skips exactly those.
"""
from __future__ import annotations

import asyncio
import logging
import shutil
import time
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, Iterator

from kbx_ray import hardware, provenance, scaling
from kbx_ray.config import Config, ConfigError, sweep_id
from kbx_ray.grid import Cell, count_cells, iter_cells
from kbx_ray.genlog import FILE as WAL_FILE
from kbx_ray.genlog import GenerationLog
from kbx_ray.llm.base import GenParams, build_backend
from kbx_ray.methods.base import Attempt, build_method
from kbx_ray.records import evaluation_row, generation_row
from kbx_ray.sinks import build_sinks, clean_tmp, done_cells, written_generations
from kbx_ray.sinks.wandb_runs import replica_gauges
from kbx_ray.suite import load_suite
from kbx_ray.types import Candidate, EvalResult, Generation, Task, stable_hash

log = logging.getLogger(__name__)


@dataclass
class SweepPlan:
    sweep_id: str
    sweep_dir: Path
    tasks: dict[str, Task]
    pools: dict[str, hardware.HardwarePool]
    n_cells: int
    done: set[str]
    cfg: Config
    samples: dict[str, int] | None = None  # task id -> samples, where a replay source says

    def cells(self) -> Iterator[Cell]:
        return iter_cells(self.cfg, list(self.tasks.values()), list(self.pools), self.samples)

    def todo(self) -> Iterator[Cell]:
        return (c for c in self.cells() if c.cell_id not in self.done)

    @cached_property
    def n_todo(self) -> int:
        """Cells not yet recorded (counted once: `done` is fixed when the plan is made)."""
        done = sum(1 for c in self.cells() if c.cell_id in self.done) if self.done else 0
        return self.n_cells - done


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
    """Everything that can be checked before Ray starts: config, tasks, pools, the grid, resume,
    and that a replay source answers every cell (another harness's kernels name the tasks)."""
    from kbx_ray.config_checks import validate
    from kbx_ray.dry_run import check_replay
    from kbx_ray.grid import narrow_to_sources

    validate(cfg)
    include, samples = narrow_to_sources(cfg)
    tasks = load_suite(cfg.suite.path, include, cfg.suite.name)
    pools = resolve_pools(cfg.hardware)
    sid = sweep_id(cfg)
    sweep_dir = Path(cfg.output_dir) / sid
    done = done_cells(sweep_dir) if sweep_dir.exists() else set()
    p = SweepPlan(sid, sweep_dir, {t.task_id: t for t in tasks}, pools,
                  count_cells(cfg, tasks, samples), done, cfg, samples)
    check_replay(p)
    return p


def describe(p: SweepPlan) -> str:
    from kbx_ray.dry_run import estimate

    return estimate(p) + _aot_line(p) + _balance_line(p)


def _balance_line(p: SweepPlan) -> str:
    """Every round of a cell is evaluated on its primary pool; the others see its final candidate
    only. Said up front, since a repair sweep then loads the primary pool many times over."""
    if len(p.pools) < 2:
        return ""
    from kbx_ray.config import methods

    per_cell = max((max(1, m.branches) * (m.rounds + 1) for m in methods(p.cfg)), default=1)
    if per_cell <= 1:
        return ""
    primary = next(iter(p.pools))
    return (f"; imbalance: pool {primary} evaluates up to {per_cell} candidates per cell (every "
            f"round), each other pool 1 (the final): give {primary} about {per_cell}x the "
            "evaluators, or put the pool with the most GPUs first in hardware=")


def _aot_line(p: SweepPlan) -> str:
    if p.cfg.engine.aot_compile == "off":
        return ""
    archs = sorted({pool.compute_capability for pool in p.pools.values() if pool.compute_capability})
    if not archs:
        return "; engine.aot_compile: no pool has a compute_capability, nothing is compiled ahead"
    return (f"; ahead-of-time compiles for {', '.join(f'sm_{a}' for a in archs)} on "
            f"{p.cfg.engine.compile_workers} CPU compile worker(s) (engine.aot_compile="
            f"{p.cfg.engine.aot_compile})")


class _Writer:
    """Buffers whole cells and writes them in batches (whichever of count or age comes first).

    A part is also at least `min_s` old: cells that finish by thousands a second (a replayed or
    noop sweep) would otherwise cost a Parquet part, with its fsyncs, every few milliseconds.
    """

    def __init__(self, sinks: Any, genlog: GenerationLog, every: int, seconds: float,
                 min_s: float = 0.0, written: set[tuple[str, int, int]] | None = None) -> None:
        self.sinks, self.genlog, self.every, self.seconds = sinks, genlog, every, seconds
        self.min_s = min_s
        # (cell, round, branch) of generation rows already in Parquet for cells without
        # evaluation rows: a run stopped between a batch's two parts wrote them
        self.written = written or set()
        self.gen: list[dict] = []
        self.ev: list[dict] = []
        self.cells: set[str] = set()
        self.last = time.monotonic()

    def add(self, cell_id: str, gens: list[dict], evals: list[dict]) -> None:
        self.gen += [g for g in gens if (cell_id, g["round"], g["branch"]) not in self.written]
        self.ev += evals
        self.cells.add(cell_id)
        age = time.monotonic() - self.last
        if age > self.seconds or (len(self.cells) >= self.every and age >= self.min_s):
            self.flush()

    def due(self) -> bool:
        """Buffered cells older than the age limit (checked by a timer, not only by `add`)."""
        return bool(self.cells) and time.monotonic() - self.last > self.seconds

    def flush(self) -> None:
        if self.gen:
            self.sinks.write_generations(self.gen)
            self.gen = []  # written: a failed evaluations part must not write them again
        if self.ev:
            self.sinks.write_evaluations(self.ev)
        self.genlog.forget(self.cells)
        self.gen, self.ev, self.cells, self.last = [], [], set(), time.monotonic()


async def _run_cell(cell: Cell, p: SweepPlan, backends: dict, pools: dict, genlog: GenerationLog,
                    writer: _Writer) -> None:
    task = p.tasks[cell.task_id]
    # Model and method configs are shared by the cells of one grid variant: build each once.
    if id(cell.model) not in backends:
        backends[id(cell.model)] = build_backend(cell.model)
    if id(cell.method) not in backends:
        backends[id(cell.method)] = build_method(cell.method)
    backend, method = backends[id(cell.model)], backends[id(cell.method)]

    async def generate(prompt: Any, rnd: int, branch: int = 0) -> Generation:
        logged = genlog.lookup(cell.cell_id, rnd, branch)
        if logged is not None:
            return logged  # resumed: this call was made before the driver stopped
        params = GenParams(temperature=cell.model.temperature, max_tokens=cell.model.max_tokens,
                           seed=int(stable_hash(cell.cell_id, rnd, branch, n=8), 16) % (2**31),
                           meta={"task_id": task.task_id, "sample": cell.sample, "round": rnd,
                                 "branch": branch, "method": cell.method.name})
        gen = await backend.generate(prompt.messages, params)
        genlog.append(cell.cell_id, rnd, branch, gen)
        return gen

    primary, others = cell.hardware[0], cell.hardware[1:]

    async def evaluate(cand: Candidate) -> EvalResult:
        return await pools[primary].evaluate(task, cand)

    started = time.time()
    attempts: list[Attempt] = await method(task, generate, evaluate, pool=p.pools.get(primary))
    rows = [evaluation_row(p.sweep_id, cell, task, a, started, primary) for a in attempts]
    finals = [a for a in attempts if a.final] or attempts[-1:]
    extra = await asyncio.gather(*(pools[hw].evaluate(task, a.candidate)
                                   for hw in others for a in finals))
    pairs = [(hw, a) for hw in others for a in finals]
    for (hw, a), res in zip(pairs, extra):
        rows.append(evaluation_row(p.sweep_id, cell, task, _with_result(a, res), started, hw))
    writer.add(cell.cell_id, [generation_row(p.sweep_id, cell, a) for a in attempts], rows)


def _with_result(a: Attempt, res: EvalResult) -> Attempt:
    from dataclasses import replace

    return replace(a, result=res)


async def _drive(p: SweepPlan, sinks: Any) -> None:
    from kbx_ray.pools import EvaluatorPool

    cfg = p.cfg
    pools = {name: EvaluatorPool(pool, cfg, p.n_todo) for name, pool in p.pools.items()}
    compiler, attach = None, None
    elastic = any(pool.elastic for pool in pools.values())
    if elastic:  # a role cluster (cluster.yaml): say what the sweep needs, so its nodes start
        from kbx_ray.config import models

        scaling.request(sum((pool.demand for pool in pools.values() if pool.elastic),
                            scaling.generation_demand(models(cfg))))
    try:
        await asyncio.gather(*(pool.start() for pool in pools.values()))
        if cfg.engine.aot_compile != "off" and cfg.engine.mode != "noop" and any(
                pool.compute_capability for pool in p.pools.values()):
            from kbx_ray.compile_pool import CompilePool

            # after the evaluators have their CPUs; `on` does not wait for it to come up
            compiler = CompilePool(cfg.engine.compile_workers, cfg.engine.compile_timeout_s,
                                   cfg.engine.compile_resource, sandbox=cfg.evaluation.sandbox,
                                   seed=cfg.evaluation.base_seed)
            attach = asyncio.ensure_future(_attach(compiler, pools, cfg.engine.actor_ready_s))
            if cfg.engine.aot_compile == "always":
                await attach
        await _run_cells(p, sinks, pools)
    finally:
        if attach is not None:
            attach.cancel()
        for pool in pools.values():
            pool.close()
        if compiler is not None:
            compiler.close()
        if elastic:
            scaling.release()


async def _attach(compiler: Any, pools: dict, ready_s: float) -> None:
    await compiler.start(ready_s)
    if compiler.actors:
        for pool in pools.values():
            pool.compiler = compiler


async def _flush_when_due(writer: _Writer, period: float, errors: list[BaseException]) -> None:
    """Cells that finish long before the next one (slow repair chains) are written within about
    `flush_s`, not when the next cell completes: a driver killed meanwhile would lose them."""
    while not errors:
        await asyncio.sleep(period)
        if writer.due():
            try:
                writer.flush()
            except BaseException as e:  # noqa: BLE001 - the workers stop on it, as on their own
                errors.append(e)
                return


async def _run_cells(p: SweepPlan, sinks: Any, pools: dict) -> None:
    cfg = p.cfg
    genlog = GenerationLog(p.sweep_dir, cfg.engine.wal_fsync)
    writer = _Writer(sinks, genlog, cfg.engine.flush_every, cfg.engine.flush_s,
                     cfg.engine.flush_min_s, written_generations(p.sweep_dir, p.done))
    backends: dict = {}
    cells = p.todo()
    errors: list[BaseException] = []

    async def worker() -> None:
        for cell in cells:  # a shared iterator: each cell is taken by exactly one worker
            if errors:
                return
            try:
                await _run_cell(cell, p, backends, pools, genlog, writer)
            except BaseException as e:  # noqa: BLE001 - stop cleanly, keep what is recorded
                errors.append(e)
                return

    async def report() -> None:
        while True:
            await asyncio.sleep(30)
            sinks.write_metrics(replica_gauges(list(backends.values())))
            for name, pool in pools.items():
                pool.grow()  # elastic pools: nodes of the pool's type beyond those asked for
                log.info(pool.stats.line(name, len(pool.actors)))
            compiler = next((pool.compiler for pool in pools.values() if pool.compiler), None)
            if compiler is not None:
                log.info(compiler.line())

    reporter = asyncio.create_task(report())
    ticker = asyncio.create_task(_flush_when_due(writer, max(0.5, cfg.engine.flush_s / 2), errors))
    try:
        await asyncio.gather(*(worker() for _ in range(_concurrency(cfg, pools))))
    finally:
        reporter.cancel()
        ticker.cancel()
        writer.flush()
        genlog.close()
        sinks.write_metrics(replica_gauges(list(backends.values())))
    if errors:
        raise errors[0]


def _concurrency(cfg: Config, pools: dict) -> int:
    from kbx_ray.config import models

    n = scaling.concurrency(cfg, sum(len(pool.actors) for pool in pools.values()),
                            scaling.replica_slots(models(cfg)))
    if cfg.engine.max_concurrency <= 0:
        log.info("%d cells in flight (engine.max_concurrency=0: from %d evaluators)", n,
                 sum(len(pool.actors) for pool in pools.values()))
    return max(1, n)


def _wait_for_pools(p: SweepPlan) -> None:
    """Fail at start, naming the pool, unless the autoscaler brings it up within pool_wait_s.
    On a role cluster (cluster.yaml) a GPU pool is not waited for here: its pending evaluators
    and the sweep's resource request make the autoscaler start its nodes (EvaluatorPool.start)."""
    deadline = time.monotonic() + p.cfg.engine.pool_wait_s
    roles = scaling.role_cluster()
    for pool in p.pools.values():
        if roles and pool.is_gpu:
            continue
        while not hardware.pool_available(pool):
            if time.monotonic() > deadline:
                raise ConfigError(hardware.unavailable_message(pool))
            log.info("waiting for the autoscaler to start a node for pool %s", pool.name)
            time.sleep(5)


def run_sweep(cfg: Config) -> SweepPlan:
    """Plan, start Ray, run every pending cell, and return the plan (rows are on disk)."""
    import ray

    p = plan(cfg)
    log.info(describe(p))
    n_todo = p.n_todo
    if not n_todo:
        log.info("nothing to do: every cell of %s is already recorded in %s", p.sweep_id, p.sweep_dir)
        return p
    if not ray.is_initialized():
        ray.init(address=cfg.engine.ray_address, include_dashboard=False, configure_logging=False)
    _wait_for_pools(p)
    fresh = not p.sweep_dir.exists()
    p.sweep_dir.mkdir(parents=True, exist_ok=True)
    clean_tmp(p.sweep_dir)  # a killed run's torn parts; only this run writes here from now on
    config = provenance.resolved(cfg, list(p.pools))
    provenance.write_config(p.sweep_dir, config)
    record = provenance.RunRecord(p.sweep_dir, p.sweep_id)
    sinks = build_sinks(p.sweep_dir, p.sweep_id, cfg, extra=[record])
    sinks.start(n_todo, config)
    try:
        asyncio.run(_drive(p, sinks))
    except BaseException as e:
        record.error = e
        raise
    finally:
        sinks.close()
        if fresh and record.error is not None and not _recorded(p.sweep_dir):
            shutil.rmtree(p.sweep_dir, ignore_errors=True)  # a failed start leaves no folder
            log.info("nothing was recorded; removed %s", p.sweep_dir)
    return p


def _recorded(sweep_dir: Path) -> bool:
    """Any row or logged generation: a folder holding paid-for work is never removed."""
    wal = sweep_dir / WAL_FILE
    return any(sweep_dir.glob("*/part-*.parquet")) or (wal.exists() and wal.stat().st_size > 0)
