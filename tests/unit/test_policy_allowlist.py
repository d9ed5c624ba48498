"""The static policy as an allowlist of the torch/triton host API (issue 17, class 2), the
interpreter's injected names (class 10), and the honest LLM idioms it must accept (issue 18)."""
from __future__ import annotations

import ast
import textwrap

import pytest

from kbx_ray.evaluate.static.checks import static_check
from kbx_ray.evaluate.static.policy import outside_host_api
from kbx_ray.evaluate.static.resolve import closed_module

HEAD = '''
import math
import torch
import triton
import triton.language as tl


@triton.jit
def k(x_ptr, BLOCK: tl.constexpr):
    pass


'''


def _violations(body: str) -> list[str]:
    return static_check(ast.parse(HEAD + textwrap.dedent(body)), "f").violations


@pytest.mark.parametrize("chain", [
    "torch.empty", "torch.empty_like", "torch.float16", "torch.exp", "torch.nn.functional.pad",
    "torch.nn.Linear", "torch.nn.Module", "torch.autograd.Function", "torch.cuda.synchronize",
    "torch.Tensor.contiguous", "torch.linalg.norm", "triton.cdiv", "triton.next_power_of_2",
    "triton.autotune", "triton.Config", "triton.heuristics", "triton.language.math.erf",
    "torch.autograd.function.once_differentiable", "torch.broadcast_shapes",
])
def test_host_api_allows(chain):
    assert outside_host_api(tuple(chain.split("."))) is None


@pytest.mark.parametrize("chain", [
    "torch.func.vmap", "torch.compile", "torch.compiler.disable", "torch.library.custom_op",
    "torch.utils.dlpack", "torch.autograd.grad", "torch.autograd.graph", "torch.nn.DataParallel",
    "torch.nn.utils.stateless", "torch.cuda.Stream", "torch.cuda.graph", "torch.backends.cuda",
    "torch.sparse.mm", "torch.cond", "torch.while_loop", "torch.fx", "triton.runtime.driver",
    "triton.knobs", "triton.compile", "triton.testing.do_bench", "torch.DisableTorchFunction",
])
def test_host_api_refuses(chain):
    assert outside_host_api(tuple(chain.split(".")))


def test_closed_modules():
    assert closed_module(("triton", "language", "math"))
    assert not closed_module(("triton", "language"))  # it carries inline_asm_elementwise
    assert not closed_module(("torch",))


@pytest.mark.parametrize("body", [
    # type(x) in an error message, its name, or an identity comparison
    'def f(x):\n    raise TypeError(f"expected a tensor, got {type(x)}")\n',
    'def f(x):\n    raise TypeError("got " + type(x).__name__)\n',
    'def f(x):\n    assert type(x) is torch.Tensor, "plain tensors only"\n    return x\n',
    # probing tl.math for a function, and tl.math passed as a value
    'HAS = hasattr(tl.math, "log1p")\ndef f(x):\n    return x\n',
    'def g(m):\n    return m.erf\nE = g(tl.math)\ndef f(x):\n    return x\n',
    # ctx attribute stores in an autograd Function reached through .apply
    '''
    class F(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, beta):
            ctx.beta = beta
            return x

        @staticmethod
        def backward(ctx, g):
            return g * ctx.beta, None

    def f(x):
        return F.apply(x, 2.0)
    ''',
    # names the module binds in any scope, and builtins
    'def f(x):\n    n = len(x.shape)\n    return [i for i in range(n)], math.pi\n',
])
def test_honest_idioms_pass(body):
    assert _violations(body) == []


@pytest.mark.parametrize("body,why", [
    ('def f(x):\n    return type(x)(x)\n', "builtin 'type'"),
    ('def f(x):\n    return type("A", (), {})\n', "builtin 'type'"),
    ('def f(x):\n    return type(x).mro\n', "builtin 'type'"),
    ('def f(x, n):\n    return hasattr(tl, n)\n', "module"),
    ('B = hasattr(tl.core, "builtins")\ndef f(x):\n    return x\n', "probes"),
    ('def f(x):\n    return hasattr(torch, "os")\n', "probes"),
    ('def g(m):\n    return m\nT = g(torch)\ndef f(x):\n    return x\n', "module"),
    ('def g(m):\n    return m\nT = g(tl)\ndef f(x):\n    return x\n', "module"),
    # ctx stores are only exempt when forward is reached through .apply, never called directly
    ('''
    class F(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.clone = None
            return x

    def f(x):
        return F.forward(torch.Tensor, x)
    ''', "monkeypatches"),
    ('''
    class F:
        @staticmethod
        def forward(ctx, x):
            ctx.clone = None
            return x
    ''', "monkeypatches"),
    # names the Triton interpreter copies into the module after the first launch
    ('def f(x):\n    return np.asarray(x)\n', "'np'"),
    ('def f(x):\n    return inspect.stack()\n', "'inspect'"),
    ('def f(x):\n    return interpreter_builder\n', "'interpreter_builder'"),
    # value readers that bypass dispatch, and Triton's launch hooks
    ('def f(x):\n    return x.untyped_storage()\n', "untyped_storage"),
    ('k.add_pre_run_hook(print)\ndef f(x):\n    return x\n', "add_pre_run_hook"),
    ('def f(x):\n    return torch.func.vmap(torch.abs)(x)\n', "torch.func"),
])
def test_reopening_routes_are_refused(body, why):
    got = _violations(body)
    assert any(why in v for v in got), got


KERNELS = '''
import torch
import triton
import triton.language as tl


def host(v):
    return v


@triton.jit
def helper(v):
    return v * 2


@triton.jit
def k(x_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    {line}


def f(x):
    k[(1,)](x, BLOCK=16)
    return host(x)
'''


@pytest.mark.parametrize("line,ok", [
    ("tl.store(x_ptr + offs, helper(x))", True),
    ("host = x + 1\n    tl.store(x_ptr + offs, host.to(tl.float32))", True),  # a local shadows it
    ("tl.store(x_ptr + offs, tl.maximum(x, 0.0))", True),
    ("tl.store(x_ptr + offs, host(x))", False),
])
def test_kernels_call_only_triton(line, ok):
    """Under the interpreter a kernel body is Python: a call into the module's own Python
    helpers would run host code inside the 'kernel' (on a GPU it does not compile)."""
    got = static_check(ast.parse(KERNELS.format(line=line)), "f").violations
    assert (got == []) is ok, got
    if not ok:
        assert "kernel k calls host" in got[0]
