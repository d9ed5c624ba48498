"""The driver: cells -> method -> generate / evaluate -> writer.
More: kbx_ray/orchestration/README.md, `engine.py`.
"""
from __future__ import annotations

import asyncio
import logging
import shutil
import time
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from kbx_ray.config import hardware
from kbx_ray.orchestration import evaluators as evaluator_groups, ray_session, scaling
from kbx_ray.records import provenance, sweep_folder
from kbx_ray.config.structured import Config, ModelConfig
from kbx_ray.errors import ConfigError
from kbx_ray.orchestration.grid import Cell
from kbx_ray.records.genlog import FILE as WAL_FILE
from kbx_ray.records.genlog import GenerationLog
from kbx_ray.llm.base import Backend, GenParams, build_backend
from kbx_ray.methods.base import Attempt, Generate, Method, build_method
from kbx_ray.config.plan import Sweep, resolve
from kbx_ray.prompting.prompts import Prompt
from kbx_ray.records.rows import evaluation_row, generation_row
from kbx_ray.sinks import build_sinks, clean_tmp, written_generations
from kbx_ray.sinks.wandb_runs import replica_gauges
from kbx_ray.types import Generation, Task, stable_hash
from kbx_ray.records.writer import CellWriter, flush_when_due

if TYPE_CHECKING:
    from kbx_ray.orchestration.evaluator_group import EvaluatorGroup
    from kbx_ray.sinks.base import FanOut

log = logging.getLogger(__name__)


def plan(cfg: Config) -> Sweep:
    """The sweep `cfg` asks for, resolved and checked before Ray starts (plan.py)."""
    return resolve(cfg)


def describe(p: Sweep) -> str:
    from kbx_ray.orchestration.dry_run import describe as what_it_will_do

    return what_it_will_do(p)


@dataclass
class _Built:
    """Each grid variant's backend and method, built once: its cells share its config."""

    backends: dict[int, Backend] = field(default_factory=dict)
    methods: dict[int, Method] = field(default_factory=dict)

    def of(self, cell: Cell) -> tuple[Backend, Method]:
        if id(cell.model) not in self.backends:
            self.backends[id(cell.model)] = build_backend(cell.model)
        if id(cell.method) not in self.methods:
            self.methods[id(cell.method)] = build_method(cell.method)
        return self.backends[id(cell.model)], self.methods[id(cell.method)]


async def _run_cell(cell: Cell, p: Sweep, built: _Built, groups: dict[str, EvaluatorGroup],
                    genlog: GenerationLog, writer: CellWriter) -> None:
    """One cell: its method, with `generate` and `evaluate` (its primary pool) injected; its final
    candidates on the other pools; its rows, to the writer."""
    task = p.tasks[cell.task_id]
    backend, method = built.of(cell)
    primary, others = cell.hardware[0], cell.hardware[1:]
    started = time.time()
    attempts: list[Attempt] = await method(task, _generator(cell, task, backend, genlog),
                                           partial(groups[primary].evaluate, task),
                                           pool=p.pools.get(primary))
    rows = [evaluation_row(p.sweep_id, cell, task, a, started, primary) for a in attempts]
    finals = [a for a in attempts if a.final] or attempts[-1:]
    pairs = [(hw, a) for hw in others for a in finals]
    extra = await asyncio.gather(*(groups[hw].evaluate(task, a.candidate) for hw, a in pairs))
    rows += [evaluation_row(p.sweep_id, cell, task, replace(a, result=res), started, hw)
             for (hw, a), res in zip(pairs, extra)]
    writer.add(cell.cell_id, [generation_row(p.sweep_id, cell, a) for a in attempts], rows)


def _generator(cell: Cell, task: Task, backend: Backend, genlog: GenerationLog) -> Generate:
    """The cell's `generate`: the backend's answer, logged first (a resumed driver asks the log,
    not the model, for a call it made before it stopped)."""

    async def generate(prompt: Prompt, rnd: int, branch: int = 0) -> Generation:
        logged = genlog.lookup(cell.cell_id, rnd, branch)
        if logged is not None:
            return logged
        params = GenParams(temperature=cell.model.temperature, max_tokens=cell.model.max_tokens,
                           seed=int(stable_hash(cell.cell_id, rnd, branch, n=8), 16) % (2**31),
                           meta={"task_id": task.task_id, "sample": cell.sample, "round": rnd,
                                 "branch": branch, "method": cell.method.name})
        gen = await backend.generate(prompt.messages, params)
        genlog.append(cell.cell_id, rnd, branch, gen)
        return gen

    return generate


async def _drive(p: Sweep, sinks: FanOut) -> None:
    """The cells, beside a watch on the cluster (ray_session.watch): a lost GCS stops them with
    `ClusterLost` before Ray ends this process without a word."""
    async with evaluator_groups.started(p) as groups:
        run = asyncio.ensure_future(_run_cells(p, sinks, groups))
        watch = asyncio.ensure_future(ray_session.watch())
        try:
            await asyncio.wait({run, watch}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (run, watch):
                task.cancel()
            await asyncio.gather(run, watch, return_exceptions=True)
        if watch.done() and not watch.cancelled() and watch.exception() is not None:
            raise watch.exception()  # type: ignore[misc]
        run.result()


async def _run_cells(p: Sweep, sinks: FanOut, groups: dict[str, EvaluatorGroup]) -> None:
    """`engine.max_concurrency` workers take the cells one by one from the lazy iterator (driver
    memory does not grow with the grid); the first error stops them, keeping what is recorded."""
    eng = p.engine
    genlog = GenerationLog(p.sweep_dir, eng.wal_fsync)
    writer = CellWriter(sinks, genlog, eng.flush_every, eng.flush_s, eng.flush_min_s,
                        written_generations(p.sweep_dir, p.done))
    built = _Built()
    cells = p.todo()
    errors: list[BaseException] = []

    async def worker() -> None:
        for cell in cells:  # a shared iterator: each cell is taken by exactly one worker
            if errors:
                return
            try:
                await _run_cell(cell, p, built, groups, genlog, writer)
            except BaseException as e:  # noqa: BLE001 - stop cleanly, keep what is recorded
                errors.append(e)
                return

    async def report() -> None:
        while True:
            await asyncio.sleep(30)
            sinks.write_metrics(replica_gauges(list(built.backends.values())))
            evaluator_groups.tick(groups)

    reporter = asyncio.create_task(report())
    ticker = asyncio.create_task(flush_when_due(writer, max(0.5, eng.flush_s / 2), errors))
    try:
        n = evaluator_groups.cells_in_flight(eng, p.axes.models, groups)
        await asyncio.gather(*(worker() for _ in range(n)))
    finally:
        reporter.cancel()
        ticker.cancel()
        writer.flush()
        genlog.close()
        sinks.write_metrics(replica_gauges(list(built.backends.values())))
    if errors:
        raise errors[0]


def _wait_for_pools(p: Sweep) -> None:
    """Fail at start, naming the pool, unless the autoscaler brings it up within pool_wait_s.
    On a role cluster (cluster.yaml) a GPU pool is not waited for here: its pending evaluators
    and the sweep's resource request make the autoscaler start its nodes (EvaluatorGroup.start)."""
    deadline = time.monotonic() + p.engine.pool_wait_s
    roles = scaling.role_cluster()
    for pool in p.pools.values():
        if roles and pool.is_gpu:
            continue
        while not hardware.pool_available(pool):
            if time.monotonic() > deadline:
                raise ConfigError(hardware.unavailable_message(pool))
            log.info("waiting for the autoscaler to start a node for pool %s", pool.name)
            time.sleep(5)
    if not roles:
        _check_replicas(p.axes.models)


def _check_replicas(models: Sequence[ModelConfig]) -> None:
    """On a cluster without kbx-role labels (one machine; no autoscaler adds generation nodes) a
    vLLM replica that no node can hold would stay pending forever: stop now, in one line."""
    from kbx_ray.llm.base import replicas_of
    from kbx_ray.llm.vllm_spec import VLLMSpec, for_cluster, placement_hint

    for model in models:
        spec = replicas_of(model)
        if isinstance(spec, VLLMSpec):
            why = placement_hint(for_cluster(spec), autoscaled=False)
            if why:
                raise ConfigError(why)


def run_sweep(what: Config | Sweep) -> Sweep:
    """Plan (a config; a `Sweep` is already planned), start Ray, run every pending cell, and
    return the sweep (rows are on disk)."""
    import ray

    p = what if isinstance(what, Sweep) else resolve(what)
    log.info(describe(p))
    n_todo = p.n_todo
    if not n_todo:
        log.info("nothing to do: every cell of %s is already recorded in %s", p.sweep_id, p.sweep_dir)
        return p
    if not ray.is_initialized():
        ray.init(address=p.engine.ray_address, include_dashboard=False, configure_logging=False)
    _wait_for_pools(p)
    fresh = not p.sweep_dir.exists()
    p.sweep_dir.mkdir(parents=True, exist_ok=True)
    clean_tmp(p.sweep_dir)  # a killed run's torn parts; only this run writes here from now on
    sweep_folder.write_folder(p.identity, p.sweep_dir, p.force_resume)
    provenance.write_config(p.sweep_dir, p.config)
    record = provenance.RunRecord(p.sweep_dir, p.sweep_id)
    sinks = build_sinks(p.sweep_dir, p.sweep_id, p.sinks, extra=[record])
    sinks.start(n_todo, p.config)
    try:
        with ray_session.worker_output_to(p.sweep_dir / ray_session.LOG_FILE):
            asyncio.run(_drive(p, sinks))
        (p.sweep_dir / WAL_FILE).unlink(missing_ok=True)  # every cell it logged is in Parquet now
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
