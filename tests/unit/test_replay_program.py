"""The replay's instruction set: the program format parsed strictly (program.py), the steps the
replayer performs itself (worker/replayer.py), and the kernel module it builds (static/kernels.py).
The recording comes from the candidate's process, so each test here is a forged program."""
from __future__ import annotations

import ast

import pytest
import torch

from kbx_ray.evaluate import program
from kbx_ray.evaluate.static.kernels import kernel_source
from kbx_ray.evaluate.worker import replayer


def ref(buf: int, shape: list[int], dtype: str = "float32", offset: int = 0,
        stride: list[int] | None = None) -> dict:
    if stride is None:
        stride, n = [], 1
        for s in reversed(shape):
            stride.insert(0, n)
            n *= s
    return {"buf": buf, "offset": offset, "shape": shape, "stride": stride, "dtype": dtype}


def prog(steps: list[dict], buffers: list[dict] | None = None, outputs: list[dict] | None = None):
    return {"version": program.VERSION,
            "buffers": buffers or [{"kind": "input", "index": 0, "nbytes": 16},
                                   {"kind": "alloc", "nbytes": 16}],
            "steps": steps, "outputs": outputs if outputs is not None else [ref(1, [4])]}


def run(p: dict, x: torch.Tensor, movement: bool = False) -> list[torch.Tensor]:
    return replayer.run(program.parse(p), [x], None, "cpu", movement)


@pytest.mark.parametrize("bad, why", [
    ({"op": "exec", "code": "print(1)"}, "instruction set"),
    ({"op": "fill", "dst": ref(1, [4]), "value": 1, "extra": 1}, "fields"),
    ({"op": "fill", "dst": ref(5, [4]), "value": 1}, "does not exist"),
    ({"op": "fill", "dst": ref(1, [4], dtype="object"), "value": 1}, "not replayable"),
    ({"op": "fill", "dst": ref(1, [-4]), "value": 1}, "size"),
    ({"op": "fill", "dst": ref(1, [4]), "value": "1"}, "number"),
    ({"op": "launch", "kernel": "os.system", "grid": [1], "args": [], "kwargs": {}}, "kernel name"),
    ({"op": "launch", "kernel": "k", "grid": [1, 1, 1, 1], "args": [], "kwargs": {}}, "grid"),
    ({"op": "launch", "kernel": "k", "grid": [1], "args": [{"obj": 1}], "kwargs": {}}, "argument"),
    ({"op": "const", "dst": ref(1, [4]), "values": ["a"]}, "numbers"),
])
def test_a_forged_step_is_refused(bad, why):
    with pytest.raises(program.ProgramError, match=why):
        program.parse(prog([bad]))


def test_unknown_fields_and_versions_are_refused():
    p = prog([])
    with pytest.raises(program.ProgramError):
        program.parse(dict(p, version=99))
    with pytest.raises(program.ProgramError, match="fields"):
        program.parse(dict(p, extra=1))
    with pytest.raises(program.ProgramError, match="buffer"):
        program.parse(dict(p, buffers=[{"kind": "file", "nbytes": 4}]))


def test_constants_are_bounded_and_counted_in_the_payload():
    n = program.MAX_CONST + 1
    big = prog([{"op": "const", "dst": ref(0, [n]), "values": [1.0] * n}],
               buffers=[{"kind": "alloc", "nbytes": 4 * n}], outputs=[])
    with pytest.raises(program.ProgramError, match="constant values"):
        program.parse(big)
    p = program.parse(prog([
        {"op": "fill", "dst": ref(1, [4]), "value": 2.0},
        {"op": "const", "dst": ref(1, [2]), "values": [1.0, 2.0]},
        {"op": "launch", "kernel": "k", "grid": [1], "kwargs": {"BLOCK": {"v": 4}},
         "args": [{"t": ref(0, [4])}, {"v": 0.5}, {"seq": [{"v": 1}, {"v": True}]}]}]))
    assert p.payload() == 1 + 2 + 3 and p.launches() == 1


def test_unwritten_memory_is_poison_and_steps_run_in_order():
    x = torch.arange(4, dtype=torch.float32)
    (out,) = run(prog([]), x)
    assert out.isnan().all()  # nothing wrote it: the replay does not make up values
    (out,) = run(prog([{"op": "copy", "dst": ref(1, [4]), "src": ref(0, [4])},
                       {"op": "fill", "dst": ref(1, [2], offset=8), "value": 7.0}]), x)
    assert out.tolist() == [0.0, 1.0, 7.0, 7.0]


def test_a_reference_past_its_buffer_is_refused():
    x = torch.zeros(4)
    with pytest.raises(program.ProgramError, match="past its buffer"):
        run(prog([{"op": "fill", "dst": ref(1, [4], offset=8), "value": 1.0}]), x)


def test_casts_that_compute_are_refused():
    x = torch.tensor([1.5, -2.5, 3.7, 0.2])
    with pytest.raises(program.ProgramError, match="truncates"):
        run(prog([{"op": "copy", "dst": ref(1, [4], dtype="int32"), "src": ref(0, [4])}],
                 outputs=[ref(1, [4], dtype="int32")]), x)
    (out,) = run(prog([{"op": "copy", "dst": ref(1, [4], dtype="float16"), "src": ref(0, [4])}],
                      buffers=[{"kind": "input", "index": 0, "nbytes": 16},
                               {"kind": "alloc", "nbytes": 8}],
                      outputs=[ref(1, [4], dtype="float16")]), x)
    assert out.dtype == torch.float16 and out.tolist() == x.half().tolist()


def test_on_a_data_movement_task_only_a_whole_input_is_copied():
    x = torch.arange(4, dtype=torch.float32)
    whole = prog([{"op": "copy", "dst": ref(1, [4]), "src": ref(0, [4])}])
    assert run(whole, x, movement=True)[0].tolist() == x.tolist()
    flipped = prog([{"op": "copy", "dst": ref(1, [2, 2]), "src": ref(0, [2, 2], stride=[1, 2])}],
                   outputs=[ref(1, [2, 2])])
    with pytest.raises(program.ProgramError, match="data-movement"):
        run(flipped, x, movement=True)
    assert run(flipped, x)[0].tolist() == [[0.0, 2.0], [1.0, 3.0]]


def test_an_input_whose_size_changed_cannot_be_replayed():
    with pytest.raises(replayer.ReplayUnsupported, match="STRUCTURE"):
        run(prog([]), torch.zeros(8))


def test_the_kernel_module_holds_only_kernels_and_constants():
    src = '''
import torch
import triton
import triton.language as tl
BLOCK = 128
DT = tl.float32
TABLE = torch.randn(4)
SCALE: tl.constexpr = tl.constexpr(2 * BLOCK)
print("host code at import")

@triton.autotune(configs=[triton.Config({"B": 64})], key=["n"])
@triton.jit
def k(x_ptr, n, B: tl.constexpr):
    pass

def relu(x):
    return x

class Helper:
    pass
'''
    out = kernel_source(src)
    tree = ast.parse(out)
    names = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    assert names == {"k"}
    assert "autotune" not in out and "@triton.jit" in out
    assert "BLOCK = 128" in out and "DT = tl.float32" in out and "SCALE" in out
    assert "TABLE" not in out and "print" not in out


def test_pure_constant_calls_are_kept_and_host_calls_dropped():
    out = kernel_source("import math\nimport torch\nLOG2E = math.log2(math.e)\nN = int(4.0)\n"
                        "T = torch.arange(4)\nM = max(N, 8)\n")
    assert "LOG2E" in out and "N = int" in out and "M = max" in out and "arange" not in out


def test_on_a_data_movement_task_a_whole_input_may_widen():
    """A mask cast to int32 to count it (a STRUCTURE input sizing an output) moves no values."""
    mask = torch.tensor([True, False, True, True])
    p = prog([{"op": "copy", "dst": ref(1, [4], dtype="int32"), "src": ref(0, [4], dtype="bool")}],
             buffers=[{"kind": "input", "index": 0, "nbytes": 4}, {"kind": "alloc", "nbytes": 16}],
             outputs=[ref(1, [4], dtype="int32")])
    assert run(p, mask, movement=True)[0].tolist() == [1, 0, 1, 1]
    x = torch.arange(4, dtype=torch.float32)
    narrow = prog([{"op": "copy", "dst": ref(1, [4], dtype="float16"), "src": ref(0, [4])}],
                  outputs=[ref(1, [4], dtype="float16")])
    with pytest.raises(program.ProgramError, match="data-movement"):
        run(narrow, x, movement=True)


class _Compiled:
    def __init__(self, loaded: bool) -> None:
        self.module = object() if loaded else None
        self.src, self.metadata = f"src{loaded}", f"md{loaded}"


def test_warm_builds_a_kernels_launcher_before_its_first_launch(monkeypatch):
    """`replayer.launcher`: a compiled kernel not loaded yet gets its launcher built (host work,
    cached beside its binary, which the worker is seeded from); a loaded one already has it; a
    build that fails is left to the first launch, which reports it."""
    from triton.runtime.driver import driver

    built: list[tuple] = []

    class Active:
        def launcher_cls(self, src, metadata):
            built.append((src, metadata))
            if src == "boom":
                raise RuntimeError("no host compiler")

    monkeypatch.setattr(driver, "_active", Active())
    replayer.launcher(_Compiled(loaded=False))
    replayer.launcher(_Compiled(loaded=True))
    assert built == [("srcFalse", "mdFalse")]
    failing = _Compiled(loaded=False)
    failing.src = "boom"
    replayer.launcher(failing)  # no exception
    assert built[-1][0] == "boom"
    replayer.launcher(None)  # what a warmup that compiled nothing gives: nothing to build
    assert len(built) == 2
