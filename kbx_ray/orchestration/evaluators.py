"""Every evaluator group one sweep evaluates on, started together and ended together.

One EvaluatorGroup per hardware pool (evaluator_group.py). On a role cluster (cluster.yaml) the
autoscaler is asked for their nodes and for generation's first (scaling.py). With
`engine.aot_compile` the CPU compile workers (compile_workers.py) start once the evaluators have
their CPUs, and join the GPU pools' groups when they are up (`always`: before the first cell).
"""
from __future__ import annotations

import asyncio
import logging
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, AsyncIterator, Sequence

from kbx_ray.orchestration import scaling
from kbx_ray.config.structured import EngineConfig, ModelConfig
from kbx_ray.evaluate.settings import EvalConfig
from kbx_ray.config.hardware import HardwarePool

if TYPE_CHECKING:  # imported when a sweep starts: the sandbox and the static checks come with them
    from kbx_ray.orchestration.compile_workers import CompileWorkers
    from kbx_ray.orchestration.evaluator_group import EvaluatorGroup
    from kbx_ray.config.plan import Sweep

log = logging.getLogger(__name__)


@asynccontextmanager
async def started(p: Sweep) -> AsyncIterator[dict[str, EvaluatorGroup]]:
    """{pool name: its started EvaluatorGroup} for the sweep `p`, ended after."""
    from kbx_ray.orchestration import evaluator_group  # looked up now: bench_scale swaps the class

    groups = {name: evaluator_group.EvaluatorGroup(pool, p.engine, p.evaluation, p.n_todo,
                                                   models=p.axes.models)
              for name, pool in p.pools.items()}
    compiler, attach = None, None
    elastic = any(g.elastic for g in groups.values())
    if elastic:  # a role cluster: say what the sweep needs, so its nodes start
        scaling.request(sum((g.demand for g in groups.values() if g.elastic),
                            scaling.generation_demand(p.axes.models)))
    try:
        await asyncio.gather(*(g.start() for g in groups.values()))
        compiler = _compile_workers(p.engine, p.evaluation, list(p.pools.values()))
        if compiler is not None:  # after the evaluators have their CPUs; `on` does not wait
            attach = asyncio.ensure_future(_attach(compiler, groups, p.engine.actor_ready_s))
            if p.engine.aot_compile == "always":
                await attach
        yield groups
    finally:
        if attach is not None:
            attach.cancel()
        for g in groups.values():
            g.close()
        if compiler is not None:
            compiler.close()
        if elastic:
            scaling.release()


def _compile_workers(engine: EngineConfig, evaluation: EvalConfig,
                     pools: list[HardwarePool]) -> CompileWorkers | None:
    if engine.aot_compile == "off" or engine.mode == "noop" or not any(
            pool.compute_capability for pool in pools):
        return None
    from kbx_ray.orchestration.compile_workers import CompileWorkers

    return CompileWorkers(engine.compile_workers, engine.compile_timeout_s,
                          engine.compile_resource, sandbox=evaluation.sandbox,
                          seed=evaluation.base_seed)


async def _attach(compiler: CompileWorkers, groups: dict[str, EvaluatorGroup],
                  ready_s: float) -> None:
    await compiler.start(ready_s)
    if compiler.actors:
        for g in groups.values():
            g.compiler = compiler


def tick(groups: dict[str, EvaluatorGroup]) -> None:
    """The periodic look at the groups: elastic ones grow onto nodes of their pool beyond those
    asked for; each says its line (and the compile workers theirs)."""
    for name, g in groups.items():
        g.grow()
        log.info(g.stats.line(name, len(g.actors)))
    compiler = next((g.compiler for g in groups.values() if g.compiler), None)
    if compiler is not None:
        log.info(compiler.line())


def cells_in_flight(engine: EngineConfig, models: Sequence[ModelConfig],
                    groups: dict[str, EvaluatorGroup]) -> int:
    """engine.max_concurrency, or (0) enough to keep every evaluator and vllm replica fed."""
    evaluators = sum(len(g.actors) for g in groups.values())
    n = scaling.concurrency(engine, evaluators, scaling.replica_slots(models))
    if engine.max_concurrency <= 0:
        log.info("%d cells in flight (engine.max_concurrency=0: from %d evaluators)", n, evaluators)
    return max(1, n)
