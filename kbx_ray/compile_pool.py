"""The optional CPU compile pool (`engine.aot_compile=on|always`): Triton kernels compiled ahead.

Compile actors run on CPU nodes (those advertising the `compile` resource, as cluster.yaml's
`compile.*` node type does; any CPU otherwise). Before a candidate joins a GPU pool's queue, the
pool asks for its kernels compiled for that pool's architecture (`compute_capability` in
conf/hardware); the files ride with the candidate to the evaluator, which seeds its worker's Triton
cache with them (evaluate/aot.py). Compiles for one (candidate, architecture) are shared by every
pool of that architecture (H100 and H200 are both sm_90). A failed or slow compile only means the
GPU compiles as it always did: it is logged, never recorded as the candidate's fault.

`on` asks only for candidates that would queue for an evaluator anyway, and only while a compile
worker is free, so compile nodes short of CPUs never hold the GPUs back; `always` waits for one.
"""
from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from typing import Any

from kbx_ray.evaluate.aot import AotResult
from kbx_ray.types import Candidate, Task

log = logging.getLogger(__name__)


def _actor_class() -> Any:
    import ray

    @ray.remote(num_cpus=1, max_restarts=-1)
    class CompileActor:
        def where(self) -> str:
            return ray.get_runtime_context().get_node_id()

        def compile(self, task: Task, cand: Candidate, arch: int, timeout_s: float) -> AotResult:
            from kbx_ray.evaluate.aot import compile_candidate

            return compile_candidate(task, cand, arch, timeout_s)

    return CompileActor


def compile_resources(name: str = "") -> dict[str, float]:
    """{name: 1} if named (an autoscaler starts nodes for it); else {"compile": 1} where the
    cluster has compile nodes now, and nothing (any CPU will do) where it has none."""
    import ray

    if name:
        return {name: 1}
    return {"compile": 1} if ray.cluster_resources().get("compile", 0) >= 1 else {}


class CompilePool:
    def __init__(self, workers: int, timeout_s: float, resource: str = "") -> None:
        cls = _actor_class().options(resources=compile_resources(resource))
        self.actors = [cls.remote() for _ in range(max(1, workers))]
        self.timeout_s = timeout_s
        self._free: asyncio.Queue | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._done: OrderedDict[tuple[str, int], asyncio.Future] = OrderedDict()
        self.keep = 64  # recent compiles kept for the other pools of the same architecture
        self.compiled = self.failed = self.skipped = 0
        self.nodes: set[str] = set()  # where the actors run

    async def start(self, ready_s: float) -> None:
        """Keep the actors that came up within `ready_s`; with none, the pool stands aside (the
        GPUs compile, as without it) instead of holding every candidate back."""
        import ray

        pending = {a.where.remote(): a for a in self.actors}
        ready, _ = await asyncio.to_thread(ray.wait, list(pending), num_returns=len(pending),
                                           timeout=ready_s)
        up = [pending[r] for r in ready]
        self.nodes = set(await asyncio.gather(*ready))
        for a in self.actors:
            if a not in up:
                ray.kill(a, no_restart=True)
        if not up:
            log.warning("no compile actor started within %g s (no free CPU with the `compile` "
                        "resource, or none at all): the GPU evaluators compile as usual", ready_s)
        self.actors = up
        self._loop = None

    def _queue(self) -> asyncio.Queue:
        loop = asyncio.get_running_loop()
        if self._loop is not loop:  # the engine runs each sweep in a fresh event loop
            self._loop, self._free, self._done = loop, asyncio.Queue(), OrderedDict()
            for a in self.actors:
                self._free.put_nowait(a)
        assert self._free is not None
        return self._free

    async def compile(self, task: Task, cand: Candidate, arch: int,
                      wait: bool = True) -> AotResult | None:
        """The candidate's kernels for sm_`arch`, once per (candidate, arch); None if it failed,
        or (`wait=False`) if no compile worker is free now: then the GPU compiles, as it would."""
        if not cand.code or cand.error_kind or arch <= 0 or not self.actors:
            return None
        free = self._queue()
        key = (f"{task.task_hash}:{cand.candidate_id}", arch)
        if key in self._done:
            return await asyncio.shield(self._done[key])
        if not wait and free.empty():
            self.skipped += 1
            return None
        fut = self._done[key] = asyncio.get_running_loop().create_future()
        while len(self._done) > self.keep:
            self._done.popitem(last=False)
        actor = await free.get()
        try:
            res: AotResult | None = await asyncio.wait_for(
                actor.compile.remote(task, cand, arch, self.timeout_s), self.timeout_s + 60)
        except Exception as e:  # noqa: BLE001 - the GPU compiles instead
            log.warning("ahead-of-time compile of %s for sm_%d failed (%s); the GPU will compile "
                        "it", task.task_id, arch, str(e).splitlines()[0] if str(e) else type(e))
            res = None
        finally:
            free.put_nowait(actor)
        if res is not None and res.error:
            log.info("ahead-of-time compile of %s for sm_%d: %s", task.task_id, arch, res.error)
        self.compiled += res is not None and res.kernels > 0
        self.failed += res is None or not res.kernels
        fut.set_result(res)
        return res

    def line(self) -> str:
        return (f"compile pool: {len(self.actors)} workers on {len(self.nodes)} node(s), "
                f"{self.compiled} candidates compiled ahead, {self.failed} without kernels, "
                f"{self.skipped} left to the GPU (no worker free)")

    def close(self) -> None:
        import ray

        for a in self.actors:
            ray.kill(a)
