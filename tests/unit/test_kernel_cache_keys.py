"""The replay's kernel module (static/kernels.py) keeps each jit function's text and first line, so
Triton's cache key for every kernel is the one the candidate's own module gives it: a kernel the
replay process compiled is one the worker finds in a cache seeded from it (one compile for both).
Checked on every task's solution and on the GEAK corpus's kernels, with Triton's real JIT."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kbx_ray.evaluate.static.kernels import kernel_source

REPO = Path(__file__).resolve().parents[2]
EXTERNAL = Path(os.environ.get("KBX_EXTERNAL") or REPO / ".." / "shared" / "external").resolve()
CORPUS = EXTERNAL / "KernelBenchX" / "data" / "kbx_corpus"

# each file imported as a module (Triton's JIT, not its interpreter): {jit name: cache key}
KEYS = r'''
import importlib.util, json, sys
from triton.runtime.jit import JITFunction
def jit(v):  # an Autotuner or Heuristics wraps the JITFunction it launches
    for _ in range(4):
        if isinstance(v, JITFunction):
            return v
        v = getattr(v, "fn", None)
out = []
for path in sys.argv[1:]:
    try:
        spec = importlib.util.spec_from_file_location(f"m{len(out)}", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        out.append({k: jit(v).cache_key for k, v in vars(mod).items() if jit(v) is not None})
    except BaseException as e:
        out.append({"!": type(e).__name__})
print(json.dumps(out))
'''


def _keys(paths: list[Path]) -> list[dict]:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    done = subprocess.run([sys.executable, "-c", KEYS, *map(str, paths)], capture_output=True,
                          text=True, env=env, timeout=600, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def _pairs(tmp: Path, sources: list[str]) -> list[tuple[dict, dict]]:
    paths = []
    for i, code in enumerate(sources):
        (tmp / f"c{i}.py").write_text(code)
        (tmp / f"k{i}.py").write_text(kernel_source(code))
        paths += [tmp / f"c{i}.py", tmp / f"k{i}.py"]
    keys = _keys(paths)
    return list(zip(keys[::2], keys[1::2]))


def test_every_solutions_kernels_keep_their_cache_keys(tmp_path):
    sources = [p.read_text() for p in sorted(REPO.glob("tasks/*/*/solution.py"))]
    assert len(sources) == 176
    pairs = _pairs(tmp_path, sources)
    for (cand, kern), code in zip(pairs, sources):
        assert cand and "!" not in cand, code[:200]
        assert kern == cand


def test_autotuned_kernels_with_host_code_between_keep_their_cache_keys(tmp_path):
    """Decorators above @triton.jit (autotune, heuristics), comments, host code and a
    multi-line jit decorator: the key is the candidate's; a key that moved fails here."""
    code = '''import torch
import triton
import triton.language as tl
SCALE = 2.0  # a kept constant
TABLE = torch.arange(4)


@triton.autotune(configs=[triton.Config({"B": 64}), triton.Config({"B": 128})],
                 key=["n"])
@triton.heuristics({"EVEN": lambda a: a["n"] % 64 == 0})
@triton.jit(
    do_not_specialize=["n"])
def k(x_ptr, n, B: tl.constexpr, EVEN: tl.constexpr):
    # a comment in the body
    o = tl.program_id(0) * B + tl.arange(0, B)
    tl.store(x_ptr + o, tl.load(x_ptr + o) * SCALE)


def helper(x):
    return x


@triton.jit
def inner(v):
    return v + 1


@triton.jit
def outer(x_ptr):
    tl.store(x_ptr, inner(tl.load(x_ptr)))
'''
    ((cand, kern),) = _pairs(tmp_path, [code])
    assert set(cand) == {"k", "inner", "outer"} and kern == cand
    src = kernel_source(code)
    assert "autotune" not in src and "TABLE" not in src and "helper" not in src
    assert src.splitlines().index("def k(x_ptr, n, B: tl.constexpr, EVEN: tl.constexpr):") == \
        code.splitlines().index("def k(x_ptr, n, B: tl.constexpr, EVEN: tl.constexpr):")


def test_a_statement_sharing_a_line_falls_back_to_unparsed_source():
    code = "import triton\nX = 1; print(X)\n@triton.jit\ndef k(x):\n    pass\n"
    src = kernel_source(code)
    assert "print" not in src and "def k(x):" in src


@pytest.mark.skipif(not CORPUS.exists(), reason=f"the GEAK corpus is not at {CORPUS} "
                    "(set KBX_EXTERNAL to the external/ tree)")
def test_the_corpus_kernels_keep_their_cache_keys(tmp_path):
    from kbx_ray.llm.replay_corpus import read_corpus

    kernels = [k for k in read_corpus(CORPUS).kernels.values() if k.status == "judged"]
    sources = [k.code for k in kernels if "@triton.jit" in k.code][:80]
    assert len(sources) >= 40
    pairs = _pairs(tmp_path, sources)
    compared = 0
    for cand, kern in pairs:
        if "!" in cand or not cand:  # the candidate's own module fails at import: no key
            continue
        assert kern == cand, "a kernel's key moved"
        compared += len(kern)
    assert compared >= 40
