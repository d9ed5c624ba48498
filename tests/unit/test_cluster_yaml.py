"""cluster.yaml, checked offline with Ray's own launcher validator and against the GPU catalogue.

prepare_config only merges in ray/autoscaler/aws/defaults.yaml; the EC2 calls (resource fill-in,
AMI and IAM bootstrap) happen later, inside `ray up`. The tests block every socket to prove it.
"""
from __future__ import annotations

import copy
import dataclasses
import re
import socket
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from ray.autoscaler._private.util import prepare_config, validate_config

from kbx_ray.config.hardware import (
    CONF_DIR, get_pool, on_role_cluster, ray_options, selector_matches,
)

CLUSTER_YAML = Path(__file__).resolve().parents[2] / "cluster.yaml"
DOCKERFILE = CLUSTER_YAML.parent / "conf" / "docker" / "Dockerfile"


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """No network and no AWS credentials: validation must not need either."""
    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("cluster.yaml validation tried to open a network connection")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")


@pytest.fixture(scope="module")
def raw() -> dict[str, Any]:
    return yaml.safe_load(CLUSTER_YAML.read_text())


@pytest.fixture
def prepared(raw: dict[str, Any], offline: None) -> dict[str, Any]:
    config = prepare_config(copy.deepcopy(raw))
    validate_config(config)
    return config


def _types(config: dict[str, Any], prefix: str) -> dict[str, dict[str, Any]]:
    found = {k: v for k, v in config["available_node_types"].items() if k.startswith(prefix)}
    assert found, f"no {prefix}* node type"
    return found


def test_ray_validator_accepts_it_offline(prepared: dict[str, Any]) -> None:
    assert prepared["cluster_name"] == "kbx-ray"
    assert prepared["provider"] == {**prepared["provider"], "type": "aws", "region": "us-west-2"}
    assert prepared["available_node_types"]["head.cpu"]["max_workers"] == 0


def test_validator_is_real_it_rejects_fractional_resources(raw: dict[str, Any],
                                                           offline: None) -> None:
    bad = copy.deepcopy(raw)
    bad["available_node_types"]["eval.l4x4"]["resources"]["GPU"] = 0.5
    with pytest.raises(jsonschema.ValidationError):
        validate_config(prepare_config(bad))


def test_all_resources_are_integers_and_head_has_no_gpu(raw: dict[str, Any]) -> None:
    for name, node_type in raw["available_node_types"].items():
        for key, value in node_type["resources"].items():
            assert type(value) is int, f"{name}.{key} = {value!r}"
        assert "CPU" in node_type["resources"], f"{name}: write CPU out (no EC2 fill-in)"
    head = raw["available_node_types"][raw["head_node_type"]]["resources"]
    assert head["GPU"] == 0


def test_each_eval_node_type_serves_one_catalogued_pool(raw: dict[str, Any]) -> None:
    evals = _types(raw, "eval.")
    assert len({t["labels"]["kbx-pool"] for t in evals.values()}) >= 3  # three GPU types at least
    for name, node_type in evals.items():
        res, labels = node_type["resources"], node_type["labels"]
        pools = [k.removeprefix("eval_") for k in res if k.startswith("eval_")]
        assert len(pools) == 1, f"{name}: one eval_<pool> resource, got {pools}"
        pool = get_pool(pools[0])  # raises UnknownHardwareError if the pool does not exist
        assert (CONF_DIR / f"{pool.name}.yaml").exists()
        assert res[f"eval_{pool.name}"] == res["GPU"] > 0, f"{name}: one evaluator per GPU"
        assert res[f"accelerator_type:{pool.accelerator_type}"] == 1
        assert labels == {"kbx-role": "evaluation", "kbx-pool": pool.name}


def _demand(opts: dict[str, Any]) -> dict[str, float]:
    """The resources Ray asks of a node for these actor options (accelerator_type -> 0.001)."""
    need = {"GPU": float(opts["num_gpus"]), **opts.get("resources", {})}
    if "accelerator_type" in opts:
        need[f"accelerator_type:{opts['accelerator_type']}"] = 0.001
    return need


def test_each_pool_fits_its_node_type_both_ways(raw: dict[str, Any]) -> None:
    """The default (accelerator_type) and the pinned (resource + label) placement both fit."""
    for node_type in _types(raw, "eval.").values():
        res, labels = node_type["resources"], node_type["labels"]
        pool = get_pool(labels["kbx-pool"])
        pinned = dataclasses.replace(pool, resources={f"eval_{pool.name}": 1},
                                     labels={"kbx-pool": pool.name})
        for opts in (ray_options(pool), ray_options(pinned)):
            assert all(res.get(k, 0) >= v for k, v in _demand(opts).items()), (pool.name, opts)
            assert all(labels.get(k) == v for k, v in opts.get("label_selector", {}).items())


def test_role_placement_fits_its_node_type_and_never_the_generation_node(raw: dict[str, Any]
                                                                        ) -> None:
    """On this cluster evaluators go by kbx-role/kbx-pool labels and eval_<pool>: each pool's
    evaluator fits its own type and no other, the H100 generation node above all."""
    types = raw["available_node_types"]
    for name, node_type in _types(raw, "eval.").items():
        pool = on_role_cluster(get_pool(node_type["labels"]["kbx-pool"]))
        opts = ray_options(pool)
        for other, t in types.items():
            fits = all(t["resources"].get(k, 0) >= v for k, v in _demand(opts).items()) and \
                selector_matches(opts["label_selector"], t.get("labels", {}))
            assert fits == (other == name), (pool.name, other)


def test_nodes_run_the_pinned_image_and_install_nothing_at_boot(raw: dict[str, Any],
                                                                prepared: dict[str, Any]) -> None:
    import ray

    assert prepared["docker"]["image"].rsplit(":", 1)[1] not in ("", "latest")
    for key in ("setup_commands", "head_setup_commands", "worker_setup_commands",
                "initialization_commands"):
        assert not any("pip install" in cmd for cmd in prepared[key]), key
    dockerfile = DOCKERFILE.read_text()
    assert dockerfile.startswith("#") and "\nFROM nvidia/cuda:" in dockerfile
    assert "pip install -c /opt/kbx/constraints.txt" in dockerfile  # conf/constraints.txt
    constraints = (DOCKERFILE.parent.parent / "constraints.txt").read_text()
    pins = dict(re.findall(r"^(torch|triton|ray|vllm)==([0-9.]+)$", constraints, re.M))
    assert set(pins) == {"torch", "triton", "ray", "vllm"}, pins
    assert pins["ray"] == ray.__version__  # `ray up` from this checkout must match
    for name, node_type in raw["available_node_types"].items():
        gpu = node_type["resources"].get("GPU", 0) > 0
        assert ("--gpus all" in node_type.get("docker", {}).get("worker_run_options", [])) == gpu
        assert node_type["node_config"]["ImageId"], name  # a host AMI with a current driver


def test_dashboard_is_on_for_ray_job_submit(prepared: dict[str, Any]) -> None:
    head = " ".join(prepared["head_start_ray_commands"])
    assert "--include-dashboard=true" in head and "--dashboard-host=0.0.0.0" in head
    assert "--autoscaling-config=~/ray_bootstrap_config.yaml" in head
    for name, node_type in _types(prepared, "gen.").items():
        assert node_type["resources"]["gen"] == node_type["resources"]["GPU"], name
        assert node_type["labels"] == {"kbx-role": "generation"}


def test_compile_workers_advertise_one_compile_slot_per_cpu(raw: dict[str, Any]) -> None:
    for name, node_type in _types(raw, "compile.").items():
        res = node_type["resources"]
        assert res["compile"] == res["CPU"] and "GPU" not in res, name
