"""The `vllm` backend: N Ray actor replicas, each an async actor around one vLLM AsyncLLM engine.
More: kbx_ray/llm/README.md, `vllm_actor.py`.
"""
from __future__ import annotations

import asyncio
import atexit
import logging
import re
import time

from kbx_ray.config.structured import ModelConfig
from kbx_ray.llm.base import GenParams, Messages
from kbx_ray.registry import register
from kbx_ray.llm.errors import BackendError
from kbx_ray.llm.replica_group import ReplicaGroup
from kbx_ray.llm.vllm_replica import VLLMReplica
from kbx_ray.llm import vllm_spec
from kbx_ray.llm.vllm_options import VLLMOptions
from kbx_ray.llm.vllm_spec import VLLMSpec, actor_options, for_cluster, placement_hint, spec_from
from kbx_ray.types import Generation

log = logging.getLogger(__name__)


def _free_resources() -> str:
    import ray

    free = ray.available_resources()
    return ", ".join(f"{k}={v:g}" for k, v in sorted(free.items())
                     if k in ("CPU", "GPU", "gen") or k.startswith("accelerator_type")) or "nothing"


def root_cause(err: BaseException) -> str:
    """The last `SomeError: message` line of a Ray error's embedded traceback."""
    lines = [ln.strip() for ln in str(err).splitlines() if ln.strip()]
    causes = [ln for ln in lines if re.match(r"^[\w.]*(Error|Exception|Exit)\b.*:", ln)]
    return (causes or lines or [type(err).__name__])[-1][:300]


class VLLMBackend:
    name = "vllm"

    def __init__(self, spec: VLLMSpec) -> None:
        import ray

        self.spec = spec
        hint = placement_hint(spec)
        if hint:
            log.warning(hint)
        remote = ray.remote(VLLMReplica)
        self.actors, self.groups = [], []
        for _ in range(spec.replicas):
            opts = actor_options(spec)
            if "scheduling_strategy" in opts:
                self.groups.append(opts["scheduling_strategy"].placement_group)
            self.actors.append(remote.options(**opts).remote(spec.engine, spec.name, spec.sampling))
        self.replicas = ReplicaGroup(self.actors, spec.max_inflight)
        self.info: list[dict] | None = None
        self._starting: dict[int, asyncio.Future] = {}

    async def wait_ready(self) -> list[dict]:
        """Block until every replica's engine is up (one check per event loop, shared by every
        waiting request); a failed start is one line."""
        if self.info is not None:
            return self.info
        loop = asyncio.get_running_loop()
        if id(loop) not in self._starting:
            self._starting = {id(loop): asyncio.ensure_future(self._start())}
        return await self._starting[id(loop)]

    async def _start(self) -> list[dict]:
        import ray

        ready = asyncio.ensure_future(self.replicas.broadcast("ready"))
        t0 = time.monotonic()
        try:
            while not ready.done():
                left = self.spec.startup_timeout_s - (time.monotonic() - t0)
                if left <= 0:
                    ready.cancel()
                    raise BackendError(
                        f"vllm replicas of {self.spec.name} did not start within "
                        f"{self.spec.startup_timeout_s:g} s: "
                        f"{placement_hint(self.spec) or 'check the replica logs'}")
                await asyncio.wait({ready}, timeout=min(60.0, left))
                if not ready.done():
                    log.warning("still waiting for %d vllm replica(s) of %s after %.0f s; free in "
                                "the cluster: %s", len(self.actors), self.spec.name,
                                time.monotonic() - t0, _free_resources())
            self.info = ready.result()
        except ray.exceptions.RayError as e:
            self._forget()  # a later build starts fresh replicas
            raise BackendError(f"vLLM engine for {self.spec.name} failed to start: {root_cause(e)}"
                               ": fix model.path / model.options.engine") from None
        log.info("vllm %s: %d replica(s) ready in %.0f s, at most %d requests in flight each",
                 self.spec.name, len(self.info), time.monotonic() - t0, self.spec.max_inflight)
        return self.info

    async def generate(self, messages: Messages, params: GenParams) -> Generation:
        import ray

        await self.wait_ready()
        try:
            return await self.replicas.call("generate", messages, params)
        except ray.exceptions.RayTaskError as e:
            raise BackendError(f"vllm replica of {self.spec.name} failed a request: "
                               f"{root_cause(e)}") from None
        except ray.exceptions.RayActorError as e:
            # Ray restarts a dead replica (max_restarts) and the group retries the request once on
            # it; this one died again or for good. Drop it: a resumed sweep starts fresh replicas.
            self._forget()
            why = (str(e).strip().splitlines() or [type(e).__name__])[0][:160].rstrip(".")
            raise BackendError(
                f"vllm replica of {self.spec.name} died and its request failed again after a "
                f"retry ({why}; model.options.max_restarts={self.spec.max_restarts}): its log is "
                "under /tmp/ray/session_latest/logs; run the sweep again to resume (logged "
                "generations are not asked for again)") from None

    def close(self, timeout_s: float = 10.0) -> None:
        """Shut the engines down, then end the replicas and their placement groups. Never blocks
        for long: it runs on Ctrl-C and at exit, and a replica still pending (never placed, or
        loading) holds its shutdown call until it starts, so one not known to be up gets 2 s."""
        import ray

        try:
            ray.get([a.shutdown.remote() for a in self.actors],
                    timeout=timeout_s if self.info is not None else 2.0)
        except Exception as e:  # noqa: BLE001 - a dead, hung or pending replica is killed below
            log.log(logging.WARNING if self.info is not None else logging.DEBUG,
                    "vllm %s: a replica did not shut down cleanly: %s", self.spec.name,
                    root_cause(e))
        for a in self.actors:
            try:
                ray.kill(a)
            except ray.exceptions.RayError:  # already dead for good: Ray may have dropped it
                pass
        for pg in self.groups:
            ray.util.remove_placement_group(pg)
        self._forget()

    def _forget(self) -> None:
        """Leave the cache of live engines (if this is still the one cached for its spec)."""
        key = _live_key(self.spec)
        if _LIVE.get(key) is self:
            del _LIVE[key]


_LIVE: dict[str, VLLMBackend] = {}  # engines already up in this Ray session, by spec


def _close_all() -> None:
    """At driver exit, stop every engine this driver started. Registered by `build` after ray is
    imported, so it runs before Ray's own exit handler (atexit runs the last registered first)."""
    import ray

    if ray.is_initialized():
        for backend in list(_LIVE.values()):
            backend.close()


def _live_key(spec: VLLMSpec) -> str:
    import ray

    return f"{ray.get_runtime_context().get_job_id()}-{spec.key()}"


@register("backend", "vllm", check=vllm_spec.check, gpus=vllm_spec.spec_from,
          options=VLLMOptions)
def build(cfg: ModelConfig) -> VLLMBackend:
    """Replicas for this model config; a driver that builds the same config again (a resumed or
    repeated sweep in one process) reuses the engines already loaded instead of reloading them."""
    import ray

    spec = spec_from(cfg)
    if not ray.is_initialized():
        ray.init(include_dashboard=False, configure_logging=False)
    spec = for_cluster(spec)
    key = _live_key(spec)
    if key not in _LIVE:
        if not _LIVE:
            atexit.unregister(_close_all)
            atexit.register(_close_all)
        _LIVE[key] = VLLMBackend(spec)
    return _LIVE[key]
