"""A kernel that forms a pointer from an integer is refused on a GPU from its compiled IR
(triton_hooks.refuse_integer_pointers): the exploit fixtures' kernels, compiled here for an sm_90
target (Triton compiles without a GPU), keep `tt.int_to_ptr`; an honest kernel does not."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from kbx_ray.evaluate.worker import triton_hooks
from kbx_ray.suites.builtin import get_task
from tests.conftest import FIXTURES

triton = pytest.importorskip("triton")


def _compiled(path: Path, name: str, signature: dict, constexprs: dict):
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    spec = importlib.util.spec_from_file_location(f"kbx_ip_{path.stem}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    src = ASTSource(fn=getattr(mod, name), signature=signature, constexprs=constexprs)
    try:
        return triton.compile(src, target=GPUTarget("cuda", 90, 32))
    except Exception as e:  # noqa: BLE001 - no ptxas/LLVM backend in this triton build
        pytest.skip(f"triton cannot compile for sm_90 here: {type(e).__name__}: {e}")


SIG = {"x_ptr": "*fp32", "y_ptr": "*fp32", "n": "i32", "shift": "i32", "BLOCK": "constexpr"}


@pytest.mark.parametrize("fixture,kernel", [("d1p_int_roundtrip_pointer_relu", "_relu"),
                                            ("d1p_bitcast_pointer_tanh", "_tanh")])
def test_a_pointer_made_from_an_integer_is_refused(fixture, kernel):
    k = _compiled(FIXTURES / "exploits" / f"{fixture}.py", kernel, SIG, {"BLOCK": 1024})
    triton_hooks.MONITOR.denied = False
    with pytest.raises(TypeError, match="pointer from an integer"):
        triton_hooks.refuse_integer_pointers(k)
    assert triton_hooks.MONITOR.denied
    triton_hooks.MONITOR.denied = False


def test_an_honest_kernel_and_the_interpreter_pass():
    path = Path(get_task("activation/relu").solution_path)
    text = path.read_text()
    name = next(line.split("def ", 1)[1].split("(", 1)[0] for line in text.splitlines()
                if line.startswith("def _"))
    args = text.split(f"def {name}(", 1)[1].split(")", 1)[0].replace("\n", " ")
    params = [a.split(":")[0].strip() for a in args.split(",") if a.strip()]
    sig = {p: ("constexpr" if p.isupper() else "*fp32" if p.endswith("ptr") else "i32")
           for p in params}
    k = _compiled(path, name, sig, {p: 1024 for p, t in sig.items() if t == "constexpr"})
    triton_hooks.refuse_integer_pointers(k)
    triton_hooks.refuse_integer_pointers(None)  # the interpreter's run returns no kernel
