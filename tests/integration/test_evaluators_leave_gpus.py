"""Evaluator groups on one machine leave the vLLM replicas their GPUs (issue 4).

A local Ray started by `ray.init()` with two fake H100s and no kbx-role labels, as on a single
GPU host: evaluators used to take every GPU and the generation actor waited for one forever. Noop
evaluators, since the point is who holds the GPUs, not what they evaluate.
"""
from __future__ import annotations

import asyncio

import pytest
import ray

from kbx_ray.orchestration import engine
from kbx_ray.config.compose import load_config
from kbx_ray.errors import ConfigError
from kbx_ray.config.hardware import get_pool
from kbx_ray.llm.vllm_spec import actor_options, for_cluster, spec_from
from kbx_ray.orchestration.evaluator_group import EvaluatorGroup

H100 = ["hardware=[h100]", "engine.mode=noop", "sink.wandb.mode=disabled"]


@pytest.fixture(scope="module")
def two_gpus():
    ray.init(address="local", num_cpus=2, num_gpus=2, resources={"accelerator_type:H100": 1},
             include_dashboard=False, configure_logging=False)
    yield
    ray.shutdown()


def started(cfg) -> EvaluatorGroup:
    async def main() -> EvaluatorGroup:
        group = EvaluatorGroup(get_pool("h100"), cfg.engine, cfg.evaluation, models=[cfg.model])
        await group.start()
        return group
    return asyncio.run(main())


def test_evaluators_leave_the_generation_gpu_free(two_gpus):
    cfg = load_config(["model=qwen2.5-coder-7b", *H100])  # one replica on one GPU
    group = started(cfg)
    assert (group.reserved, len(group.actors)) == (1, 1)
    # The replica's own Ray options (the preset, placed for this unlabelled cluster) find a GPU.
    opts = actor_options(for_cluster(spec_from(cfg.model)))
    assert opts["num_gpus"] == 1 and "resources" not in opts and "label_selector" not in opts

    @ray.remote
    class Replica:
        def gpus(self) -> list:
            return ray.get_gpu_ids()

    replica = Replica.options(**opts).remote()
    assert len(ray.get(replica.gpus.remote(), timeout=60)) == 1  # not pending behind evaluators
    ray.kill(replica)
    for a in group.actors:
        ray.kill(a)


def test_without_vllm_every_gpu_gets_an_evaluator(two_gpus):
    group = started(load_config(["model=reference", *H100]))
    assert (group.reserved, len(group.actors)) == (0, 2)
    for a in group.actors:
        ray.kill(a)


def test_no_gpu_left_for_evaluators_is_one_line(two_gpus, tmp_path):
    cfg = load_config(["model=qwen2.5-coder-7b", "model.options.replicas=2",
                       f"output_dir={tmp_path}",
                       "suite.include=[activation/relu]", *H100])
    with pytest.raises(ConfigError) as e:
        engine.run_sweep(cfg)  # before any engine loads: no hang, no traceback
    assert str(e.value) == (
        "pool 'h100' has no GPU left for evaluators: the cluster has 2 and the sweep's vLLM "
        "replicas need 2 of them: add a GPU, or serve the model elsewhere (model=openai, or a "
        "cluster with generation nodes: cluster.yaml)")
