"""kbx_ray.unseen: what a family's draw varies (each size class even or odd, a power of two or not,
past the public maximum; dtype and layout from the public values; a no-input task's arguments)
and what it keeps (structural ties, multiples, bounds, held keys, size-1 edges, the memory bound,
draws the task can make)."""
from __future__ import annotations

import itertools
import random
from types import SimpleNamespace

import torch

from kbx_ray import unseen
from kbx_ray.cases import footprint

_IDS = itertools.count()


def _task(cases, **fam):
    """A task whose reference is a matmul of an [m, k] and a [k, n] operand (k is structural),
    `view` "t" a transposed a (2-D only), cost by elements."""
    def make_inputs(case, seed, device):
        shape = [case["m"], case["k"]]
        a = torch.empty(shape[::-1] if case.get("view") == "t" else shape, dtype=getattr(torch, case["dtype"]))
        a = a.transpose(-1, -2) if case.get("view") == "t" else a
        return (a, torch.empty(case["k2"], case["n"], dtype=a.dtype)), {}

    def mm(a, b):
        return a @ b

    def cost(c):
        size = torch.tensor([], dtype=getattr(torch, c["dtype"])).element_size()
        return {"flops": 0, "bytes": size * (c["m"] * c["k"] + c["k2"] * c["n"] + c["m"] * c["n"])}
    n = next(_IDS)
    return SimpleNamespace(CASES=cases, cost=cost, make_inputs=make_inputs, mm=mm,
                           __file__=f"/tasks/t{n}/mm/task.py", __name__=f"test_unseen_{n}",
                           SHAPES=unseen.family(**fam) if fam else None)


CASES = [{"name": "a", "small": True, "m": 64, "n": 64, "k": 30, "k2": 30, "dtype": "float32"},
         {"name": "b", "small": True, "m": 8, "n": 100, "k": 1, "k2": 1, "dtype": "float16",
          "view": "t"},
         {"name": "c", "small": True, "m": 40, "n": 3, "k": 50, "k2": 50, "dtype": "float16"}]


def _draws(mod, n=40, small=True):
    return [unseen.cases(mod, mod.CASES, 1, random.Random(seed), small)[0] for seed in range(n)]


def test_each_size_class_is_drawn_on_its_own_and_every_draw_is_one_the_task_can_make():
    mod = _task(CASES)
    draws = _draws(mod)
    limit = unseen.CPU_GROWTH * max(footprint.size(mod, c) for c in CASES)
    for c in draws:
        assert c["k"] == c["k2"]  # equal in every public case: structural
        assert c["m"] > 64 or c["n"] > 100 or c["k"] > 50  # past the public maximum somewhere
        assert footprint.size(mod, c) <= limit and footprint.check(mod, c, True) == "ok"
        mod.mm(*mod.make_inputs(c, 0, "cpu")[0])
    sizes = [c[k] for c in draws for k in ("m", "n", "k")]
    assert any(v % 2 == 0 for v in sizes) and any(v % 2 for v in sizes)  # even and odd
    assert any(v & (v - 1) == 0 for v in sizes) and any(v & (v - 1) for v in sizes)  # 2^j or not
    assert any(c["m"] != c["n"] for c in draws if c["unseen"] == "a")  # equal only in the base
    for key, top in (("m", 64), ("n", 100), ("k", 50)):  # every dimension passes its maximum
        assert any(c[key] > top for c in draws), key


def test_dtype_and_layout_come_from_the_public_cases_whatever_the_base():
    draws = _draws(_task(CASES))
    assert {c["dtype"] for c in draws} == {"float32", "float16"}
    assert {c.get("view") for c in draws} == {None, "t"}
    only = _task(CASES, vary=())  # a family that names no variant keys keeps the base's
    assert {(c["dtype"], c.get("view")) for c in _draws(only, 10)} == {("float32", None)}


def test_multiples_bounds_held_keys_and_size_one_edges():
    cases = [{"name": "a", "small": True, "m": 1, "n": 96, "k": 250, "k2": 250, "dtype": "float32",
              "h": 8, "group": 32}]
    mod = _task(cases, multiple={"n": "group"}, most={"k": 256, "k2": 256}, hold=("h",))
    for c in _draws(mod, 20):
        assert c["m"] == 1 and c["n"] % 32 == 0 and c["k"] <= 256 and c["h"] == 8
        assert c["group"] == 32  # axes, groups and constants (NOT_SIZES) never move
        assert c["n"] > 96 or c["k"] > 250


def test_no_input_arguments_are_drawn_from_the_declared_family():
    cases = [{"name": "a", "small": True, "m": 64, "n": 64, "k": 30, "k2": 30, "dtype": "float32",
              "alpha": 1.0, "beta": 2.0}]
    table = _task(cases, values={"alpha": (-3.0, 3.0), "beta": (1, 4)})
    drawn = _draws(table, 10)
    assert len({c["alpha"] for c in drawn}) == 10 and all(-3 <= c["alpha"] <= 3 for c in drawn)
    assert all(isinstance(c["beta"], int) and 1 <= c["beta"] <= 4 for c in drawn)
    fn = _task(cases, values=lambda rng, case: {"alpha": case["alpha"] + rng.random()})
    assert all(1.0 <= c["alpha"] < 2.0 for c in _draws(fn, 5))


def test_fixed_families_and_external_problems_draw_nothing():
    mod = _task(CASES, fixed="fixed by the problem")
    assert unseen.cases(mod, mod.CASES, 1, random.Random(0), True) == []
    assert unseen.family_of(SimpleNamespace(ENTRY="f")).fixed


def test_an_order_between_sizes_holds_in_every_draw():
    """Causal attention's queries are the last Sq of Sk keys: a draw with Sq > Sk masks whole rows,
    and the reference returns NaN there, failing an honest kernel (seen on an H100). The family's
    `order` keeps Sq <= Sk; without it some of these same draws broke the contract."""
    from kbx_ray.suites.builtin import get_task
    from kbx_ray.suites.task_import import load_module

    fam = unseen.family(order=(("sq", "sk"),))
    assert fam.holds({"sq": 3, "sk": 3}) and not fam.holds({"sq": 4, "sk": 3})
    for tid in ("fusion/causal_softmax", "fusion/grouped_query_attention"):
        task = get_task(tid)
        mod = load_module(task.path)
        assert unseen.family_of(mod).order == (("sq", "sk"),)
        drawn = [c for seed in range(12) for small in (True, False)
                 for c in unseen.cases(mod, task.cases, 1, random.Random(seed), small)]
        assert len(drawn) == 24
        assert all(c["sq"] <= c["sk"] for c in drawn), [(c["sq"], c["sk"]) for c in drawn]
        assert any(c["sq"] > max(p["sq"] for p in task.cases) or
                   c["sk"] > max(p["sk"] for p in task.cases) for c in drawn)  # still unseen sizes
