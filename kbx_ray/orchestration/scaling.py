"""What a sweep needs from the cluster -> autoscaler requests, evaluator targets and concurrency.
More: kbx_ray/orchestration/README.md, `scaling.py`.
"""
from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Any, Sequence

from kbx_ray.config import hardware
from kbx_ray.config.structured import EngineConfig, ModelConfig
from kbx_ray.errors import ConfigError
from kbx_ray.llm.base import generation_gpus, replicas_of

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Demand:
    """Resource shapes the autoscaler is asked to fit, each with its label selector."""
    bundles: list[dict[str, float]]
    selectors: list[dict[str, str]]

    def __add__(self, other: "Demand") -> "Demand":
        return Demand(self.bundles + other.bundles, self.selectors + other.selectors)

    def summary(self) -> str:
        counts: dict[str, int] = {}
        for b, sel in zip(self.bundles, self.selectors):
            key = ", ".join([f"{k}={v:g}" for k, v in sorted(b.items())] +
                            [f"{k}={v}" for k, v in sorted(sel.items())])
            counts[key] = counts.get(key, 0) + 1
        return "; ".join(f"{n} x {{{k}}}" for k, n in counts.items()) or "nothing"


def role_cluster() -> bool:
    """Whether the connected cluster carries kbx-role labels (cluster.yaml), not one machine."""
    from kbx_ray.llm.vllm_spec import has_roles

    return has_roles()


def evaluator_target(engine: EngineConfig, live_slots: int, n_todo: int) -> int:
    """Evaluators a pool asks for on a role cluster: `engine.evaluators` if set; else what the
    live nodes hold, or up to `engine.max_evaluators` while the cluster is still scaling up, but
    never more than there are cells to run (each cell is one evaluation at a time per pool)."""
    if engine.evaluators > 0:
        return engine.evaluators
    wanted = min(max(1, engine.max_evaluators), max(1, n_todo))
    return max(live_slots, wanted)


def evaluator_demand(opts: dict[str, Any], n: int) -> Demand:
    """One bundle per evaluator, shaped like its actor options (hardware.ray_options)."""
    bundle: dict[str, float] = {"CPU": float(opts.get("num_cpus", 1))}
    if opts.get("num_gpus"):
        bundle["GPU"] = float(opts["num_gpus"])
    bundle.update({k: float(v) for k, v in (opts.get("resources") or {}).items()})
    if opts.get("accelerator_type"):
        bundle[f"accelerator_type:{opts['accelerator_type']}"] = 0.001
    selector = dict(opts.get("label_selector") or {})
    return Demand([dict(bundle) for _ in range(n)], [dict(selector) for _ in range(n)])


def generation_demand(models: Sequence[ModelConfig]) -> Demand:
    """One bundle per GPU of every replica of a backend that places replicas on the cluster
    (registered `gpus=`: vllm; per replica where they hold no GPU), with the preset's `gen`
    resource and labels."""
    out = Demand([], [])
    for m in models:
        spec = replicas_of(m)
        if spec is None:
            continue
        per = max(spec.gpus_per_replica, 1)
        bundle = {"CPU": 1.0, **spec.resources}
        if spec.gpus_per_replica:
            bundle["GPU"] = 1.0
        if spec.accelerator_type and spec.gpus_per_replica:
            bundle[f"accelerator_type:{spec.accelerator_type}"] = 0.001
        n, labels = spec.replicas * per, spec.labels
        out = out + Demand([dict(bundle) for _ in range(n)], [dict(labels) for _ in range(n)])
    return out


def request(demand: Demand) -> None:
    """Ask the autoscaler to fit `demand` (replacing any earlier request of this cluster)."""
    from ray.autoscaler.sdk import request_resources

    request_resources(bundles=demand.bundles, bundle_label_selectors=demand.selectors)
    log.info("asked the autoscaler for %s", demand.summary())


def release() -> None:
    """Withdraw the standing request, so idle nodes can scale down after the sweep."""
    from ray.autoscaler.sdk import request_resources

    try:
        request_resources(bundles=[])
    except Exception as e:  # noqa: BLE001 - the sweep is over; a lost connection is not an error
        log.debug("autoscaler request not withdrawn: %s", e)


def concurrency(engine: EngineConfig, evaluators: int, replica_slots: int) -> int:
    """Cells in flight: `engine.max_concurrency` if set; else enough to keep every evaluator fed
    with one cell queued behind each (1.5x), plus what the vllm replicas batch at once, and at
    least 64 (a laptop's default)."""
    if engine.max_concurrency > 0:
        return engine.max_concurrency
    return max(64, math.ceil(1.5 * evaluators) + replica_slots)


def replica_slots(models: Sequence[ModelConfig]) -> int:
    """Requests the replicas of the sweep's GPU-holding backends (registered `gpus=`; vllm's:
    each ~1.1 x max_num_seqs) take at once."""
    specs = [replicas_of(m) for m in models]
    return sum(s.max_inflight * s.replicas for s in specs if s is not None)


def generation_reserve(pool: hardware.HardwarePool, models: Sequence[ModelConfig]) -> int:
    """GPUs of the pool's type that the sweep's vLLM replicas will hold beside its evaluators.

    On a cluster laid out like cluster.yaml (kbx-role labels) generation has nodes of its own and
    nothing is reserved. On one machine started by `ray.init()` the replicas and the evaluators
    share its GPUs, and evaluators that took them all would leave the replicas pending forever.
    """
    if not pool.is_gpu:
        return 0
    from kbx_ray.llm.vllm_spec import has_roles

    if has_roles():
        return 0
    return sum(generation_gpus(m, pool.accelerator_type) for m in models)


def pool_gpus(pool: hardware.HardwarePool) -> float:
    """GPUs of the pool's type on the live nodes of the cluster."""
    import ray

    key = f"accelerator_type:{pool.accelerator_type}" if pool.accelerator_type else None
    return sum(n.get("Resources", {}).get("GPU", 0) for n in ray.nodes()
               if n.get("Alive") and (key is None or key in n.get("Resources", {}))
               and all(k in n.get("Resources", {}) for k in pool.resources)
               and hardware.selector_matches(pool.labels, n.get("Labels") or {}))


def actors_for(pool: hardware.HardwarePool, requested: int, reserved: int = 0,
               per_gpu: int = 1) -> int:
    """One evaluator per GPU of the pool's type in the cluster (`per_gpu` of them with
    `engine.evaluators_per_gpu`), less the `reserved` GPUs that generation holds there (or
    `engine.evaluators` if set)."""
    import ray

    if not pool.is_gpu:
        return requested or max(1, min(4, int(ray.cluster_resources().get("CPU", 1)) // 2))
    gpus, per = pool_gpus(pool), max(pool.num_gpus_per_actor, 1)
    if reserved and gpus and gpus - reserved < per:  # gpus == 0: the autoscaler may add some
        raise ConfigError(
            f"pool {pool.name!r} has no GPU left for evaluators: the cluster has {gpus:g} and "
            f"the sweep's vLLM replicas need {reserved} of them: add a GPU, or serve the model "
            "elsewhere (model=openai, or a cluster with generation nodes: cluster.yaml)")
    if requested > 0:
        if reserved and requested * per > gpus - reserved:
            log.warning("pool %s: engine.evaluators=%d leaves fewer than the %d GPU(s) the vLLM "
                        "replicas need; they will wait for them", pool.name, requested, reserved)
        return requested
    return max(1, int((gpus - reserved) // per)) * max(1, per_gpu)
