"""Faults in a running sweep: a dying evaluator, a driver killed with -9, a generation log."""
from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import ray

from kbx_ray.config import load_config
from kbx_ray.genlog import GenerationLog
from kbx_ray.hardware import get_pool
from kbx_ray.sinks import read_table
from kbx_ray.suite import get_task
from kbx_ray.types import Generation
from tests.conftest import make_candidate

ROOT = Path(__file__).resolve().parents[2]
SIX = "suite.include=[activation/relu,math/exp,reduce/sum,linear_algebra/matvec,fusion/add_gelu,pooling/avg_pool1d]"


@pytest.fixture(scope="module")
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, configure_logging=False)
    yield
    ray.shutdown()


def _pool(retries: int):
    from kbx_ray.pools import EvaluatorPool

    cfg = load_config(["engine.evaluators=1", f"engine.retries={retries}"])
    return EvaluatorPool(get_pool("cpu"), cfg)


async def _evaluate_while_killing(pool, task, cand, kills: int):
    await pool.start()  # the actor is up: a kill now lands mid-candidate
    job = asyncio.ensure_future(pool.evaluate(task, cand))
    for _ in range(kills):
        while pool.stats.in_flight == 0:
            await asyncio.sleep(0.05)
        await asyncio.sleep(1.0)  # mid-candidate: the worker is evaluating
        ray.kill(pool.actors[0], no_restart=False)
        while pool.stats.in_flight:
            await asyncio.sleep(0.05)
    return await job


def test_evaluator_killed_mid_candidate_is_restarted_and_retried(local_ray):
    task = get_task("activation/relu")
    cand = make_candidate(task.task_id, "relu", Path(task.solution_path).read_text())

    async def main():
        pool = _pool(retries=2)
        res = await _evaluate_while_killing(pool, task, cand, kills=1)
        return pool, res

    pool, res = asyncio.run(main())
    assert res.exec_ok, res.error_msg
    assert pool.stats.retried == 1


def test_evaluator_that_keeps_dying_is_recorded_as_infra_error(local_ray):
    task = get_task("activation/relu")
    cand = make_candidate(task.task_id, "relu", Path(task.solution_path).read_text())

    async def main():
        pool = _pool(retries=0)
        return await _evaluate_while_killing(pool, task, cand, kills=1)

    res = asyncio.run(main())
    assert (res.exec_ok, res.error_kind) == (False, "infra_error")
    assert "evaluator died 1 times" in res.error_msg


def test_batch_on_an_evaluator_that_dies_is_queued_again(local_ray):
    """A call carrying several candidates (engine.eval_batch) meets a dead evaluator: every one of
    them is retried once it is back, and each gets its own verdict."""
    from kbx_ray.pools import EvaluatorPool

    task = get_task("activation/relu")
    code = Path(task.solution_path).read_text()
    cands = [make_candidate(task.task_id, "relu", code + f"\n# {i}\n") for i in range(6)]
    cfg = load_config(["engine.evaluators=1", "engine.retries=1", "engine.eval_batch=4"])

    async def main():
        pool = EvaluatorPool(get_pool("cpu"), cfg)
        await pool.start()
        try:
            job = asyncio.gather(*(pool.evaluate(task, c) for c in cands))
            while pool.stats.in_flight == 0:
                await asyncio.sleep(0.05)
            await asyncio.sleep(1.0)  # the first four are being evaluated
            ray.kill(pool.actors[0], no_restart=False)
            return pool, await job
        finally:
            pool.close()

    pool, results = asyncio.run(main())
    assert [r.candidate_id for r in results] == [c.candidate_id for c in cands]
    assert all(r.exec_ok for r in results), [r.error_msg for r in results]
    assert pool.stats.retried == 4 and pool.stats.done == 6


def test_generation_log_survives_a_torn_line(tmp_path):
    log = GenerationLog(tmp_path)
    log.append("c1", 0, 0, Generation(text="hello", completion_tokens=3))
    log.close()
    with open(tmp_path / "generations.wal.jsonl", "a") as f:
        f.write('{"cell_id": "c2", "round": 0, "te')  # a write cut short by a kill
    again = GenerationLog(tmp_path)
    assert again.lookup("c1", 0).text == "hello" and again.lookup("c1", 0).completion_tokens == 3
    assert again.lookup("c2", 0) is None


def test_driver_killed_with_sigkill_then_resumed(tmp_path):
    """Kill -9 the whole driver mid-sweep; the re-run records every cell exactly once and makes
    no generation twice (the log holds one line per cell)."""
    args = [sys.executable, str(ROOT / "scripts/sweep.py"), f"output_dir={tmp_path}", SIX,
            "wandb.mode=disabled", "engine.flush_every=1", "engine.max_concurrency=1",
            "engine.evaluators=1"]
    env = dict(os.environ, RAY_ADDRESS="")
    proc = subprocess.Popen(args, cwd=ROOT, start_new_session=True, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 240
    while time.time() < deadline and not list(tmp_path.rglob("evaluations/part-*.parquet")):
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    sweep_dir = next(p.parent.parent for p in tmp_path.rglob("evaluations/part-*.parquet"))
    before = len(read_table(sweep_dir, "evaluations"))
    assert 1 <= before < 6
    done = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    ev = read_table(sweep_dir, "evaluations")
    gen = read_table(sweep_dir, "generations")
    assert len(ev) == 6 and ev.cell_id.is_unique and ev.exec_ok.all()
    assert len(gen) == 6 and gen.cell_id.is_unique
    wal = (sweep_dir / "generations.wal.jsonl").read_text().splitlines()
    assert len(wal) == len({line[:60] for line in wal})  # no generation was made twice
