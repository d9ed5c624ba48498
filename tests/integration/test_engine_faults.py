"""Faults in a running sweep: a dying evaluator, a driver killed with -9, a generation log."""
from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import ray

from kbx_ray.config.compose import load_config
from kbx_ray.records.genlog import GenerationLog
from kbx_ray.config.hardware import get_pool
from kbx_ray.sinks import read_table
from kbx_ray.suites.builtin import get_task
from kbx_ray.types import Generation
from tests.conftest import make_candidate

ROOT = Path(__file__).resolve().parents[2]
SIX = "suite.include=[activation/relu,math/exp,reduce/sum,linear_algebra/matvec,fusion/add_gelu,pooling/avg_pool1d]"


@pytest.fixture(scope="module")
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, configure_logging=False)
    yield
    ray.shutdown()


def _group(retries: int):
    from kbx_ray.orchestration.evaluator_group import EvaluatorGroup

    cfg = load_config(["engine.evaluators=1", f"engine.retries={retries}"])
    return EvaluatorGroup(get_pool("cpu"), cfg.engine, cfg.evaluation)


async def _evaluate_while_killing(group, task, cand, kills: int):
    await group.start()  # the actor is up: a kill now lands mid-candidate
    job = asyncio.ensure_future(group.evaluate(task, cand))
    for _ in range(kills):
        while group.stats.in_flight == 0:
            await asyncio.sleep(0.05)
        await _evaluating(group)  # mid-candidate: the worker is evaluating
        ray.kill(group.actors[0], no_restart=False)
        while group.stats.in_flight:
            await asyncio.sleep(0.05)
    return await job


def test_evaluator_killed_mid_candidate_is_restarted_and_retried(local_ray):
    task = get_task("activation/relu")
    cand = make_candidate(task.task_id, "relu", Path(task.solution_path).read_text())

    async def main():
        group = _group(retries=2)
        res = await _evaluate_while_killing(group, task, cand, kills=1)
        return group, res

    group, res = asyncio.run(main())
    assert res.exec_ok, res.error_msg
    assert group.stats.retried == 1


def test_evaluator_that_keeps_dying_is_recorded_as_infra_error(local_ray):
    task = get_task("activation/relu")
    cand = make_candidate(task.task_id, "relu", Path(task.solution_path).read_text())

    async def main():
        group = _group(retries=0)
        return await _evaluate_while_killing(group, task, cand, kills=1)

    res = asyncio.run(main())
    assert (res.exec_ok, res.error_kind) == (False, "infra_error")
    assert "evaluator died 1 times" in res.error_msg


def test_batch_on_an_evaluator_that_dies_is_queued_again(local_ray):
    """A call carrying several candidates (engine.eval_batch) meets a dead evaluator: every one of
    them is retried once it is back, and each gets its own verdict."""
    from kbx_ray.orchestration.evaluator_group import EvaluatorGroup

    task = get_task("activation/relu")
    code = Path(task.solution_path).read_text()
    cands = [make_candidate(task.task_id, "relu", code + f"\n# {i}\n") for i in range(6)]
    cfg = load_config(["engine.evaluators=1", "engine.retries=1", "engine.eval_batch=4"])

    async def main():
        group = EvaluatorGroup(get_pool("cpu"), cfg.engine, cfg.evaluation)
        await group.start()
        try:
            job = asyncio.gather(*(group.evaluate(task, c) for c in cands))
            while group.stats.in_flight == 0:
                await asyncio.sleep(0.05)
            await _evaluating(group)  # the first four are being evaluated
            ray.kill(group.actors[0], no_restart=False)
            return group, await job
        finally:
            group.close()

    group, results = asyncio.run(main())
    assert [r.candidate_id for r in results] == [c.candidate_id for c in cands]
    assert all(r.exec_ok for r in results), [r.error_msg for r in results]
    assert group.stats.retried == 4 and group.stats.done == 6


def _proc_stat(pid: int) -> list[str]:
    """/proc/<pid>/stat past the command name: [state, ppid, ...]; [] once the pid is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return []


def _read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError:
        return b""


async def _sandbox_workers(actor_pid: int, timeout_s: float = 120.0) -> list[int]:
    """The evaluator's sandbox worker processes, once there is one. The sandbox starts its worker
    with the first candidate it is sent, so one running means that a candidate is on it."""
    deadline = time.monotonic() + timeout_s
    while True:
        workers = [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()
                   and _proc_stat(int(p.name))[1:2] == [str(actor_pid)]
                   and b"kbx_ray.evaluate.worker.main" in _read_bytes(p / "cmdline")]
        if workers:
            return workers
        assert time.monotonic() < deadline, "the evaluator started no sandbox worker"
        await asyncio.sleep(0.02)


async def _evaluating(group, timeout_s: float = 120.0) -> None:
    """Until the group's one evaluator is evaluating, not a guessed time after the call was sent:
    its sandbox worker is up and has been sent a candidate (the sandbox copies the task file into
    the worker's home, its cwd, with the candidate's request)."""
    deadline = time.monotonic() + timeout_s
    for pid in await _sandbox_workers(group._pids[group.actors[0]], timeout_s):
        while not list(Path(f"/proc/{pid}/cwd").glob("kbx_task_*.py")):
            assert time.monotonic() < deadline, "the sandbox worker was sent no candidate"
            await asyncio.sleep(0.02)


async def _kill_sandbox_worker(actor_pid: int, timeout_s: float = 120.0) -> None:
    """SIGKILL the evaluator's sandbox worker as soon as it is up, as a resource limit would."""
    for pid in await _sandbox_workers(actor_pid, timeout_s):
        os.kill(pid, signal.SIGKILL)


async def _exited(pid: int, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while _proc_stat(pid)[:1] not in ([], ["Z"]):
        assert time.monotonic() < deadline, f"process {pid} still runs"
        await asyncio.sleep(0.05)


def _group_killed_after_its_worker(restarted: bool, *overrides: str):
    """A group whose first call replays the race: Ray reaps the evaluator's sandbox worker, the
    actor answers with the worker's SIGKILL crash, and only then does the actor itself die (and,
    if `restarted`, come back before the group asks after it)."""
    from kbx_ray.orchestration.evaluator_group import EvaluatorGroup

    class Group(EvaluatorGroup):
        raced = False

        async def _results(self, actor, batch):
            if self.raced:
                return await super()._results(actor, batch)
            self.raced, pid = True, self._pids[actor]
            call = asyncio.ensure_future(super()._results(actor, batch))
            await _kill_sandbox_worker(pid)
            results = await call  # the live actor's verdict: its worker died of SIGKILL
            ray.kill(actor, no_restart=False)
            await _exited(pid)
            deadline = time.monotonic() + 120
            while restarted:
                try:
                    await actor.info.remote()
                    break
                except ray.exceptions.RayActorError:
                    assert time.monotonic() < deadline, "the evaluator did not come back"
                    await asyncio.sleep(0.2)
            return results

    cfg = load_config(["engine.evaluators=1", *overrides])
    return Group(get_pool("cpu"), cfg.engine, cfg.evaluation)


@pytest.mark.parametrize("restarted", [False, True], ids=["dead", "restarted"])
def test_worker_reaped_before_its_killed_evaluator_is_retried(local_ray, restarted):
    """The sandbox worker's SIGKILL reported by an evaluator that Ray then killed is the kill's,
    not the candidate's: the candidate is retried on the restarted evaluator, whether the group
    finds it dead or already back (a new pid)."""
    task = get_task("activation/relu")
    cand = make_candidate(task.task_id, "relu", Path(task.solution_path).read_text())

    async def main():
        group = _group_killed_after_its_worker(restarted, "engine.retries=2")
        await group.start()
        first = group._pids[group.actors[0]]
        try:
            return group, first, await group.evaluate(task, cand)
        finally:
            group.close()

    group, first, res = asyncio.run(main())
    assert res.exec_ok, res.error_msg
    assert group.stats.retried == 1 and group.stats.done == 1
    assert group._pids[group.actors[0]] not in (None, first)  # the restarted actor's pid


def test_batch_with_a_worker_reaped_before_its_evaluator_is_queued_again(local_ray):
    """engine.eval_batch: one SIGKILL verdict in a call whose evaluator then died sends the
    whole call back to the queue, the verdicts it did give included."""
    task = get_task("activation/relu")
    code = Path(task.solution_path).read_text()
    cands = [make_candidate(task.task_id, "relu", code + f"\n# {i}\n") for i in range(3)]

    async def main():
        group = _group_killed_after_its_worker(False, "engine.retries=1", "engine.eval_batch=3")
        await group.start()
        try:
            return group, await asyncio.gather(*(group.evaluate(task, c) for c in cands))
        finally:
            group.close()

    group, results = asyncio.run(main())
    assert all(r.exec_ok for r in results), [r.error_msg for r in results]
    assert group.stats.retried == 3 and group.stats.done == 3


def test_worker_sigkilled_under_a_live_evaluator_is_the_candidates_crash(local_ray):
    """A worker killed while its evaluator lives (a memory limit, the OOM killer) is the
    candidate's own crash: recorded as such, never retried."""
    task = get_task("activation/relu")
    cand = make_candidate(task.task_id, "relu", Path(task.solution_path).read_text())

    async def main():
        group = _group(retries=2)
        await group.start()
        try:
            job = asyncio.ensure_future(group.evaluate(task, cand))
            await _kill_sandbox_worker(group._pids[group.actors[0]])
            return group, await job
        finally:
            group.close()

    group, res = asyncio.run(main())
    assert (res.exec_ok, res.error_kind) == (False, "crash"), res.error_msg
    assert "killed by SIGKILL" in res.error_msg
    assert group.stats.retried == 0 and group.stats.failed == 1


def test_generation_log_survives_a_torn_line(tmp_path):
    log = GenerationLog(tmp_path)
    log.append("c1", 0, 0, Generation(text="hello", completion_tokens=3))
    log.close()
    with open(tmp_path / "generations.wal.jsonl", "a") as f:
        f.write('{"cell_id": "c2", "round": 0, "te')  # a write cut short by a kill
    again = GenerationLog(tmp_path)
    assert again.lookup("c1", 0).text == "hello" and again.lookup("c1", 0).completion_tokens == 3
    assert again.lookup("c2", 0) is None
    # the resumed run's first entry starts a line of its own, so it survives the next resume
    again.append("c3", 0, 0, Generation(text="after the tear"))
    again.close()
    third = GenerationLog(tmp_path)
    assert third.lookup("c3", 0).text == "after the tear" and third.lookup("c1", 0).text == "hello"


def test_driver_killed_with_sigkill_then_resumed(tmp_path):
    """Kill -9 the whole driver mid-sweep; the re-run records every cell exactly once and makes
    no generation twice (the log holds one line per cell)."""
    args = [sys.executable, str(ROOT / "scripts/sweep.py"), f"output_dir={tmp_path}", SIX,
            "sink.wandb.mode=disabled", "engine.flush_every=1", "engine.max_concurrency=1",
            "engine.evaluators=1"]
    env = dict(os.environ, RAY_ADDRESS="")
    proc = subprocess.Popen(args, cwd=ROOT, start_new_session=True, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 240
    while not list(tmp_path.rglob("evaluations/part-*.parquet")):
        assert time.time() < deadline and proc.poll() is None, "no cell was recorded"
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    sweep_dir = next(p.parent.parent for p in tmp_path.rglob("evaluations/part-*.parquet"))
    before = len(read_table(sweep_dir, "evaluations"))
    assert 1 <= before < 6
    wal = [json.loads(line) for line in (sweep_dir / "generations.wal.jsonl").read_text()
           .splitlines() if line.endswith("}")]
    assert len(wal) == len({w["cell_id"] for w in wal}) >= before  # one call per cell so far
    done = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    ev = read_table(sweep_dir, "evaluations")
    gen = read_table(sweep_dir, "generations")
    assert len(ev) == 6 and ev.cell_id.is_unique and ev.exec_ok.all()
    assert len(gen) == 6 and gen.cell_id.is_unique
    # the logged calls were served from the log, not made again (a new call has its own latency)
    latency = dict(zip(gen.cell_id, gen.latency_s))
    assert all(latency[w["cell_id"]] == w["latency_s"] for w in wal)
    assert not (sweep_dir / "generations.wal.jsonl").exists()  # a clean finish removes the log


def test_a_batch_torn_between_its_two_parts_is_not_written_twice(local_ray, tmp_path):
    """A run stopped after a batch's generations part and before its evaluations part (a kill, a
    full disk): the resume redoes those cells from the WAL and writes their evaluation rows, but
    not a second copy of their generation rows."""
    import shutil

    from kbx_ray.orchestration import engine

    args = [f"output_dir={tmp_path}", "suite.include=[activation/relu,math/exp]",
            "sink.wandb.mode=disabled", "method=repair", "method.rounds=1"]
    p = engine.run_sweep(load_config(args))
    gens = read_table(p.sweep_dir, "generations")
    assert len(gens) >= 2 and len(read_table(p.sweep_dir, "evaluations")) >= 2
    shutil.rmtree(p.sweep_dir / "evaluations")  # the batch's second part never landed
    log = GenerationLog(p.sweep_dir)  # ... and the run stopped there, so its log stayed (a clean
    for g in gens.itertuples():       # finish removes it): as it was
        log.append(g.cell_id, int(g.round), int(g.branch), Generation(
            text=g.completion, prompt_tokens=int(g.prompt_tokens),
            completion_tokens=int(g.completion_tokens), latency_s=float(g.latency_s),
            finish_reason=g.finish_reason))
    log.close()
    again = engine.run_sweep(load_config(args))
    assert again.n_todo == 2  # both cells were redone ...
    after = read_table(p.sweep_dir, "generations")
    keys = list(zip(after.cell_id, after["round"], after.branch))
    assert len(keys) == len(set(keys)) == len(gens)  # ... without a second generation row
    assert set(read_table(p.sweep_dir, "evaluations").cell_id) == set(gens.cell_id)
