"""What the parent demands of the worker's confinement report (confine.unmet), by setting."""
from __future__ import annotations

import json

from kbx_ray.evaluate.common.confine import Spec, unmet
from kbx_ray.evaluate.parent.spawn import confine_spec
from kbx_ray.evaluate.settings import SandboxConfig


def _report(spec: Spec, **over: object) -> dict:
    """The report of a worker that got everything `spec` asks."""
    rep = {"setsid": True, "rlimits": {k: list(v) for k, v in spec.rlimits().items()},
           "netns": True, "netns_refused": False, "netns_why": "", "userns": False,
           "landlock": spec.landlock, "landlock_abi": 7, "landlock_why": "",
           "no_new_privs": spec.landlock}
    rep.update(over)
    return rep


def test_the_spec_carries_every_limit_of_the_config():
    cfg = SandboxConfig(cpu_seconds=10, file_mb=3, open_files=77, extra_procs=5, memory_gb=2.0)
    spec = confine_spec(cfg)
    assert spec.rlimits()["RLIMIT_CPU"] == (10, 15) and spec.rlimits()["RLIMIT_NOFILE"] == (77, 77)
    assert spec.rlimits()["RLIMIT_FSIZE"] == (3 << 20,) * 2 and spec.memory_bytes == 2 << 30
    assert spec.nproc > 5 and (spec.landlock, spec.landlock_required) == (True, False)
    gpu = confine_spec(SandboxConfig(device="cuda", memory_gb=2.0, landlock="on"))
    assert (gpu.memory_bytes, gpu.landlock, gpu.landlock_required) == (0, True, True)
    assert confine_spec(SandboxConfig(device="cuda")).landlock is True  # auto: GPU workers too
    assert Spec(**json.loads(spec.to_json())) == spec


def test_a_full_report_passes_and_an_empty_one_does_not():
    spec = confine_spec(SandboxConfig())
    assert unmet(spec, _report(spec)) == ""
    assert "no confinement report" in unmet(spec, {})
    assert "own session" in unmet(spec, _report(spec, setsid=False))


def test_a_limit_that_did_not_take_names_its_setting():
    spec = confine_spec(SandboxConfig(open_files=4096))
    rep = _report(spec)
    rep["rlimits"]["RLIMIT_NOFILE"] = "ValueError: not allowed to raise maximum limit"
    why = unmet(spec, rep)
    assert why.startswith("RLIMIT_NOFILE (evaluation.sandbox.open_files) did not take effect")
    assert "\n" not in why


def test_network_namespace_is_demanded_only_where_the_kernel_allows_it():
    spec = confine_spec(SandboxConfig())
    refused = _report(spec, netns=False, netns_refused=True, netns_why="the kernel refused")
    assert unmet(spec, refused) == ""  # the documented fallback: Landlock and the static layer
    lost = _report(spec, netns=False, netns_why="interfaces ['eth0', 'lo'] after unshare")
    assert unmet(spec, lost).startswith("evaluation.sandbox.network=false, but the worker has")
    allowed = confine_spec(SandboxConfig(network=True))
    assert unmet(allowed, _report(allowed, netns=False)) == ""


def test_landlock_on_without_landlock_is_refused_auto_is_not():
    none = {"landlock": False, "landlock_abi": 0, "landlock_why": "this kernel has no Landlock"}
    on = confine_spec(SandboxConfig(landlock="on"))
    why = unmet(on, _report(on, **none))
    assert why.startswith("evaluation.sandbox.landlock=on, but Landlock did not take effect")
    assert "this kernel has no Landlock" in why and "landlock=off" in why
    auto = confine_spec(SandboxConfig(landlock="auto"))
    assert unmet(auto, _report(auto, **none)) == ""
    broken = dict(none, landlock_abi=7, landlock_why="landlock_restrict_self failed: E2BIG")
    assert "landlock=auto, but" in unmet(auto, _report(auto, **broken))
    off = confine_spec(SandboxConfig(landlock="off"))
    assert unmet(off, _report(off, **none)) == ""


def test_auto_confines_gpu_workers_too():
    # a GPU worker without Landlock could write the per-GPU memory ledger under the temp dir
    # (rename another evaluator's reservation, and its honest OOM is no longer "shared")
    for device in ("cpu", "cuda"):
        assert confine_spec(SandboxConfig(landlock="auto", device=device)).landlock
        assert not confine_spec(SandboxConfig(landlock="off", device=device)).landlock
