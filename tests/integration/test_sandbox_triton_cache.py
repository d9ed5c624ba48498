"""No writable path outlives a worker: each worker's Triton cache is its own, inside its temp dir,
gone when the worker ends; a later worker neither sees what a candidate wrote there nor anything
it wrote elsewhere (Landlock refuses writes outside the temp dir on CPU workers). Ahead-of-time
kernels are copied in by the parent, into the live worker and again into a respawned one."""
from __future__ import annotations

from pathlib import Path

import pytest

from kbx_ray.evaluate.parent.evaluator import EvalConfig, Evaluator
from kbx_ray.evaluate.common import landlock
from kbx_ray.suites.builtin import get_task
from tests.conftest import make_candidate

RELU = get_task("activation/relu")
KEY = "PLANTEDKEY0123456789"

# writes with numpy's and torch's own file methods, as a candidate past the static layer would
PLANT = '''
import os
import torch
import triton
import triton.language as tl


@triton.jit
def _k(x_ptr):
    pass


def relu(x):
    _k[(1,)](x)
    mine = os.path.join(os.environ["TRITON_CACHE_DIR"], "{key}")
    t = torch.ones(4)  # not the input's values: only the write is under test here
    done = []
    for path, write in ((os.path.join(mine, "a.json"), lambda p: t.numpy().dump(p)),
                        (os.path.join(mine, "b.bin"), lambda p: t.numpy().tofile(p)),
                        (os.path.join(mine, "c.npy"), lambda p: t.numpy().dump(p)),
                        (os.path.join({shared!r}, "{key}", "a.json"), lambda p: t.numpy().dump(p))):
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            write(path)
            done.append("wrote")
        except OSError:
            done.append("denied")
    raise RuntimeError("plant: " + ",".join(done))
'''

# a later candidate looks for what the first one left in the cache and in the old shared one
LOOK = '''
import os
import triton
import triton.language as tl


@triton.jit
def _k(x_ptr):
    pass


def relu(x):
    _k[(1,)](x)
    found = [p for p in (os.path.join(os.environ["TRITON_CACHE_DIR"], "{key}"),
                         os.path.join({shared!r}, "{key}")) if os.path.exists(p)]
    raise RuntimeError("look: " + (",".join(found) or "nothing"))
'''


@pytest.fixture(scope="module")
def ev():
    e = Evaluator(EvalConfig(device="cpu", case_timeout_s=60, load_timeout_s=60, unseen_cases=0))
    yield e
    e.close()


def _eval(ev: Evaluator, code: str):
    return ev.evaluate(RELU, make_candidate(RELU.task_id, "relu", code))


@pytest.mark.skipif(landlock.abi_version() < 1, reason="needs Landlock")
def test_a_file_written_by_a_candidate_dies_with_its_worker(ev, static_off, tmp_path):
    shared = tmp_path / "node_cache"  # where a node-wide cache would be: outside every worker
    shared.mkdir()
    res = _eval(ev, PLANT.format(key=KEY, shared=str(shared)))
    assert res.error_kind == "runtime_error", res.error_msg
    assert "plant: wrote,wrote,wrote,denied" in res.error_msg, res.error_msg
    cache = Path(ev.sandbox.home) / "triton_cache"
    assert sorted(p.name for p in (cache / KEY).iterdir()) == ["a.json", "b.bin", "c.npy"]
    assert list(shared.iterdir()) == []  # Landlock: nothing outside the worker's temp dir
    ev.sandbox.kill()
    assert not cache.exists()  # gone with the worker
    res = _eval(ev, LOOK.format(key=KEY, shared=str(shared)))
    assert "look: nothing" in res.error_msg, res.error_msg
    assert Path(ev.sandbox.home) / "triton_cache" != cache


def test_ahead_of_time_kernels_reach_the_live_worker_and_a_respawned_one(ev):
    files = {f"{'A' * 20}/k.json": b"{}", "../escape": b"x"}
    with pytest.raises(ValueError):
        ev.sandbox.seed_triton(files)  # only <key>/<file> names
    files.pop("../escape")
    ev.sandbox.start()
    assert ev.sandbox.seed_triton(files) == 1
    cache = Path(ev.sandbox.home) / "triton_cache"
    assert (cache / f"{'A' * 20}" / "k.json").is_file()
    ev.sandbox.kill()
    ev.sandbox.start()  # a respawn for the same candidate gets them again, in its own cache
    assert (Path(ev.sandbox.home) / "triton_cache" / f"{'A' * 20}" / "k.json").is_file()
    ev.sandbox.seed_triton({})  # the next candidate has none: a later worker gets nothing
    ev.sandbox.kill()
    ev.sandbox.start()
    assert not (Path(ev.sandbox.home) / "triton_cache" / f"{'A' * 20}").exists()
