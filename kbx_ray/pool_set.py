"""Every pool one sweep evaluates on, started together and ended together.

One EvaluatorPool per hardware pool (pools.py). On a role cluster (cluster.yaml) the autoscaler is
asked for their nodes and for generation's first (scaling.py). With `engine.aot_compile` the CPU
compile pool (compile_pool.py) starts once the evaluators have their CPUs, and joins the GPU pools
when it is up (`always`: before the first cell).
"""
from __future__ import annotations

import asyncio
import logging
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator

from kbx_ray import scaling
from kbx_ray.config import Config
from kbx_ray.grid import models

log = logging.getLogger(__name__)


@asynccontextmanager
async def started(p: Any) -> AsyncIterator[dict[str, Any]]:
    """{pool name: its started EvaluatorPool} for the plan `p` (engine.SweepPlan), ended after."""
    from kbx_ray import pools as evaluator_pools  # looked up now: bench_scale.py swaps the class

    cfg = p.cfg
    pools = {name: evaluator_pools.EvaluatorPool(pool, cfg, p.n_todo)
             for name, pool in p.pools.items()}
    compiler, attach = None, None
    elastic = any(pool.elastic for pool in pools.values())
    if elastic:  # a role cluster: say what the sweep needs, so its nodes start
        scaling.request(sum((pool.demand for pool in pools.values() if pool.elastic),
                            scaling.generation_demand(models(cfg))))
    try:
        await asyncio.gather(*(pool.start() for pool in pools.values()))
        compiler = _compile_pool(cfg, p)
        if compiler is not None:  # after the evaluators have their CPUs; `on` does not wait
            attach = asyncio.ensure_future(_attach(compiler, pools, cfg.engine.actor_ready_s))
            if cfg.engine.aot_compile == "always":
                await attach
        yield pools
    finally:
        if attach is not None:
            attach.cancel()
        for pool in pools.values():
            pool.close()
        if compiler is not None:
            compiler.close()
        if elastic:
            scaling.release()


def _compile_pool(cfg: Config, p: Any) -> Any:
    if cfg.engine.aot_compile == "off" or cfg.engine.mode == "noop" or not any(
            pool.compute_capability for pool in p.pools.values()):
        return None
    from kbx_ray.compile_pool import CompilePool

    return CompilePool(cfg.engine.compile_workers, cfg.engine.compile_timeout_s,
                       cfg.engine.compile_resource, sandbox=cfg.evaluation.sandbox,
                       seed=cfg.evaluation.base_seed)


async def _attach(compiler: Any, pools: dict[str, Any], ready_s: float) -> None:
    await compiler.start(ready_s)
    if compiler.actors:
        for pool in pools.values():
            pool.compiler = compiler


def tick(pools: dict[str, Any]) -> None:
    """The periodic look at the pools: elastic ones grow onto nodes of their type beyond those
    asked for; each says its line (and the compile pool its own)."""
    for name, pool in pools.items():
        pool.grow()
        log.info(pool.stats.line(name, len(pool.actors)))
    compiler = next((pool.compiler for pool in pools.values() if pool.compiler), None)
    if compiler is not None:
        log.info(compiler.line())


def cells_in_flight(cfg: Config, pools: dict[str, Any]) -> int:
    """engine.max_concurrency, or (0) enough to keep every evaluator and vllm replica fed."""
    evaluators = sum(len(pool.actors) for pool in pools.values())
    n = scaling.concurrency(cfg, evaluators, scaling.replica_slots(models(cfg)))
    if cfg.engine.max_concurrency <= 0:
        log.info("%d cells in flight (engine.max_concurrency=0: from %d evaluators)", n, evaluators)
    return max(1, n)
