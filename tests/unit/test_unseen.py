"""kbx_ray.unseen: what a shape family's draw keeps (equal dims, order, multiples, bounds, held keys)."""
from __future__ import annotations

import random
from types import SimpleNamespace

from kbx_ray import unseen


def _task(cases, **fam):
    def cost(c):
        n = 1
        for k in ("m", "n", "k", "d", "h", "g"):
            n *= c.get(k, 1)
        for s in c.get("shape", []):
            n *= s
        return {"flops": 0, "bytes": 4 * n}
    return SimpleNamespace(CASES=cases, cost=cost, SHAPES=unseen.family(**fam) if fam else None)


def _draw(mod, seed, small=True):
    (c,) = unseen.cases(mod, mod.CASES, 1, random.Random(seed), small)
    return c


def test_equal_sizes_stay_equal_order_holds_and_one_passes_the_public_maximum():
    cases = [{"name": "a", "small": True, "m": 64, "n": 64, "k": 30},
             {"name": "b", "small": True, "m": 8, "n": 100, "k": 1}]
    mod = _task(cases)
    for seed in range(20):
        c = _draw(mod, seed)
        assert c["unseen"] == "a" and c["m"] == c["n"] and c["k"] < c["m"]
        assert all(v % 2 for v in (c["m"], c["k"])) and c["m"] > 100 or c["k"] > 30
        assert mod.cost(c)["bytes"] <= unseen.CPU_GROWTH * mod.cost(cases[0])["bytes"]


def test_multiples_bounds_held_keys_and_size_one_edges():
    cases = [{"name": "a", "small": True, "shape": [1, 10, 96], "group": 32, "d": 250, "h": 8}]
    mod = _task(cases, multiple={"shape.-1": "group"}, most={"d": 256}, hold=("h",))
    for seed in range(20):
        c = _draw(mod, seed)
        assert c["shape"][0] == 1 and c["shape"][1] % 2 == 1 and c["shape"][1] > 10 or \
            c["shape"][2] > 96
        assert c["shape"][2] % 32 == 0 and c["d"] in (250, 251, 253, 255) and c["h"] == 8
        assert c["group"] == 32  # axes, groups and constants (NOT_SIZES) never move


def test_fixed_families_and_external_problems_draw_nothing():
    mod = _task([{"name": "a", "small": True, "m": 9}], fixed="fixed by the problem")
    assert unseen.cases(mod, mod.CASES, 1, random.Random(0), True) == []
    assert unseen.family_of(SimpleNamespace(ENTRY="f")).fixed
