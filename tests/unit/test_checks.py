import ast

import pytest

from kbx_ray.evaluate.static.checks import static_check

HEADER = "import torch\nimport triton\nimport triton.language as tl\n\n@triton.jit\ndef k(x):\n    pass\n\n"


def check(body: str, entry: str = "relu"):
    return static_check(ast.parse(HEADER + body), entry)


def test_clean_candidate_passes():
    rep = check("def relu(x):\n    y = torch.empty_like(x)\n    k[(1,)](y)\n    return y\n")
    assert rep.violations == [] and rep.kernels == ["k"]


@pytest.mark.parametrize("body, needle", [
    ("import os\ndef relu(x): return x\n", "imports 'os'"),
    ("import subprocess\ndef relu(x): return x\n", "imports 'subprocess'"),
    ("from socket import socket\ndef relu(x): return x\n", "imports 'socket'"),
    ("import threading\ndef relu(x): return x\n", "imports 'threading'"),
    ("def relu(x): return open('/etc/passwd').read()\n", "builtin 'open'"),
    ("def relu(x): return x.__class__.__subclasses__()\n", "__subclasses__"),
    ("def relu(x): return relu.__globals__\n", "__globals__"),
    ("torch.allclose = lambda *a, **k: True\ndef relu(x): return x\n", "monkeypatches torch.allclose"),
    ("torch.cuda.Event.elapsed_time = lambda *a: 0.001\ndef relu(x): return x\n", "monkeypatches"),
    ("import time\ntime.perf_counter = lambda: 0\ndef relu(x): return x\n", "monkeypatches time"),
    ("def relu(x):\n    try:\n        return x\n    except Exception:\n        return torch.relu(x)\n",
     "try/except"),
    ("def relu(x):\n    s = torch.cuda.Stream()\n    return x\n", "torch.cuda.Stream"),
    ("def relu(x): return torch.ops.aten.relu(x)\n", "torch.ops"),
    ("from torch.utils.cpp_extension import load_inline\ndef relu(x): return x\n", "torch.utils"),
    ("def relu(x): return eval('x')\n", "builtin 'eval'"),
    ("def other(x): return x\n", "no top-level function named 'relu'"),
])
def test_violations(body, needle):
    rep = check(body)
    assert any(needle in v for v in rep.violations), rep.violations


def test_no_kernel_is_a_violation():
    rep = static_check(ast.parse("import torch\ndef relu(x):\n    return x\n"), "relu")
    assert "no @triton.jit kernel" in rep.violations


def test_torch_compute_calls_are_flagged_not_banned():
    rep = check("def relu(x):\n    return torch.relu(x)\n")
    assert rep.violations == [] and "torch_call:torch.relu" in rep.flags


def test_reraising_handler_is_allowed():
    rep = check("def relu(x):\n    try:\n        return x\n    except ValueError:\n        raise\n")
    assert rep.violations == []


def test_from_imports_of_allowed_modules_pass():
    rep = check("from typing import Optional\nfrom triton import language as tl2\n"
                "def relu(x: Optional[int]):\n    return x\n")
    assert rep.violations == []


# ---- issue 26 classes 1 and 4, issue 27 items 3 and 6 ------------------------------------------
KERNEL = ("import torch\nimport triton\nimport triton.language as tl\n\n@triton.jit\n"
          "def k(x_ptr, y_ptr, a, B: tl.constexpr):\n    offs = tl.arange(0, B)\n"
          "    p = x_ptr + offs\n    v = tl.load(p)\n    {line}\n    tl.store(y_ptr + offs, v)\n\n"
          "def relu(x):\n    y = torch.empty_like(x)\n    k[(1,)](x, y, 0, B=16)\n    return y\n")


@pytest.mark.parametrize("line, needle", [
    ("q = a.to(tl.pointer_type(tl.float32))", "pointer_type"),
    ("q = a.to(tl.core.pointer_type(tl.float32), bitcast=True)", "pointer_type"),
    ("q = tl.cast(a, tl.pointer_type(tl.float32))", "pointer_type"),
    ("q = a.to(y_ptr.dtype)", "names the pointer type y_ptr.dtype"),
    ("q = tl.cast(a, p.dtype, bitcast=True)", "names the pointer type p.dtype"),
    ("q = tl.full([B], 1, x_ptr.dtype)", "names the pointer type x_ptr.dtype"),
    ("t = p.type.element_ty", "names the pointer type p.type.element_ty"),
    ("q = tl.str_to_ty('*fp32', None)", "str_to_ty"),
    ("q = tl.inline_asm_elementwise('mov', '=r', [a], dtype=tl.int64, is_pure=True, pack=1)",
     "inline_asm_elementwise"),
])
def test_kernels_cannot_make_pointers_from_integers(line, needle):
    rep = static_check(ast.parse(KERNEL.format(line=line)), "relu")
    assert any(needle in v for v in rep.violations), rep.violations


@pytest.mark.parametrize("line", [
    "v = v.to(y_ptr.dtype.element_ty)", "v = v.to(v.dtype)", "q = x_ptr.dtype == y_ptr.dtype",
    "w = tl.zeros([B], dtype=x_ptr.dtype.element_ty)",
])
def test_element_types_of_pointers_stay_allowed(line):
    assert static_check(ast.parse(KERNEL.format(line=line)), "relu").violations == []


@pytest.mark.parametrize("body, needle", [
    ("def relu(x):\n    k[(1,)](x.data_ptr())\n    return x\n", "data_ptr"),
    ("def relu(x):\n    f = x.data_ptr\n    return x\n", "data_ptr"),
    ("def relu(x):\n    k[(1,)](x, x.data_ptr() - x[1:].data_ptr())\n    return x\n", "data_ptr"),
    ("def relu(x):\n    return x if x.data_ptr() % 16 == 0 else x\n", "data_ptr"),
    ("def relu(x):\n    return x if x.data_ptr() < x[1:].data_ptr() else x\n", "data_ptr"),
    ("def relu(x):\n    return x if x.data_ptr() == 4096 else x\n", "data_ptr"),
    ("def relu(x):\n    return super(torch.Tensor, x).tolist()\n", "super(...) with arguments"),
    ("def relu(x):\n    return super().tolist()\n", "super() outside a method"),
    ("def relu(x):\n    x.data = x\n    return x\n", "monkeypatches x.data"),
    ("def relu(x):\n    x.grad = x\n    return x\n", "monkeypatches x.grad"),
    ("G = torch.empty(1)\ndef relu(x):\n    G.requires_grad = True\n    return x\n", "monkeypatches G"),
    ("def relu(x):\n    torch.Tensor.requires_grad = True\n    return x\n", "monkeypatches torch"),
])
def test_raw_addresses_base_readers_and_foreign_stores_refused(body, needle):
    rep = check(body)
    assert any(needle in v for v in rep.violations), rep.violations


@pytest.mark.parametrize("body", [
    "class M(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
    "def relu(x):\n    return x\n",
    "def relu(x):\n    y = torch.empty_like(x)\n    k[(1,)](y)\n    y.requires_grad = x.requires_grad\n"
    "    return y\n",
    # the aliasing test for in-place arguments: a bool, never an address (relu__correct.py)
    "def relu(x, inplace=False):\n    y = x.contiguous()\n"
    "    o = y if inplace and y.data_ptr() == x.data_ptr() else torch.empty_like(y)\n"
    "    k[(1,)](o)\n    if inplace and o.data_ptr() != x.data_ptr():\n        x.copy_(o)\n"
    "    return o\n",
    "def configs():\n    return [triton.Config({'B': 64})]\n\n@triton.autotune(configs=configs(), "
    "key=['n'])\n@triton.jit\ndef k2(x, n, B: tl.constexpr):\n    pass\n\n"
    "def relu(x):\n    k2[(1,)](x, 1)\n    return x\n",
])
def test_own_super_requires_grad_and_decorator_helpers_admitted(body):
    assert check(body).violations == []


PTR_ANNOTATED = ("@triton.jit\ndef k2(x_ptr: {ann}, y_ptr: {ann}, n: tl.int32, B: tl.constexpr):\n"
                 "    o = tl.arange(0, B)\n    v = tl.load(x_ptr + o, mask=o < n)\n"
                 "    tl.store(y_ptr + o, v.to(y_ptr.type.element_ty), mask=o < n)\n"
                 "def relu(x):\n    y = torch.empty_like(x)\n    k2[(1,)](x, y, x.numel(), B=64)\n    return y\n")


@pytest.mark.parametrize("body", [
    PTR_ANNOTATED.format(ann="tl.pointer_type"),
    PTR_ANNOTATED.format(ann="tl.tensor"),
    # an autograd Function keeps its arguments on ctx, whatever they are called
    "class F(torch.autograd.Function):\n    @staticmethod\n    def forward(ctx, x, reduction):\n"
    "        ctx.reduction = reduction\n        ctx.path = None\n        y = torch.empty_like(x)\n"
    "        k[(1,)](y)\n        return y if ctx.reduction == 'none' else y\n"
    "def relu(x, reduction='mean'):\n    return F.apply(x, reduction)\n",
    "class M(torch.nn.Module):\n    def __init__(self, reduction):\n        super().__init__()\n"
    "        self.reduction = reduction\n    def forward(self, x):\n        return x if self.reduction else x\n"
    "def relu(x):\n    y = torch.empty_like(x)\n    k[(1,)](y)\n    return M('mean')(y)\n",
    "def relu(x):\n    y = torch.empty_like(x)\n    k[(1,)](y)\n    s = x.shape\n"
    "    return y.view(s) if 's' in locals() else y\n",
    "def relu(x, opts=None):\n    y = torch.empty_like(x)\n    k[(1,)](y)\n"
    "    return y if opts is None or opts.reduction == 'none' else y\n",
    # an optimizer task's answer is an optimizer: its base class (KernelBench-X Adam)
    "class Adam(torch.optim.Optimizer):\n    def __init__(self, params, lr=1e-3):\n"
    "        super().__init__(params, dict(lr=lr))\n"
    "def relu(x):\n    y = torch.empty_like(x)\n    k[(1,)](y)\n    return y\n",
], ids=["pointer_type_annotation", "tensor_annotation", "ctx_attrs", "self_attrs", "in_locals",
        "argument_attr", "optimizer_base_class"])
def test_honest_annotations_own_attributes_and_membership_admitted(body):
    assert check(body).violations == []


@pytest.mark.parametrize("body, needle", [
    # an instance or a string declares the parameter a pointer: an integer there is an address
    (PTR_ANNOTATED.format(ann="tl.pointer_type(tl.float32)"), "pointer_type"),
    (PTR_ANNOTATED.format(ann="tl.pi32_t"), "a pointer type"),
    (PTR_ANNOTATED.format(ann="'*fp32'"), "declares x_ptr a pointer by the string"),
    # a block of pointers' element type is a pointer type
    ("@triton.jit\ndef k3(x_ptr, n):\n    p = x_ptr + tl.arange(0, 4)\n"
     "    tl.store(p, n.to(p.type.element_ty))\ndef relu(x): return x\n", "names the pointer type"),
    ("@triton.jit\ndef k3(x_ptr, n):\n    x_ptr = x_ptr + tl.arange(0, 4)\n"
     "    tl.store(x_ptr, n.to(x_ptr.type.element_ty))\ndef relu(x): return x\n", "names the pointer type"),
    # module-alias names on objects the candidate does not own, and locals() outside a function
    ("y = torch.empty(1)\ndef relu(x):\n    return y.reduction\n", "(an escape to the OS or the interpreter)"),
    ("def relu(x):\n    return x.numpy()\n", "(an escape to the OS or the interpreter)"),
    ("z = 'x' in locals()\ndef relu(x): return x\n", "builtin 'locals'"),
    ("def relu(x):\n    d = locals()\n    return x\n", "builtin 'locals'"),
    ("def relu(x):\n    return torch.optim.SGD([x], lr=1.0)\n", "uses torch.optim.SGD"),
])
def test_pointer_declarations_and_foreign_module_attributes_stay_refused(body, needle):
    rep = check(body)
    assert any(needle in v for v in rep.violations), rep.violations
