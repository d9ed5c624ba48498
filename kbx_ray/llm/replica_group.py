"""Driver-side load balancing over Ray actor replicas: least requests in flight, capped per replica.

Every prompt of a round is submitted at once. The cap (about 1.1 x the engine's max_num_seqs) keeps
each engine's batch full with a small queue behind it, instead of piling thousands of requests onto
one replica while another idles. A call that meets a dead actor (RayActorError; the actor restarts
by its `max_restarts`) is retried once: on another replica when there is one, else on the same one
once it has restarted (kbx_ray/orchestration/actor_group.py does the routing and the retry).
"""
from __future__ import annotations

import time
from typing import Any

from kbx_ray.orchestration.actor_group import ActorGroup, Member, Revival
from kbx_ray.orchestration.retry import Backoff


class ReplicaTally:
    """Tokens, latency and truncations of the generations one replica returned."""

    def __init__(self) -> None:
        self.calls = self.tokens = self.truncated = 0
        self.latency_s = 0.0
        self.since = time.monotonic()

    def add(self, out: Any) -> None:
        for g in out if isinstance(out, list) else [out]:
            if hasattr(g, "completion_tokens") and hasattr(g, "latency_s"):
                self.calls += 1
                self.tokens += int(g.completion_tokens or 0)
                self.latency_s += float(g.latency_s or 0.0)
                self.truncated += getattr(g, "finish_reason", "") == "length"

    def metrics(self) -> dict[str, float]:
        if not self.calls:
            return {}
        return {"completion_tokens": float(self.tokens),
                "mean_latency_s": self.latency_s / self.calls,
                "truncation_rate": self.truncated / self.calls,
                "tokens_per_s": self.tokens / max(time.monotonic() - self.since, 1e-9)}


def _per_replica(name: str, doc: str) -> property:
    """One value per replica, kept on the group's members (a test sets them, as a run would)."""

    def get(self: ActorGroup) -> list[int]:
        return [getattr(m, name) for m in self.members]

    def put(self: ActorGroup, values: list[int]) -> None:
        for m, v in zip(self.members, values):
            setattr(m, name, v)

    return property(get, put, doc=doc)


class ReplicaGroup(ActorGroup):
    inflight = _per_replica("inflight", "Requests on each replica now.")
    peak = _per_replica("peak", "The most requests in flight seen per replica.")
    served = _per_replica("served", "Calls completed per replica.")

    def __init__(self, replicas: list[Any], cap: int, restart_timeout_s: float = 3600.0) -> None:
        """`restart_timeout_s`: how long a retry waits for a dead replica's restart."""
        if not replicas or cap < 1:
            raise ValueError("a replica group needs at least one replica and a cap of at least 1")
        super().__init__(replicas, cap=cap, owned=False, name="replica", revival=Revival(
            timeout_s=restart_timeout_s, final_death=True,
            backoff=Backoff(first_s=0.1, max_s=10.0, jitter=0.0)))
        self.gen = [ReplicaTally() for _ in replicas]  # what each replica generated

    @property
    def replicas(self) -> list[Any]:
        return self.handles

    def served_one(self, m: Member, out: Any) -> None:
        self.gen[self.members.index(m)].add(out)
