import ast

import pytest

from kbx_ray.evaluate.checks import static_check

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
