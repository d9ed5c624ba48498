"""The inputs every task draws stay bit-identical for a seed across a refactor of the task files.

The suite's solutions, recorded results and the secret-seed checks all rest on `make_inputs`
drawing the same bits for the same seed. A change that moves drawing code (issue 21: the helpers
copied into the task files went to `kbx_ray.taskkit`) is checked against a table recorded before
it: set `KBX_INPUT_TABLE` to a JSON path outside the repository; the first run records every
task's cases at `SEEDS` there (and skips), later runs compare. `KBX_INPUT_DEVICE=cuda` draws on
the GPU, `KBX_INPUT_CASES=all` adds the large cases (for the device machine). Without the variable
the test only checks that a digest tells layouts and values apart.

    KBX_INPUT_TABLE=/tmp/inputs.json python -m pytest -q tests/unit/test_task_inputs_stable.py
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pytest
import torch

from kbx_ray.suites.builtin import load_suite
from kbx_ray.suites.task_import import load_module

SEEDS = (0, 1, 2**31 - 2)


def digest(obj: Any, h: Any = None) -> str:
    """A hash of args/kwargs: every tensor's dtype, shape, strides, offset and value bytes (NaNs by
    their bits), and the repr of everything else."""
    h = h or hashlib.sha256()
    if isinstance(obj, torch.Tensor):
        t = obj.detach()
        h.update(f"T{t.dtype}{tuple(t.shape)}{t.stride()}{t.storage_offset()}{t.device.type}".encode())
        flat = t.cpu().contiguous().reshape(-1)
        if flat.is_complex():
            flat = torch.view_as_real(flat).reshape(-1)
        h.update(flat.view(torch.uint8).numpy().tobytes() if flat.numel() else b"")
    elif isinstance(obj, (tuple, list)):
        h.update(f"{type(obj).__name__}{len(obj)}".encode())
        for x in obj:
            digest(x, h)
    elif isinstance(obj, dict):
        h.update(f"dict{len(obj)}".encode())
        for k in sorted(obj):
            h.update(repr(k).encode())
            digest(obj[k], h)
    else:
        h.update(repr(obj).encode())
    return h.hexdigest()[:24]


def table(device: str, every_case: bool) -> dict[str, str]:
    """task/case/seed -> digest of its inputs."""
    out = {}
    for task in load_suite():
        mod = load_module(task.path)
        for case in (c for c in task.cases if every_case or c["small"]):
            for seed in SEEDS:
                out[f"{task.task_id}/{case['name']}/{seed}"] = digest(mod.make_inputs(case, seed, device))
            if device == "cuda":
                torch.cuda.empty_cache()
    return out


def test_digest_tells_layout_and_values_apart() -> None:
    x = torch.arange(12.0).reshape(3, 4)
    assert digest((x,)) == digest((x.clone(),))
    assert len({digest((x,)), digest((x.t().contiguous().t(),)), digest((x + 1,)),
                digest((x.to(torch.float16),)), digest(((x,), {"a": 1}))}) == 5
    nan = torch.tensor([float("nan")])
    assert digest(nan) == digest(nan.clone()) != digest(-nan)


@pytest.mark.skipif(not os.environ.get("KBX_INPUT_TABLE"), reason="KBX_INPUT_TABLE not set")
def test_inputs_match_the_recorded_table() -> None:
    path = Path(os.environ["KBX_INPUT_TABLE"])
    now = table(os.environ.get("KBX_INPUT_DEVICE", "cpu"), os.environ.get("KBX_INPUT_CASES") == "all")
    if not path.exists():
        path.write_text(json.dumps(now, indent=0, sort_keys=True))
        pytest.skip(f"recorded {len(now)} input digests in {path}")
    before = json.loads(path.read_text())
    changed = sorted(k for k in before if now.get(k) != before[k])
    assert set(now) == set(before), f"cases differ: {sorted(set(now) ^ set(before))[:10]}"
    assert not changed, f"{len(changed)} drawn inputs changed, e.g. {changed[:10]}"
