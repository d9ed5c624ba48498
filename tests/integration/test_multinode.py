"""A heterogeneous cluster on one machine: fake GPU nodes of three types (ray.cluster_utils).

The GPUs are fake, so evaluation runs the interpreter (`evaluation.device=cpu`); what is under test
is placement: every evaluation row must come from a node of the pool it names, and killing a node
mid-sweep must lose nothing.
"""
from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
import ray
from ray.cluster_utils import Cluster

from kbx_ray.orchestration import engine
from kbx_ray.config.compose import load_config
from kbx_ray.sinks import read_table

TYPES = {"a100": "A100", "l4": "L4", "h100": "H100"}


@pytest.fixture(scope="module")
def cluster():
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    nodes = {}
    for pool, accel in TYPES.items():
        nodes[pool] = [c.add_node(num_cpus=1, num_gpus=1, resources={f"accelerator_type:{accel}": 1})]
    nodes["a100"].append(c.add_node(num_cpus=1, num_gpus=1, resources={"accelerator_type:A100": 1}))
    c.wait_for_nodes()
    ray.init(address=c.address, configure_logging=False)
    yield c, nodes
    ray.shutdown()
    c.shutdown()


def test_rows_land_on_the_requested_types_and_a_node_loss_loses_nothing(cluster, tmp_path):
    c, nodes = cluster
    cfg = load_config([f"output_dir={tmp_path}", "hardware=[a100,l4,h100]", "evaluation.device=cpu",
                       "suite.include=[activation/relu,math/exp,fusion/add_gelu,reduce/sum]",
                       "sink.wandb.mode=disabled", "engine.evaluators=1", "engine.flush_every=1",
                       "engine.max_concurrency=1"])

    def kill_one_a100() -> None:  # mid-sweep: as soon as the first cell is recorded
        deadline = time.time() + 300
        while time.time() < deadline and not list(tmp_path.rglob("evaluations/part-*.parquet")):
            time.sleep(0.2)
        c.remove_node(nodes["a100"][0])

    killer = threading.Thread(target=kill_one_a100, daemon=True)
    killer.start()
    p = engine.run_sweep(cfg)
    killer.join(timeout=5)
    ev = read_table(p.sweep_dir, "evaluations")
    assert len(ev) == 4 * 3  # 4 cells x 3 pools, nothing lost
    assert set(zip(ev.cell_id, ev.hardware)).__len__() == 12  # and nothing twice
    for pool, accel in TYPES.items():
        rows = ev[ev.hardware == pool]
        assert len(rows) == 4 and (rows.node_accelerator == accel).all(), rows.node_accelerator.tolist()
    assert ev.exec_ok.all(), ev[~ev.exec_ok.astype(bool)][["task_id", "hardware", "error_msg"]]
    assert (ev[ev.hardware == "a100"].node_id != nodes["a100"][0].node_id).any()


def test_evaluators_per_gpu_packs_several_evaluators_onto_one_gpu(cluster, tmp_path):
    """engine.evaluators_per_gpu=2: two evaluators, each asking for half a GPU, share the one GPU of
    an L40S node (on a real GPU they then take turns for timing through
    evaluate/parent/gpulock.py)."""
    import asyncio

    from kbx_ray.config.hardware import get_pool
    from kbx_ray.orchestration.evaluator_group import EvaluatorGroup
    from kbx_ray.suites.builtin import get_task
    from tests.conftest import make_candidate

    c, _ = cluster
    node = c.add_node(num_cpus=2, num_gpus=1, resources={"accelerator_type:L40S": 1})
    c.wait_for_nodes()
    cfg = load_config([f"output_dir={tmp_path}", "evaluation.device=cpu", "sink.wandb.mode=disabled",
                       "engine.evaluators_per_gpu=2"])
    group = EvaluatorGroup(get_pool("l40s"), cfg.engine, cfg.evaluation)
    try:
        assert group.opts["num_gpus"] == 0.5 and len(group.actors) == 2
        asyncio.run(group.start())
        assert len(group.actors) == 2  # both placed on the one GPU
        task = get_task("activation/relu")
        code = open(task.solution_path).read()
        res = asyncio.run(group.evaluate(task, make_candidate(task.task_id, task.name, code)))
        assert res.exec_ok and res.node_id == node.node_id, (res.error_msg, res.node_id)
    finally:
        group.close()
        c.remove_node(node)


def test_aot_compile_workers_run_on_compile_nodes_and_seed_each_arch(cluster, tmp_path):
    """engine.aot_compile=always: compile actors go to the node with the `compile` resource, and each
    GPU pool's evaluator gets its candidate's kernels compiled for its own sm_XX (A100: sm_80,
    H100: sm_90), written into the worker's Triton cache before the candidate arrives."""
    from kbx_ray.orchestration.compile_workers import CompileWorkers

    c, _ = cluster
    node = c.add_node(num_cpus=1, resources={"compile": 1})
    c.wait_for_nodes()
    cfg = load_config([f"output_dir={tmp_path}", "hardware=[a100,h100]", "evaluation.device=cpu",
                       "suite.include=[activation/relu,math/exp]", "sink.wandb.mode=disabled",
                       "engine.evaluators=1", "engine.aot_compile=always",
                       "engine.compile_workers=1"])
    try:
        p = engine.run_sweep(cfg)
        ev = read_table(p.sweep_dir, "evaluations")
        assert len(ev) == 4 and ev.exec_ok.all(), ev[["task_id", "hardware", "error_msg"]]
        seeded = [json.loads(x).get("aot_kernels", 0) for x in ev.stage_s]
        assert all(k >= 1 for k in seeded), seeded  # every row says its kernels came ahead
        # each worker's Triton cache went with it (no file outlives a worker): the arch of what was
        # seeded is test_aot_compile's to check
        import asyncio

        workers = CompileWorkers(1, 60)
        asyncio.run(workers.start(60))
        assert workers.nodes == {node.node_id}

        async def busy_then_free() -> tuple:
            from kbx_ray.orchestration.compile_workers import ready_result
            from kbx_ray.suites.builtin import get_task
            from tests.conftest import make_candidate

            task = get_task("math/exp")
            cand = make_candidate(task.task_id, task.name, Path(task.solution_path).read_text())
            held = await workers.group.acquire()  # the only worker is busy
            skipped = workers.start_compile(task, cand, 90)
            await workers.group.release(held)
            fut = workers.start_compile(task, cand, 90)
            not_yet = ready_result(fut)  # an evaluator taking the candidate now goes without
            await fut
            return skipped, not_yet, ready_result(fut), workers.start_compile(task, cand, 90)

        skipped, not_yet, done, again = asyncio.run(busy_then_free())
        assert skipped is None and workers.skipped == 1  # `on` never waits for a compile worker
        assert not_yet is None  # ... nor for the compile
        assert done is not None and done.kernels >= 1 and done.arch == 90
        assert again is not None and again.result() is done  # another sm_90 pool shares it
        assert workers.line() == ("compile workers: 1 up on 1 node(s), 1 candidates compiled "
                                  "ahead, 0 without kernels, 1 left to the GPU (no worker free)")
        workers.close()
    finally:
        c.remove_node(node)
