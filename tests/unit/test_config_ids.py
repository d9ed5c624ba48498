"""Cell ids and the sweep identity's method and model parts are what they were before backend and
method settings moved into each kind's typed `options`: a sweep folder recorded then resumes.

Each case is a command line of today's keys; the literals were computed by the code before the move
(commit fee9ad9) from the same settings under their old keys (`model.engine.*`, `model.replicas`,
`model.base_url`, `method.branches`, ...): the first cell id, a digest of all of them, and a digest
of identity.json's `model.*`, `method.*` and `variants.*` keys.
"""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from kbx_ray.config.compose import load_config
from kbx_ray.errors import ConfigError
from kbx_ray.orchestration.grid import build_axes, iter_cells
from kbx_ray.records.sweep_folder import identity_key
from kbx_ray.types import stable_hash

TASKS = [SimpleNamespace(task_id="activation/relu", task_hash="0123abcd"),
         SimpleNamespace(task_id="math/exp", task_hash="4567ef01")]

CASES = [  # name, overrides, first cell id, digest of the sorted ids, identity digest, cells
    ("default", [],
     "2d47b11e51775298", "00d17f1a2bc9cb2b", "0e3f6cf0581ea25a", 4),
    ("few_shot", ["method=few_shot"],
     "0d22f7c38ff1930e", "c39787328e362578", "a647ce05f2502e21", 4),
    ("few_shot_k3", ["method=few_shot", "method.options.exemplars=3"],
     "0dbbda3800e0ed17", "84d4886c99575e0c", "13f9b9a53a68a55b", 4),
    ("cot", ["method=cot"],
     "30621631df95e816", "49d214e0694c0758", "67792e34248e48ac", 4),
    ("repair_r5", ["method=repair", "method.rounds=5"],
     "0a495bfa92a6aa6d", "5b0c8cce3863bf01", "4f8f01f453acce43", 4),
    ("best_of_n", ["method=best_of_n"],
     "3d3cd53fd0890b2a", "ec22b6db237f2098", "b755f3986f0fbd72", 4),
    ("best_of_n_8", ["method=best_of_n", "method.options.branches=8"],
     "13cb2098de513e1e", "5d44951a68ed114f", "7f01ac1d3a516044", 4),
    ("geak", ["method=geak"],
     "121b22e904f053aa", "c6c78b2b950c099b", "1efbc89b18d9f0a8", 4),
    ("kernelagent", ["method=kernelagent"],
     "4361f6add170f09d", "95837c8bef4443c7", "8ed0d978d48b0465", 4),
    ("repair_cot_exemplars", ["method=repair", "method.options.cot=true",
      "method.options.exemplars=1"],
     "034027c2dc0ade9e", "843ffa11f33c318d", "de010dcfdfcc0d9f", 4),
    ("ablation", ["sweep.methods=[repair,parallel,agentic,one_shot]", "sweep.rounds=[1,2]"],
     "06620188a2c63414", "db9e5bc57e26474b", "4213f0071b846432", 28),
    ("qwen7b_engine", ["model=qwen2.5-coder-7b", "model.options.engine.max_model_len=8192",
      "model.options.engine.gpu_memory_utilization=0.8", "model.options.replicas=2"],
     "06c2d12d28d1a296", "75e23bb1273fdad0", "cf9c34a3860d6b89", 4),
    ("qwen32b_placement", ["model=qwen2.5-coder-32b",
      "model.options.placement.accelerator_type=H100", "model.options.max_restarts=4"],
     "53e0ba3fc8fb3791", "f7583cfa6cf5d0cb", "96ea1e366b8aa770", 4),
    ("tiny", ["model=tiny"],
     "2af6eb94a995aaa6", "6541e6ccfb060cdc", "95fde1118547e708", 4),
    ("tiny_sampling", ["model=tiny", "model.options.sampling={top_k: 20}",
      "model.options.engine.seed=3"],
     "7bb0e0f4b075a474", "c96318ecc1316f57", "4622e9d84ea6e195", 4),
    ("openai_base_url", ["model=openai", "model.options.base_url=http://gpu-box:9000/v1",
      "model.options.api_key_env=MY_KEY", "model.path=qwen"],
     "50760e3c1c333e9f", "d0640e4cc5123b2c", "29cf5a0271c6cd94", 4),
    ("openai_concurrency", ["model=openai", "model.options.concurrency=8"],
     "01019579ca5f7424", "8f5f920d94829667", "4fe9206d7ab94c1c", 4),
    ("replay", ["model=replay", "model.options.path=results/x"],
     "0a33b725a5b45acd", "405d2471bf978e56", "cd8f540b9ba5f733", 4),
    ("models_axis", ["sweep.models=[qwen2.5-coder-7b,kernelllm,tiny]", "method=repair"],
     "2685c28f62a6e123", "e491bcf4a7a26acd", "1011ccd5ad74c1fc", 12),
]


@pytest.mark.parametrize("name, overrides, first, cells, ident, n", CASES,
                         ids=[c[0] for c in CASES])
def test_ids_are_those_recorded_before_options_were_typed(name, overrides, first, cells, ident, n):
    cfg = load_config([*overrides, "sweep.samples=2"])
    axes = build_axes(cfg)
    ids = sorted(c.cell_id for c in iter_cells(axes, TASKS, ["cpu"]))
    assert (ids[0], stable_hash(ids), len(ids)) == (first, cells, n)
    key = identity_key(cfg, axes)
    assert stable_hash({k: v for k, v in key.items()
                        if k.startswith(("model.", "method.", "variants."))}) == ident


def test_a_setting_that_changes_a_verdict_still_changes_the_ids():
    """The layout is kept, not the values: another engine argument is another cell."""
    base = load_config(["model=qwen2.5-coder-7b", "sweep.samples=2"])
    other = load_config(["model=qwen2.5-coder-7b", "sweep.samples=2",
                         "model.options.engine.max_model_len=4096"])
    a, b = ({c.cell_id for c in iter_cells(build_axes(x), TASKS, ["cpu"])} for x in (base, other))
    assert a.isdisjoint(b)


@pytest.mark.parametrize("old, new", [
    ("model.engine.max_model_len=8192", "model.options.engine.<key>"),
    ("model.placement.accelerator_type=H100", "model.options.placement.<key>"),
    ("model.replicas=2", "model.options.replicas"),
    ("model.base_url=http://h:9/v1", "model.options.base_url"),
    ("model.api_key_env=KEY", "model.options.api_key_env"),
    ("method.branches=3", "method.options.branches"),
    ("method.exemplars=1", "method.options.exemplars"),
    ("method.cot=true", "method.options.cot"),
])
def test_an_old_key_names_its_new_place_in_one_line(old, new):
    with pytest.raises(ConfigError) as e:
        load_config([old])
    key = old.split("=")[0].rsplit(".", 1)[0] if old.startswith("model.engine") or \
        old.startswith("model.placement") else old.split("=")[0]
    assert str(e.value).startswith(f"{key} in the command line has moved: set {new} (")
    assert "\n" not in str(e.value)
