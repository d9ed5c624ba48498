"""ReplicaGroup over real Ray actors: the cap per replica, least-in-flight routing, one retry when a
replica dies (and restarts by max_restarts), and the error when it stays dead."""
from __future__ import annotations

import asyncio
import os

import pytest
import ray

from kbx_ray.llm.replica_group import ReplicaGroup


@pytest.fixture(scope="module")
def local_ray():
    ray.init(address="local", num_cpus=2, include_dashboard=False, configure_logging=False)
    yield
    ray.shutdown()


@ray.remote(num_cpus=0)
class Worker:
    """Counts the calls it is running at once; `die_first` exits the process on the first call of
    its first incarnation, the way an engine crash takes a replica down."""

    def __init__(self, die_first: bool = False) -> None:
        self.now = self.peak = 0
        self.die = die_first and ray.get_runtime_context().was_current_actor_reconstructed is False

    async def work(self, delay: float) -> int:
        if self.die:
            os._exit(1)
        self.now += 1
        self.peak = max(self.peak, self.now)
        await asyncio.sleep(delay)
        self.now -= 1
        return os.getpid()

    async def stats(self) -> int:
        return self.peak


def run(coro):
    return asyncio.run(coro)


def started(*workers):
    """Wait until the actors are up: routing, not actor start-up, is what these tests time."""
    ray.get([w.__ray_ready__.remote() for w in workers], timeout=120)
    return list(workers)


def test_cap_holds_and_load_is_balanced(local_ray):
    group = ReplicaGroup(started(Worker.remote(), Worker.remote()), cap=3)

    async def main():
        return await asyncio.gather(*(group.call("work", 0.5) for _ in range(12)))

    pids = run(main())
    assert len(pids) == 12 and len(set(pids)) == 2
    # The first 6 calls fill both replicas to the cap; which replica frees a slot first (and so
    # takes the next call) is up to the scheduler, so the split of the rest is not asserted.
    assert group.peak == [3, 3] and sum(group.served) == 12 and min(group.served) >= 3
    assert group.inflight == [0, 0]
    assert run(group.broadcast("stats")) == [3, 3]  # the actors themselves never saw more than 3


def test_least_in_flight_prefers_the_idle_replica(local_ray):
    slow, fast = started(Worker.remote(), Worker.remote())
    group = ReplicaGroup([slow, fast], cap=100)

    async def main():
        hog = asyncio.ensure_future(group.call("work", 5.0))  # replica 0 is busy throughout
        while group.inflight[0] == 0:
            await asyncio.sleep(0.01)
        quick = [await group.call("work", 0.01) for _ in range(5)]  # one at a time
        assert not hog.done()
        await hog
        return quick

    pids = run(main())
    fast_pid = ray.get(fast.work.remote(0.0))
    assert set(pids) == {fast_pid} and group.served == [1, 5]


def test_a_dead_replica_is_retried_on_another(local_ray):
    group = ReplicaGroup([Worker.options(max_restarts=0).remote(die_first=True), Worker.remote()],
                         cap=4)
    pid = run(group.call("work", 0.0))
    assert pid == ray.get(group.replicas[1].work.remote(0.0)) and group.served == [0, 1]


def test_a_single_replica_is_retried_after_it_restarts(local_ray):
    actor = Worker.options(max_restarts=1).remote(die_first=True)
    group = ReplicaGroup([actor], cap=4)
    assert isinstance(run(group.call("work", 0.0)), int) and group.served == [1]


def test_a_replica_that_stays_dead_raises(local_ray):
    group = ReplicaGroup([Worker.options(max_restarts=0).remote(die_first=True)], cap=4)
    with pytest.raises(ray.exceptions.RayActorError):
        run(group.call("work", 0.0))
    assert group.inflight == [0]
