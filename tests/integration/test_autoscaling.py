"""A sweep on Ray's fake autoscaling cluster, with node types taken from cluster.yaml itself.

Every worker type starts at zero nodes (min_workers: 0), as on AWS. The sweep must ask for what
it needs; the autoscaler starts exactly those node types; evaluators never land on the generation
node (it has H100s too); a node killed mid-sweep costs no cell, and its replacement, which joins
mid-sweep, is used; a stopped sweep resumes to completion.

The fake nodes have no GPU, so evaluators run `engine.mode=noop` (an instant passing verdict) and
the generation backend is a Ray actor that needs the `gen` resource and answers with the task's
reference solution after a short delay (it stands for vLLM, which the fake nodes cannot run).

Ray's `AutoscalingCluster.start()` and `shutdown()` run `ray stop --force`, which would end every
Ray instance on the machine (other tests' too). This subclass starts the head with `ray start
--head --block` in a process group of its own, on a free port and in a private temp dir, and ends
exactly that group and the fake nodes' processes.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import psutil
import pytest
import yaml

# serial: the fake nodes' heartbeats time out after 5 s (AUTOSCALER_HEARTBEAT_TIMEOUT_S), which a
# test running beside it on a 2-core box can starve; .ci/run runs it after the two-worker part
pytestmark = [pytest.mark.slow, pytest.mark.serial]

ROOT = Path(__file__).resolve().parents[2]
# plenty of cells: the first run is stopped by the test once the node loss has played out
TASKS = sorted(p.parent.relative_to(ROOT / "tasks").as_posix()
               for p in (ROOT / "tasks").glob("*/*/solution.py"))[:48]
POOLS = {"h100": "eval.h100x8", "a100": "eval.a100x8"}
GEN_TYPE = "gen.h100x8"
GEN_OPTIONS: dict[str, Any] = {}  # the test's generation backend: delay_s, stop_file


def scaled_node_types() -> tuple[dict[str, Any], dict[str, str]]:
    """cluster.yaml's head, generation and two evaluation types, scaled to one CPU and one fake GPU
    each (custom resources likewise), min_workers 0; labels and accelerator types kept as written."""
    raw = yaml.safe_load((ROOT / "cluster.yaml").read_text())
    types = raw["available_node_types"]
    out: dict[str, Any] = {}
    for name in (GEN_TYPE, *POOLS.values()):
        res = {k: min(int(v), 1) for k, v in types[name]["resources"].items()}
        out[name] = {"resources": res, "labels": dict(types[name]["labels"]), "node_config": {},
                     "min_workers": 0, "max_workers": 3 if name == POOLS["h100"] else 1}
    return out, dict(types[raw["head_node_type"]]["labels"])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PrivateAutoscalingCluster:
    """ray.cluster_utils.AutoscalingCluster without `ray stop --force` (see the module docstring)."""

    def __init__(self, root: Path, head_labels: dict[str, str], node_types: dict[str, Any]) -> None:
        from ray._private.services import get_node_ip_address

        self.root, self.port = root, _free_port()
        self.address = f"{get_node_ip_address()}:{self.port}"
        self.head_labels = head_labels
        config = {
            "cluster_name": "kbx-fake", "max_workers": 6, "idle_timeout_minutes": 5,
            "upscaling_speed": 10.0, "auth": {"ssh_user": "ubuntu"}, "docker": {},
            "provider": {"type": "fake_multinode", "use_node_id_as_ip": True,
                         "disable_node_updaters": True, "disable_launch_config_check": True,
                         "gcs_address": self.address},
            "head_node_type": "ray.head.default",
            "available_node_types": {**node_types, "ray.head.default": {
                "resources": {"CPU": 1}, "node_config": {}, "max_workers": 0}},
            **{k: [] for k in ("cluster_synced_files", "rsync_exclude", "rsync_filter",
                               "initialization_commands", "setup_commands", "head_setup_commands",
                               "worker_setup_commands", "head_start_ray_commands",
                               "worker_start_ray_commands")},
            "file_mounts": {}, "file_mounts_sync_continuously": False,
        }
        self.config_path = root / "autoscaling.json"
        self.config_path.write_text(json.dumps(config))
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        cmd = [str(Path(sys.executable).parent / "ray"), "start", "--head", "--block",
               f"--port={self.port}", f"--temp-dir={self.root / 'ray'}", "--num-cpus=1",
               "--num-gpus=0", f"--autoscaling-config={self.config_path}",
               "--include-dashboard=false", "--disable-usage-stats",
               f"--labels={json.dumps(self.head_labels)}"]
        env = dict(os.environ, RAY_FAKE_CLUSTER="1", AUTOSCALER_UPDATE_INTERVAL_S="1",
                   AUTOSCALER_HEARTBEAT_TIMEOUT_S="5", RAY_AUTH_MODE="disabled")
        with open(self.root / "head.log", "w") as out:
            self.proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT,
                                         start_new_session=True)

    def node_pids(self, node_id: str | None = None) -> list[int]:
        """Processes of the fake worker nodes (all, or one node's): the raylet and its children
        carry the node id the fake provider gave them in their environment."""
        pids = []
        for proc in psutil.Process(self.proc.pid).children(recursive=True) if self.proc else []:
            try:
                nid = proc.environ().get("RAY_OVERRIDE_NODE_ID_FOR_TESTING")
            except (psutil.Error, OSError):
                continue
            if nid and (node_id is None or nid == node_id):
                pids.append(proc.pid)
        return pids

    def kill_node(self, node_id: str) -> int:
        """Terminate one node as a cloud would: every process of it, at once."""
        pids = self.node_pids(node_id)
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return len(pids)

    def shutdown(self) -> None:
        children = []
        if self.proc is not None:
            try:
                children = psutil.Process(self.proc.pid).children(recursive=True)
            except psutil.Error:
                pass
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(5)  # it drains for up to 30 s otherwise; nothing here needs that
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
        for proc in children:  # the monitor's fake nodes, which may have left the group
            try:
                proc.kill()
            except psutil.Error:
                pass


def test_elastic_group_grows_onto_joining_evaluation_nodes_only(tmp_path):
    """A node of the pool's type that joins beyond what the group asked for is taken up by `grow`
    (the engine calls it every 30 s); the H100-style trap, a generation node with the same GPU
    type, is never counted nor used. Runs first: it starts and ends its own (non-autoscaling) Ray."""
    import asyncio

    import ray
    from ray.cluster_utils import Cluster

    from kbx_ray.config.compose import load_config
    from kbx_ray.config.hardware import get_pool
    from kbx_ray.orchestration.evaluator_group import EvaluatorGroup
    from kbx_ray.suites.builtin import get_task
    from tests.conftest import make_candidate

    node_types, head_labels = scaled_node_types()
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "labels": head_labels,
                                                      "include_dashboard": False})

    def add(type_name: str) -> Any:
        res = dict(node_types[type_name]["resources"])
        return c.add_node(num_cpus=res.pop("CPU"), num_gpus=res.pop("GPU"), resources=res,
                          labels=node_types[type_name]["labels"])

    first, gen = add(POOLS["h100"]), add(GEN_TYPE)
    c.wait_for_nodes()
    ray.init(address=c.address, configure_logging=False, log_to_driver=False)
    cfg = load_config([f"output_dir={tmp_path}", "engine.mode=noop", "evaluation.device=cpu",
                       "engine.max_evaluators=1", "engine.eval_batch=1"])
    task = get_task("activation/relu")
    cand = make_candidate(task.task_id, task.name, open(task.solution_path).read())
    group = EvaluatorGroup(get_pool("h100"), cfg.engine, cfg.evaluation, n_todo=100)

    async def scenario() -> tuple[int, int, set[str]]:
        await group.start()
        before = group.grow()  # one H100 evaluation node, one evaluator: nothing to add
        second = add(POOLS["h100"])
        c.wait_for_nodes()
        added = group.grow()
        deadline = time.monotonic() + 60
        while group.stats.up < 2 and time.monotonic() < deadline:
            await group.evaluate(task, cand)  # the dispatchers run while the new one comes up
            await asyncio.sleep(0.2)
        results = await asyncio.gather(*(group.evaluate(task, cand) for _ in range(16)))
        assert second.node_id in {r.node_id for r in results}
        return before, added, {r.node_id for r in results}

    try:
        assert group.elastic and len(group.actors) == 1
        before, added, used = asyncio.run(scenario())
        assert (before, added, len(group.actors), group.stats.up) == (0, 1, 2, 2)
        assert gen.node_id not in used and first.node_id in used
    finally:
        group.close()
        ray.shutdown()
        c.shutdown()


@dataclass
class GenPlacement:
    """The test backend's options (`model.options.*`): where its one actor runs."""

    resources: dict[str, float] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)


def _gen_replicas(cfg: Any) -> Any:
    """Its `gpus=` capability: one replica holding no GPU, placed by its options."""
    opts = cfg.typed_options()
    return SimpleNamespace(replicas=1, gpus_per_replica=0, accelerator_type=None,
                           resources=dict(opts.resources), labels=dict(opts.labels),
                           max_inflight=64)


def _gen_backend_factory(cfg: Any) -> Any:
    """A generation backend placed like vLLM on cluster.yaml (needs `gen`, kbx-role=generation):
    an actor answering with the reference solution after `delay_s`, and failing while the test's
    stop file exists (a sweep interrupted mid-way)."""
    import ray

    from kbx_ray.llm.reference import build as build_reference

    opts = dict(GEN_OPTIONS)

    @ray.remote
    class GenActor:
        def __init__(self) -> None:
            self.ref = build_reference(cfg)

        async def generate(self, messages: Any, params: Any) -> Any:
            import asyncio

            if os.path.exists(opts["stop_file"]):
                raise RuntimeError("sweep stopped by the test")
            await asyncio.sleep(float(opts["delay_s"]))
            return await self.ref.generate(messages, params)

    placement = _gen_replicas(cfg)
    actor = GenActor.options(num_cpus=1, resources=placement.resources,
                             label_selector=placement.labels, max_concurrency=64).remote()

    class Backend:
        name = cfg.name

        async def generate(self, messages: Any, params: Any) -> Any:
            return await actor.generate.remote(messages, params)

    return Backend()


@pytest.fixture(scope="module")
def fake_cluster():
    import ray

    node_types, head_labels = scaled_node_types()
    root = Path("/tmp") / f"kbxas-{os.getpid()}"  # short: Ray's socket paths have a length limit
    root.mkdir(exist_ok=True)
    os.environ["RAY_AUTH_MODE"] = "disabled"  # this private cluster only; the head runs so too
    c = PrivateAutoscalingCluster(root, head_labels, node_types)
    c.start()
    try:
        deadline = time.time() + 90
        while True:
            try:
                ray.init(address=c.address, configure_logging=False, log_to_driver=False)
                break
            except Exception:  # noqa: BLE001 - the head is still starting
                if time.time() > deadline:
                    raise
                time.sleep(1)
        yield c
    finally:
        ray.shutdown()
        c.shutdown()
        os.environ.pop("RAY_AUTH_MODE", None)
        shutil.rmtree(root, ignore_errors=True)


def _nodes() -> dict[str, dict[str, Any]]:
    import ray

    return {n["NodeID"]: n for n in ray.nodes()}


def _types_of(nodes: dict[str, dict[str, Any]]) -> dict[str, str]:
    """node id -> the cluster.yaml type it was launched as (its labels say it)."""
    by_labels = {json.dumps(t["labels"], sort_keys=True): name
                 for name, t in scaled_node_types()[0].items()}
    return {nid: by_labels.get(json.dumps(n.get("Labels") and {
        k: v for k, v in n["Labels"].items() if k.startswith("kbx-")}, sort_keys=True), "head")
        for nid, n in nodes.items()}


def test_sweep_scales_up_places_by_role_survives_a_node_loss_and_resumes(fake_cluster, tmp_path,
                                                                         monkeypatch, caplog):
    from kbx_ray.orchestration import engine
    from kbx_ray.config.compose import load_config
    from kbx_ray.llm import base
    from kbx_ray.registry import Entry
    from kbx_ray.sinks import read_table

    c = fake_cluster
    assert set(_types_of(_nodes()).values()) == {"head"}  # min_workers 0: nothing runs yet
    monkeypatch.setitem(base.REGISTRY, "gen_test", Entry(
        "backend", "gen_test", f"{__name__}:_gen_backend_factory", gpus=_gen_replicas,
        options=GenPlacement))
    stop_file = tmp_path / "stop"
    monkeypatch.setitem(GEN_OPTIONS, "delay_s", 1.5)
    monkeypatch.setitem(GEN_OPTIONS, "stop_file", str(stop_file))
    overrides = [f"output_dir={tmp_path}", "hardware=[h100,a100]", "engine.mode=noop",
                 "evaluation.device=cpu", "sink.wandb.mode=disabled", f"suite.include=[{','.join(TASKS)}]",
                 "model.backend=gen_test", "model.name=gen_test",
                 "model.options={resources: {gen: 1}, labels: {kbx-role: generation}}",
                 "engine.max_evaluators=2", "engine.max_concurrency=2", "engine.flush_every=1",
                 "engine.flush_min_s=0", "engine.actor_ready_s=120", f"engine.ray_address={c.address}"]
    cfg = load_config(overrides)
    killed: dict[str, Any] = {}

    def chaos() -> None:
        """Once a few cells are recorded, kill one h100 node; once a node that joined after the
        kill has evaluated, stop the sweep (the resume finishes it)."""
        deadline = time.time() + 240
        while time.time() < deadline and len(list(tmp_path.rglob("evaluations/part-*"))) < 3:
            time.sleep(0.3)
        nodes = _nodes()
        h100 = sorted(n for n, t in _types_of(nodes).items()
                      if t == POOLS["h100"] and nodes[n]["Alive"])
        killed["before"] = set(nodes)
        killed["node"] = h100[0]
        killed["pids"] = c.kill_node(h100[0])
        while time.time() < deadline:
            joined = set(_nodes()) - killed["before"]
            if joined and _evaluated_on(tmp_path, joined):
                killed["joined"] = joined
                break
            time.sleep(0.5)
        stop_file.touch()

    thread = threading.Thread(target=chaos, daemon=True)
    thread.start()
    t0 = time.time()
    with pytest.raises(RuntimeError, match="stopped by the test"):
        engine.run_sweep(cfg)
    thread.join(timeout=10)
    first = time.time() - t0
    assert killed.get("pids"), "the h100 node to kill was not found"
    assert killed.get("joined"), "no node that joined after the kill evaluated a candidate"
    lost = [r.getMessage() for r in caplog.records
            if r.name == "kbx_ray.orchestration.evaluator_group"]
    # what the lost node held was queued again as a node loss, not as the candidates' failures
    assert any("lost an evaluator with its node" in m for m in lost), lost
    assert not any(" died on " in m for m in lost), lost

    stop_file.unlink()
    GEN_OPTIONS["delay_s"] = 0.05
    p = engine.run_sweep(load_config(overrides))
    ev, gen = read_table(p.sweep_dir, "evaluations"), read_table(p.sweep_dir, "generations")
    nodes = _nodes()
    types = _types_of(nodes)
    # every cell, on both pools, exactly once: the node loss and the stop cost nothing
    assert sorted(zip(ev.task_id, ev.hardware)) == sorted((t, h) for t in TASKS for h in POOLS)
    assert len(gen) == len(TASKS) and gen.cell_id.is_unique
    assert ev.exec_ok.all()
    # the autoscaler started the types the sweep asked for, and evaluators ran only on theirs
    assert {GEN_TYPE, *POOLS.values()} <= set(types.values())
    for hw, node_type in POOLS.items():
        assert {types[n] for n in ev[ev.hardware == hw].node_id} == {node_type}, hw
    assert not any(types[n] == GEN_TYPE for n in ev.node_id)
    assert set(ev.node_id) & killed["joined"]
    assert not nodes[killed["node"]]["Alive"]
    print(f"first run {first:.1f} s, nodes {sorted(set(types.values()))}")


def _evaluated_on(out: Path, node_ids: set[str]) -> bool:
    import pyarrow.parquet as pq

    for part in out.rglob("evaluations/part-*.parquet"):
        try:
            if set(pq.read_table(part, columns=["node_id"]).column("node_id").to_pylist()) & node_ids:
                return True
        except (OSError, ValueError):
            continue
    return False


def test_dry_run_states_the_repair_imbalance_across_pools(tmp_path):
    """Every repair round runs on the primary pool; the plan says so, with the factor."""
    from kbx_ray.orchestration import engine
    from kbx_ray.config.compose import load_config

    base = [f"output_dir={tmp_path}", "suite.include=[activation/relu]", "sink.wandb.mode=disabled"]
    repair = engine.describe(engine.plan(load_config(
        [*base, "method=repair", "method.rounds=4", "hardware=[h100,a100]"])))
    assert "imbalance: pool h100 evaluates up to 5 candidates per cell" in repair
    assert "imbalance" not in engine.describe(engine.plan(load_config(
        [*base, "method=one_shot", "hardware=[h100,a100]"])))
    assert "imbalance" not in engine.describe(engine.plan(load_config(
        [*base, "method=repair", "method.rounds=4", "hardware=[h100]"])))
