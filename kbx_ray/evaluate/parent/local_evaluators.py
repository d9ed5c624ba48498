"""Several warm evaluators on one machine without Ray: the oracle runs and the benchmarks.

`LocalEvaluators(cfg, jobs)` starts `jobs` processes, each holding an `Evaluator` (and its sandbox
worker), and waits until every one is warm; `map(pairs)` then yields `(index, EvalResult)` as
results arrive. On a GPU the evaluators share it: they compile and check in parallel, and timing
takes the GPU alone (gpulock.py), so the figures are those of a serial run.
"""
from __future__ import annotations

import multiprocessing as mp
import queue
from typing import Any, Iterable, Iterator

from kbx_ray.evaluate.settings import EvalConfig
from kbx_ray.types import Candidate, EvalResult, Task


def _serve(cfg: EvalConfig, todo: Any, done: Any, cache_mb: int, profile_dir: str) -> None:
    from kbx_ray.evaluate.parent.evaluator import Evaluator

    ev = Evaluator(cfg)
    if cache_mb:
        ev.inputs.max_bytes = cache_mb << 20
    try:
        ev.sandbox.request({"op": "hello"}, 300)
        if ev.replay.on:  # the replay process too: its start is not the first candidate's wait
            ev.replay.sandbox.request({"op": "hello"}, 300)
        done.put(("ready", -1, dict(ev.sandbox.info, device=ev.device)))
        while (item := todo.get()) is not None:
            i, task, cand, cold = item
            if cold:  # as if this evaluator had never seen the task
                ev.refs.times.clear(), ev.refs.clear_seeded(), ev.inputs.clear()
            done.put(("result", i, _evaluate(ev, task, cand, profile_dir)))
    finally:
        ev.close()


def _evaluate(ev: Any, task: Task, cand: Candidate, profile_dir: str) -> EvalResult:
    """One evaluation; with `profile_dir`, under cProfile, its stats written there per task."""
    if not profile_dir:
        return ev.evaluate(task, cand)
    import cProfile
    import os

    prof = cProfile.Profile()
    try:
        return prof.runcall(ev.evaluate, task, cand)
    finally:
        name = f"{task.task_id.replace('/', '__')}.{os.getpid()}.prof"
        prof.dump_stats(os.path.join(profile_dir, name))


class LocalEvaluators:
    """`profile_dir`: each evaluation's cProfile stats (this side of the worker) written there."""

    def __init__(self, cfg: EvalConfig, jobs: int = 1, cache_mb: int = 0,
                 ready_s: float = 600.0, profile_dir: str = "") -> None:
        ctx = mp.get_context("spawn")
        self.todo, self.done = ctx.Queue(), ctx.Queue()
        self.procs = [ctx.Process(target=_serve,
                                  args=(cfg, self.todo, self.done, cache_mb, profile_dir),
                                  daemon=True) for _ in range(max(1, jobs))]
        for p in self.procs:
            p.start()
        self.info: dict = {}
        for _ in self.procs:
            kind, _, info = self._get(ready_s)
            self.info = info

    def _get(self, timeout: float) -> tuple:
        waited = 0.0
        while True:
            try:
                return self.done.get(timeout=5)
            except queue.Empty:
                waited += 5
                dead = [(i, p.exitcode) for i, p in enumerate(self.procs)
                        if not p.is_alive() and p.exitcode]
                if dead:  # its candidate went with it: waiting on would wait for ever
                    i, code = dead[0]
                    raise RuntimeError(f"local evaluator process {i} exited with code {code} (its "
                                       "traceback is above); the candidate it held is lost") from None
                if not any(p.is_alive() for p in self.procs):
                    raise RuntimeError("every local evaluator process exited") from None
                if waited >= timeout:
                    raise TimeoutError(f"no evaluator answered within {timeout:g} s") from None

    def map(self, pairs: Iterable[tuple[Task, Candidate]], cold: bool = False,
            timeout_s: float = 3600.0) -> Iterator[tuple[int, EvalResult]]:
        """Results in completion order; `cold`: clear the evaluator's caches before each one."""
        items = list(pairs)
        for i, (task, cand) in enumerate(items):
            self.todo.put((i, task, cand, cold))
        for _ in items:
            _, i, res = self._get(timeout_s)
            yield i, res

    def close(self) -> None:
        for _ in self.procs:
            self.todo.put(None)
        for p in self.procs:
            p.join(60)
            if p.is_alive():
                p.kill()

    def __enter__(self) -> "LocalEvaluators":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
