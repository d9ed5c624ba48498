"""vLLM replica placement on a 3-node Ray cluster on this machine (fake GPUs), laid out like
cluster.yaml: a head, a generation node (resource `gen`, label kbx-role=generation) and an
evaluation node. The replica's Ray options come from the real presets; a stand-in actor reports
where it landed, since the point here is placement, not the engine."""
from __future__ import annotations

import pytest
import ray
from ray.cluster_utils import Cluster
from ray.util.placement_group import placement_group_table

from kbx_ray.config.compose import load_config
from kbx_ray.llm.vllm_spec import actor_options, for_cluster, placement_hint, spec_from


@pytest.fixture(scope="module")
def cluster():
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "labels": {"kbx-role": "head"}})
    c.add_node(num_cpus=2, num_gpus=4, resources={"gen": 4}, labels={"kbx-role": "generation"})
    c.add_node(num_cpus=2, num_gpus=4, resources={"eval_h100": 4},
               labels={"kbx-role": "evaluation"})
    ray.init(address=c.address, include_dashboard=False, configure_logging=False)
    yield {n["NodeID"]: (n.get("Labels") or {}).get("kbx-role") for n in ray.nodes()}
    ray.shutdown()
    c.shutdown()


@ray.remote
class Where:
    def where(self) -> tuple[str, int]:
        ctx = ray.get_runtime_context()
        return ctx.get_node_id(), len(ray.get_gpu_ids())


def spec_for(preset: str):
    return for_cluster(spec_from(load_config([f"model={preset}"]).model))


def test_tp1_replica_lands_on_the_generation_node_with_one_gpu(cluster):
    spec = spec_for("qwen2.5-coder-7b")
    assert spec.resources == {"gen": 1.0}  # kept: this cluster has kbx-role labels
    opts = actor_options(spec)
    assert opts["num_gpus"] == 1 and opts["max_restarts"] == 2
    node, gpus = ray.get(Where.options(**opts).remote().where.remote())
    assert cluster[node] == "generation" and gpus == 1


def test_tp2_replica_gets_a_placement_group_on_the_generation_node(cluster):
    spec = spec_for("qwen2.5-coder-32b")
    opts = actor_options(spec)
    assert opts["num_gpus"] == 0
    strategy = opts["scheduling_strategy"]
    assert strategy.placement_group_capture_child_tasks is True
    pg = strategy.placement_group
    assert pg.wait(60)
    table = placement_group_table(pg)
    assert table["strategy"] == "STRICT_PACK" and len(table["bundles"]) == 2
    assert all(b == {"GPU": 1.0, "CPU": 1.0, "gen": 1.0} for b in table["bundles"].values())
    assert {cluster[n] for n in table["bundles_to_node_id"].values()} == {"generation"}
    node, _ = ray.get(Where.options(**opts).remote().where.remote())
    assert cluster[node] == "generation"
    ray.util.remove_placement_group(pg)


def test_hint_names_what_no_node_offers(cluster):
    assert placement_hint(spec_for("qwen2.5-coder-7b")) is None
    cfg = load_config(["model=qwen2.5-coder-7b",
                       "model.options.placement.accelerator_type=B200"]).model
    hint = placement_hint(for_cluster(spec_from(cfg)))
    assert hint is not None and "accelerator_type:B200" in hint and "gen=1" in hint
    assert hint.endswith("add a generation node (cluster.yaml gen.*) or change "
                         "model.options.placement")
