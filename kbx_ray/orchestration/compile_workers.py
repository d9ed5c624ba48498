"""The optional CPU compile workers (`engine.aot_compile=on|always`): Triton kernels compiled ahead.
More: kbx_ray/orchestration/README.md, `compile_workers.py`.
"""
from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from typing import Any

from kbx_ray.orchestration.actor_group import ActorGroup
from kbx_ray.evaluate.parent.aot import AotResult
from kbx_ray.evaluate.settings import SandboxConfig
from kbx_ray.orchestration.per_loop import PerLoop
from kbx_ray.types import Candidate, Task

log = logging.getLogger(__name__)


def _actor_class() -> Any:
    import ray

    @ray.remote(num_cpus=1, max_restarts=-1)
    class CompileActor:
        def where(self) -> str:
            return ray.get_runtime_context().get_node_id()

        def compile(self, task: Task, cand: Candidate, arch: int, timeout_s: float,
                    sandbox: SandboxConfig | None = None, seed: int = 0) -> AotResult:
            from kbx_ray.evaluate.parent.aot import compile_candidate

            return compile_candidate(task, cand, arch, timeout_s, cfg=sandbox, seed=seed)

    return CompileActor


def compile_resources(name: str = "") -> dict[str, float]:
    """{name: 1} if named (an autoscaler starts nodes for it); else {"compile": 1} where the
    cluster has compile nodes now or is laid out like cluster.yaml (kbx-role labels: its compile
    nodes start at zero, and the pending actors make the autoscaler start them; any CPU would put
    the compiles on the driver's head node), and nothing (any CPU will do) elsewhere."""
    import ray

    from kbx_ray.orchestration.scaling import role_cluster

    if name:
        return {name: 1}
    has = ray.cluster_resources().get("compile", 0) >= 1
    return {"compile": 1} if has or role_cluster() else {}


class CompileWorkers:
    def __init__(self, workers: int, timeout_s: float, resource: str = "",
                 sandbox: SandboxConfig | None = None, seed: int = 0) -> None:
        cls = _actor_class().options(resources=compile_resources(resource))
        # one compile at a time per actor; a lost one is logged (the GPU compiles), not retried
        self.group = ActorGroup([cls.remote() for _ in range(max(1, workers))], ready="where",
                                name="compile actor")
        self.timeout_s, self.sandbox, self.seed = timeout_s, sandbox, seed
        # per event loop: recent compiles, kept for the other hardware pools of one architecture
        self._done: PerLoop[OrderedDict[tuple[str, int], asyncio.Future]] = PerLoop(OrderedDict)
        self.keep = 16
        self.compiled = self.failed = self.skipped = 0
        self.nodes: set[str] = set()  # where the actors run

    @property
    def actors(self) -> list[Any]:
        return self.group.handles

    async def start(self, ready_s: float) -> None:
        """Keep the actors that came up within `ready_s`; with none, the workers stand aside (the
        GPUs compile, as without it) instead of holding every candidate back."""
        where = await self.group.start(ready_s)
        self.group.shrink([a for a, w in where.items() if not isinstance(w, str)])
        self.nodes = {w for w in where.values() if isinstance(w, str)}
        if not self.actors:
            log.warning("no compile actor started within %g s (no free CPU with the `compile` "
                        "resource, or none at all): the GPU evaluators compile as usual", ready_s)

    def start_compile(self, task: Task, cand: Candidate, arch: int) -> asyncio.Future | None:
        """`engine.aot_compile=on`: the compile, started in the background if a worker is free
        (else None: the GPU compiles). The caller queues the candidate at once and uses the result
        only if it is there when an evaluator takes the candidate, so the GPUs never wait for it."""
        if not self._usable(cand, arch):
            return None
        key = _key(task, cand, arch)
        done = self._done.get()
        if key in done:
            return done[key]
        if not self.group.has_room():
            self.skipped += 1
            return None
        return asyncio.ensure_future(self.compile(task, cand, arch))

    def _usable(self, cand: Candidate, arch: int) -> bool:
        return bool(cand.code) and not cand.error_kind and arch > 0 and bool(self.actors)

    async def compile(self, task: Task, cand: Candidate, arch: int) -> AotResult | None:
        """The candidate's kernels for sm_`arch`, once per (candidate, arch), waiting for a free
        worker (`engine.aot_compile=always`); None if the compile failed."""
        if not self._usable(cand, arch):
            return None
        done, key = self._done.get(), _key(task, cand, arch)
        if key in done:
            return await asyncio.shield(done[key])
        fut = done[key] = asyncio.get_running_loop().create_future()
        while len(done) > self.keep:
            done.popitem(last=False)
        res: AotResult | None = None
        try:
            res = await self.group.call("compile", task, cand, arch, self.timeout_s, self.sandbox,
                                       self.seed, attempts=1, timeout_s=self.timeout_s + 60)
        except Exception as e:  # noqa: BLE001 - the GPU compiles instead
            log.warning("ahead-of-time compile of %s for sm_%d failed (%s); the GPU will "
                        "compile it", task.task_id, arch,
                        str(e).splitlines()[0] if str(e) else type(e).__name__)
        finally:  # cancelled or not, whoever shares this compile gets an answer
            if not fut.done():
                fut.set_result(res)
            if res is None:
                done.pop(key, None)
        if res is not None and res.error:
            log.info("ahead-of-time compile of %s for sm_%d: %s", task.task_id, arch, res.error)
        self.compiled += res is not None and res.kernels > 0
        self.failed += res is None or not res.kernels
        return res

    def line(self) -> str:
        return (f"compile workers: {len(self.actors)} up on {len(self.nodes)} node(s), "
                f"{self.compiled} candidates compiled ahead, {self.failed} without kernels, "
                f"{self.skipped} left to the GPU (no worker free)")

    def close(self) -> None:
        self.group.close()


def _key(task: Task, cand: Candidate, arch: int) -> tuple[str, int]:
    return f"{task.task_hash}:{cand.candidate_id}", arch


def ready_result(aot: Any) -> AotResult | None:
    """What an evaluator takes with the candidate: the result if it is there now, else None."""
    if isinstance(aot, asyncio.Future):
        if not aot.done() or aot.cancelled() or aot.exception() is not None:
            return None
        return aot.result()
    return aot
