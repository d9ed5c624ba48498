"""Model presets and the vLLM spec built from them: every preset loads and validates; mistakes are
one line; the request cap follows max_num_seqs; single-machine clusters drop the cluster pins."""
from __future__ import annotations

import dataclasses

import pytest

from kbx_ray.config.compose import CONF_DIR, load_config
from kbx_ray.errors import ConfigError
from kbx_ray.llm.errors import BackendError
from kbx_ray.llm.openai_http import settings_from
from kbx_ray.llm.base import generation_gpus
from kbx_ray.llm.vllm_spec import for_cluster, spec_from

PRESETS = sorted(p.stem for p in (CONF_DIR / "model").glob("*.yaml"))
REQUIRED = {"qwen2.5-coder-7b", "qwen2.5-coder-32b", "deepseek-coder-v2-lite", "autotriton-8b",
            "kernelllm", "tiny", "openai", "reference"}


def test_the_study_presets_exist():
    assert REQUIRED <= set(PRESETS)


@pytest.mark.parametrize("name", PRESETS)
def test_every_preset_loads_and_validates(name):
    cfg = load_config([f"model={name}"]).model
    assert cfg.name and cfg.max_tokens > 0
    if cfg.backend == "vllm":
        spec = spec_from(cfg)
        assert spec.engine["model"] == cfg.path and spec.max_inflight >= 1
        assert spec.gpus_per_replica in (0, spec.tp)
        if spec.gpus_per_replica:  # GPU presets aim at cluster.yaml's generation node type
            assert spec.resources == {"gen": 1.0} and spec.labels == {"kbx-role": "generation"}
    elif cfg.backend == "openai":
        assert settings_from(cfg).base_url.endswith("/v1")


def test_tensor_parallel_preset_and_executor():
    spec = spec_from(load_config(["model=qwen2.5-coder-32b"]).model)
    assert spec.tp == 2 and spec.gpus_per_replica == 2
    assert spec.engine["distributed_executor_backend"] == "ray"
    one = spec_from(load_config(["model=qwen2.5-coder-7b"]).model)
    assert one.engine["distributed_executor_backend"] == "uni"


def test_cap_is_a_tenth_above_max_num_seqs():
    cfg = load_config(["model=qwen2.5-coder-7b", "model.options.engine.max_num_seqs=100"]).model
    assert spec_from(cfg).max_inflight == 110
    cfg = load_config(["model=qwen2.5-coder-7b", "model.options.max_inflight=7"]).model
    assert spec_from(cfg).max_inflight == 7


@pytest.mark.parametrize("override, message", [
    ("model.options.placement.gpu=1", "unknown key model.options.placement.gpu in model "
     "qwen2.5-coder-7b: model.options.placement takes accelerator_type, resources, labels, "
     "num_gpus, num_cpus"),
    ("model.options.samplng={}", "unknown key model.options.samplng in model qwen2.5-coder-7b: did "
     "you mean model.options.sampling?"),
    ("model.options.placement.num_gpus=3", "bad model.options in model qwen2.5-coder-7b: "
     "placement.num_gpus=3 must be 0 (CPU) or engine.tensor_parallel_size=1"),
    ("model.options.replicas=0", "model qwen2.5-coder-7b: model.options.replicas=0: choose 1 or "
     "more"),
    ("model.placement.num_gpus=1", "model.placement in the command line has moved: set "
     "model.options.placement.<key> (the vllm backend's options)"),
])
def test_mistakes_are_one_line(override, message):
    with pytest.raises(ConfigError) as e:
        spec_from(load_config(["model=qwen2.5-coder-7b", override]).model)
    assert str(e.value) == message


def test_missing_weights_path_is_one_line():
    cfg = dataclasses.replace(load_config(["model=qwen2.5-coder-7b"]).model, path="")
    with pytest.raises(BackendError, match="model 'qwen2.5-coder-7b' has no weights: set model.path"):
        spec_from(cfg)


def test_single_machine_drops_only_the_cluster_pins():
    cfg = load_config(["model=qwen2.5-coder-7b",
                       "model.options.placement.accelerator_type=H100"]).model
    spec = spec_from(cfg)
    spec.resources["nvme"] = 1.0
    local = for_cluster(spec, [{"Alive": True, "Labels": {}, "Resources": {"GPU": 8.0}}])
    assert local.resources == {"nvme": 1.0} and local.labels == {}
    assert local.accelerator_type == "H100"
    cluster = for_cluster(spec, [{"Alive": True, "Labels": {"kbx-role": "head"}}])
    assert cluster.resources == {"gen": 1.0, "nvme": 1.0}
    assert cluster.labels == {"kbx-role": "generation"}


def test_openai_preset_needs_a_base_url():
    assert settings_from(load_config(["model=openai"]).model).base_url == \
        "http://localhost:8000/v1"  # `vllm serve`'s, the default
    cfg = load_config(["model=openai", "model.options.base_url=''"]).model
    with pytest.raises(BackendError, match="needs model.options.base_url"):
        settings_from(cfg)
    cfg = load_config(["model=openai", "model.options.base_url=http://127.0.0.1:9/"]).model
    assert settings_from(cfg).base_url == "http://127.0.0.1:9/v1"


def test_generation_gpus_counts_replicas_times_tensor_parallel():
    assert generation_gpus(load_config(["model=qwen2.5-coder-32b",
                                        "model.options.replicas=3"]).model) == 6
    assert generation_gpus(load_config(["model=tiny"]).model) == 0  # a CPU engine
    assert generation_gpus(load_config(["model=openai"]).model) == 0


def test_the_vllm_backend_refuses_another_vllm_release_in_one_line(monkeypatch):
    """It uses vLLM 0.32's renderer and request types (pinned in the [vllm] extra)."""
    from kbx_ray.llm import vllm_spec

    model = load_config(["model=qwen2.5-coder-7b"]).model
    monkeypatch.setattr(vllm_spec, "installed_vllm", lambda: "0.33.0")
    with pytest.raises(BackendError) as e:
        vllm_spec.check(model, local=False)
    assert str(e.value).startswith("vLLM 0.33.0 is installed, but the vllm backend is built on "
                                   "vLLM 0.32.x's") and "pip install vllm==0.32.0" in str(e.value)
    monkeypatch.setattr(vllm_spec, "installed_vllm", lambda: None)  # none here: the nodes check
    vllm_spec.check(model, local=False)
