"""The GPU catalogue (conf/hardware/*.yaml) and Ray placement of pools on a local Ray cluster."""
from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

import pytest

from kbx_ray.config import hardware
from kbx_ray.config.hardware import (
    HardwarePool, UnknownHardwareError, check_gpu_name, detect_local, get_pool, match_pool,
    peak_for, pool_available, ray_options,
)

REQUIRED = {"rtx4090", "rtx5090", "a100", "h20", "h800", "l20", "h100", "h200", "l4", "l40s",
            "a10g", "cpu"}
GPU_POOLS = sorted(REQUIRED - {"cpu"})


def test_catalogue_has_every_required_pool_and_one_yaml_each() -> None:
    assert REQUIRED <= set(hardware.CATALOGUE)
    assert {p.stem for p in hardware.CONF_DIR.glob("*.yaml")} == set(hardware.CATALOGUE)
    assert all(name == pool.name for name, pool in hardware.CATALOGUE.items())


@pytest.mark.parametrize("name", GPU_POOLS)
def test_gpu_pools_have_positive_peaks(name: str) -> None:
    pool = get_pool(name)
    assert pool.peak_gbps > 0 and pool.sm_count > 0 and pool.memory_gb > 0
    assert {"float32", "tf32", "float16", "bfloat16", "int8"} <= set(pool.peak_tflops)
    assert all(v > 0 for v in pool.peak_tflops.values())
    # tensor cores beat CUDA cores; dense fp16 is never below tf32
    assert pool.peak_tflops["float16"] >= pool.peak_tflops["tf32"] >= pool.peak_tflops["float32"]
    assert pool.accelerator_type and pool.name_patterns and pool.num_gpus_per_actor == 1


def test_cpu_pool_has_no_roofline_and_no_gpu() -> None:
    cpu = get_pool("cpu")
    assert cpu.accelerator_type is None and cpu.name_patterns == () and not cpu.is_gpu
    assert cpu.peak_gbps == 0 and peak_for(cpu, "float16") == 0.0


def test_datasheet_figures() -> None:
    h200, h100, a100 = get_pool("h200"), get_pool("h100"), get_pool("a100")
    assert (h200.peak_gbps, h200.sm_count, h200.memory_gb) == (4800, 132, 141)
    assert h200.peak_tflops == h100.peak_tflops  # same GH100 compute, faster memory
    assert (h100.peak_gbps, h100.peak_tflops["bfloat16"]) == (3350, 989.4)
    assert (a100.peak_gbps, a100.peak_tflops["float16"], a100.sm_count) == (2039, 312.0, 108)
    assert "fp8" not in a100.peak_tflops  # Ampere has no FP8 tensor cores


@pytest.mark.parametrize("name", GPU_POOLS)
def test_accelerator_type_is_what_ray_derives_from_the_device_name(name: str) -> None:
    # Placement by accelerator_type only works if it equals what a real node advertises, and Ray
    # derives that from the NVML name with this function.
    from ray._private.accelerators.nvidia_gpu import NvidiaGPUAcceleratorManager

    pool = get_pool(name)
    assert NvidiaGPUAcceleratorManager._gpu_name_to_accelerator_type(pool.gpu) == \
        pool.accelerator_type
    assert match_pool(pool.gpu) is pool


def test_unknown_pool_is_one_actionable_line() -> None:
    with pytest.raises(UnknownHardwareError) as info:
        get_pool("b300")
    msg = str(info.value)
    assert isinstance(info.value, KeyError) and "\n" not in msg
    assert msg.startswith("unknown hardware pool 'b300': choose one of a100, a10g, cpu, h100,")
    assert msg.endswith("or add conf/hardware/b300.yaml")


def test_detect_local_is_cpu_without_a_gpu() -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    assert detect_local().name == "cpu"


def test_detect_local_builds_a_pool_for_an_unknown_gpu(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    torch = pytest.importorskip("torch")
    props = type("Props", (), {"multi_processor_count": 84, "total_memory": 48_000_000_000})
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda i=0: "NVIDIA RTX A6000")
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i=0: props)
    with caplog.at_level(logging.WARNING, logger="kbx_ray.config.hardware"):
        pool = detect_local()
    assert (pool.name, pool.gpu, pool.sm_count, pool.peak_gbps) == ("rtx_a6000", "NVIDIA RTX A6000",
                                                                   84, 0.0)
    assert "not in the hardware catalogue" in caplog.text
    assert check_gpu_name(pool, "NVIDIA RTX A6000") is None
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda i=0: "NVIDIA H800")
    assert detect_local().name == "h800"


@pytest.mark.parametrize("seen, expected", [
    ("NVIDIA H800", "h800"), ("NVIDIA H100 80GB HBM3", "h100"), ("NVIDIA H100 PCIe", "h100"),
    ("NVIDIA L40S", "l40s"), ("NVIDIA L4", "l4"), ("NVIDIA H200", "h200"), ("NVIDIA H20", "h20"),
    ("NVIDIA A100-SXM4-40GB", "a100"), ("NVIDIA A10G", "a10g"), ("NVIDIA L20", "l20"),
    ("NVIDIA GeForce RTX 4090", "rtx4090"), ("NVIDIA GeForce RTX 5090", "rtx5090"),
    ("Tesla T4", None), ("", None),
])
def test_name_matching_prefers_the_exact_family(seen: str, expected: str | None) -> None:
    pool = match_pool(seen)
    assert (pool.name if pool else None) == expected


def test_check_gpu_name() -> None:
    assert check_gpu_name(get_pool("h100"), "NVIDIA H100 80GB HBM3") is None
    assert check_gpu_name(get_pool("h100"), "NVIDIA A100-SXM4-80GB") == (
        "pool 'h100' expected an H100 but the evaluator saw 'NVIDIA A100-SXM4-80GB': "
        "fix the pool's placement (accelerator_type/resources/labels)")
    assert check_gpu_name(get_pool("h20"), "NVIDIA H200") is not None
    assert check_gpu_name(get_pool("l4"), "NVIDIA L40S") is not None
    cpu = get_pool("cpu")
    assert check_gpu_name(cpu, "") is None and check_gpu_name(cpu, "cpu") is None
    assert "expected no GPU" in (check_gpu_name(cpu, "NVIDIA L4") or "")


def _pinned(name: str) -> HardwarePool:
    """The pool as a cluster run pins it: by custom resource and label as well."""
    return dataclasses.replace(get_pool(name), resources={f"eval_{name}": 1.0},
                               labels={"kbx-pool": name})


def test_ray_options() -> None:
    assert ray_options(get_pool("l4")) == {"num_gpus": 1, "accelerator_type": "L4"}
    assert ray_options(get_pool("cpu")) == {"num_gpus": 0}
    assert ray_options(_pinned("a100")) == {
        "num_gpus": 1, "accelerator_type": "A100", "resources": {"eval_a100": 1.0},
        "label_selector": {"kbx-pool": "a100"}}


def test_peak_for_fallbacks() -> None:
    a100, h100 = get_pool("a100"), get_pool("h100")
    assert peak_for(a100, "float32") == 19.5           # CUDA cores, not tf32
    assert peak_for(a100, "tf32") == 156.0
    assert peak_for(a100, "torch.bfloat16") == 312.0   # torch dtype strings work
    assert peak_for(a100, "float8_e4m3fn") == 312.0    # no FP8 tensor cores: runs upcast to fp16
    assert peak_for(h100, "fp8") == 1978.9
    assert peak_for(a100, "float64") == 19.5           # anything else: CUDA-core float32
    no_int8 = dataclasses.replace(a100, peak_tflops={"float32": 19.5, "bfloat16": 312.0})
    assert peak_for(no_int8, "int8") == 624.0 and peak_for(no_int8, "fp16") == 312.0


def read_pools(conf_dir: Path) -> dict[str, HardwarePool]:
    """What the catalogue loader does with conf/hardware, here over the package's pools."""
    return hardware._read_dir(conf_dir, dict(hardware.CATALOGUE))


def test_load_pools_overrides_and_adds(tmp_path: Path) -> None:
    (tmp_path / "a100.yaml").write_text("peak_gbps: 1555\nmemory_gb: 40\n")
    (tmp_path / "t4.yaml").write_text(
        "gpu: Tesla T4\naccelerator_type: T4\npeak_gbps: 320\nname_patterns: [T4]\n"
        "peak_tflops: {float32: 8.1, float16: 65}\n")
    pools = read_pools(tmp_path)
    assert pools["a100"].peak_gbps == 1555.0 and pools["a100"].memory_gb == 40.0
    assert pools["a100"].peak_tflops == get_pool("a100").peak_tflops  # untouched keys stay
    assert pools["t4"].peak_tflops["float16"] == 65.0 and match_pool("Tesla T4", pools).name == "t4"
    assert get_pool("a100").peak_gbps == 2039  # the package catalogue is not modified
    assert get_pool("t4", pools).accelerator_type == "T4"


@pytest.mark.parametrize("text, fragment", [
    ("gpu: X\npeak_gbs: 3\n", "unknown key(s) ['peak_gbs']"),
    ("name: other\ngpu: X\n", "must match the file name"),
    ("peak_gbps: 3\n", "needs at least 'gpu'"),
    ("gpu: X\npeak_gbps: fast\n", "bad value"),
    ("gpu: [unclosed\n", "not valid YAML"),
])
def test_load_pools_rejects_bad_files_naming_the_file(tmp_path: Path, text: str,
                                                      fragment: str) -> None:
    (tmp_path / "mygpu.yaml").write_text(text)
    with pytest.raises(ValueError) as info:
        read_pools(tmp_path)
    assert "mygpu.yaml" in str(info.value) and fragment in str(info.value)


# --- a real two-node Ray cluster: a CPU head and a fake L4 node ---------------------------------

@pytest.fixture(scope="module")
def l4_cluster():  # type: ignore[no-untyped-def]
    import ray
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True,
                      head_node_args={"num_cpus": 1, "include_dashboard": False})
    node = cluster.add_node(num_cpus=1, num_gpus=1,
                            resources={"accelerator_type:L4": 1, "eval_l4": 1},
                            labels={"kbx-pool": "l4"})
    ray.init(address=cluster.address)
    try:
        yield node
    finally:
        ray.shutdown()
        cluster.shutdown()


@pytest.mark.slow  # starts a two-node Ray cluster
def test_pool_actor_lands_on_its_node(l4_cluster) -> None:  # type: ignore[no-untyped-def]
    import ray

    @ray.remote
    class Where:
        def node(self) -> tuple[str, str | None]:
            import os
            return ray.get_runtime_context().get_node_id(), os.environ.get("CUDA_VISIBLE_DEVICES")

    for pool in (get_pool("l4"), _pinned("l4")):
        actor = Where.options(**ray_options(pool)).remote()  # type: ignore[attr-defined]
        assert ray.get(actor.node.remote(), timeout=30) == (l4_cluster.node_id, "0")
        ray.kill(actor)


@pytest.mark.slow  # starts a two-node Ray cluster
def test_pool_available(l4_cluster) -> None:  # type: ignore[no-untyped-def]
    assert pool_available(get_pool("l4")) and pool_available(_pinned("l4"))
    assert pool_available(get_pool("cpu"))
    assert not pool_available(get_pool("a100"))
    assert not pool_available(get_pool("l40s"))
    assert not pool_available(dataclasses.replace(get_pool("l4"), labels={"kbx-pool": "a100"}))
    assert not pool_available(dataclasses.replace(get_pool("l4"), num_gpus_per_actor=2))
    assert pool_available(dataclasses.replace(get_pool("l4"), labels={"kbx-role": "!generation"}))
    assert "a100" in hardware.unavailable_message(get_pool("a100"))


def test_role_cluster_placement_selects_the_pools_evaluation_nodes() -> None:
    """On a kbx-role cluster an evaluator needs its pool's label and resource, not just a GPU
    type (the H100 generation node advertises accelerator_type:H100 too)."""
    h100 = hardware.on_role_cluster(get_pool("h100"))
    opts = ray_options(h100)
    assert opts["label_selector"] == {"kbx-role": "evaluation", "kbx-pool": "h100"}
    assert opts["resources"] == {"eval_h100": 1.0} and opts["accelerator_type"] == "H100"
    gen_labels = {"kbx-role": "generation"}
    assert not hardware.selector_matches(opts["label_selector"], gen_labels)
    assert hardware.on_role_cluster(get_pool("cpu")) == get_pool("cpu")  # no node type of its own
    own = dataclasses.replace(get_pool("a100"), resources={"eval_a100_40g": 1.0},
                              labels={"kbx-pool": "a100_40g"})
    placed = hardware.on_role_cluster(own)  # a pool's own pins win over the defaults
    assert placed.resources == {"eval_a100_40g": 1.0}
    assert placed.labels == {"kbx-role": "evaluation", "kbx-pool": "a100_40g"}


def test_scaling_demand_target_and_concurrency() -> None:
    from kbx_ray.orchestration import scaling
    from kbx_ray.config.compose import load_config

    cfg = load_config(["engine.max_evaluators=16"])
    opts = dict(ray_options(hardware.on_role_cluster(get_pool("l4"))), num_cpus=1)
    demand = scaling.evaluator_demand(opts, 3)
    assert demand.bundles == [{"CPU": 1.0, "GPU": 1.0, "eval_l4": 1.0,
                               "accelerator_type:L4": 0.001}] * 3
    assert demand.selectors == [{"kbx-role": "evaluation", "kbx-pool": "l4"}] * 3
    # while nodes are not up: up to max_evaluators, never more than cells to run
    eng = cfg.engine
    assert scaling.evaluator_target(eng, 0, 1000) == 16
    assert scaling.evaluator_target(eng, 0, 5) == 5
    assert scaling.evaluator_target(eng, 24, 1000) == 24  # the live nodes hold more
    assert scaling.concurrency(eng, 256, 0) == 384 and scaling.concurrency(eng, 4, 0) == 64
    assert scaling.concurrency(eng, 16, 564) == 588  # replicas batch their max_num_seqs too
    assert scaling.concurrency(load_config(["engine.max_concurrency=7"]).engine, 256, 0) == 7
    gen = load_config(["model=qwen2.5-coder-7b"]).model
    g = scaling.generation_demand([gen])
    assert g.bundles and all(b.get("gen") == 1.0 and b.get("GPU") == 1.0 for b in g.bundles)
    assert scaling.replica_slots([gen]) > 0 and not scaling.generation_demand([cfg.model]).bundles
