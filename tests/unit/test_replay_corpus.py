"""KernelBench-X's published GEAK corpus as a replay source (kbx_ray/llm/replay_corpus.py): every
record and kernel accounted for (used, a repeat, or skipped with a reason), the study's harness cut,
collapsed newlines rebuilt only from verbatim text, and each kernel served at its round with the
study's verdicts. The real corpus's counts are asserted where the tree is ($KBX_EXTERNAL)."""
from __future__ import annotations

import asyncio
import difflib
import json
import os
import re
from collections import Counter
from pathlib import Path

import pytest

from kbx_ray.config.compose import load_config
from kbx_ray.llm.base import GenParams, build_backend
from kbx_ray.llm.replay_corpus import read_corpus, replay_rows

REPO = Path(__file__).resolve().parents[2]
EXTERNAL = Path(os.environ.get("KBX_EXTERNAL") or REPO / ".." / "shared" / "external").resolve()
CORPUS = EXTERNAL / "KernelBenchX" / "data" / "kbx_corpus"
HARNESS = ("#" * 146 + "\n\n\n\nimport torch\nimport sys\nsys.path.append('utils')\n"
           "from data_utils import rand_tensor\n\ndef test_relu():\n    results = {}\n"
           "    results['test_case_1'] = relu(torch.randn(8, device='cuda'))\n    return results\n"
           "\ntest_results = test_relu()\n")
ROUND0 = '''import torch
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.where(x > 0, x, 0.0)
    tl.store(y_ptr + offs, y, mask=mask)


def relu(input: torch.Tensor, inplace: bool = False) -> torch.Tensor:
    x = input.contiguous()
    out = torch.empty_like(x)
    n = x.numel()
    grid = (triton.cdiv(n, 1024),)
    relu_kernel[grid](x, out, n, BLOCK=1024)
    return out
'''
ROUND1 = ROUND0.replace("BLOCK=1024)", "BLOCK=2048, num_warps=8)").replace("1024),)", "2048),)")


def collapse(code: str) -> str:
    """Newlines and indentation collapsed into spaces below the imports, as in some records."""
    head, _, body = code.partition("import triton.language as tl")
    return head + "import triton.language as tl" + re.sub(r"\s*\n\s*", " ", body)


def record(task: str, a: int, b: int, before: str, after: str, verdicts=(False, True),
           published=(None, None)) -> dict:
    diff = "".join(difflib.unified_diff((before + HARNESS).splitlines(True),
                                        (after + HARNESS).splitlines(True),
                                        f"{task}::before", f"{task}::after"))
    return {"task_id": task, "transition": f"round_{a}_to_round_{b}", "from_round": f"round_{a}",
            "to_round": f"round_{b}", "kind": "exe_fail_to_pass",
            "before": {"call_ok": verdicts[0], "exe_ok": verdicts[0], "perf_ok": False,
                       "speedup": None, "error": "Traceback (most recent call last):\n  File "
                       "\"relu.py\", line 9\nValueError: bad block" if not verdicts[0] else ""},
            "after": {"call_ok": verdicts[1], "exe_ok": verdicts[1], "perf_ok": verdicts[1],
                      "speedup": 0.93 if verdicts[1] else None, "error": ""},
            "before_code": published[0] or before + HARNESS,
            "after_code": published[1] or after + HARNESS,
            "unified_diff": diff, "diff_stats": {"lines_a": len((before + HARNESS).splitlines()),
                                                 "lines_b": len((after + HARNESS).splitlines())}}


def write(folder: Path, name: str, records: list[dict]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text("".join(json.dumps(r) + "\n" for r in records))
    return folder


def test_every_record_and_kernel_is_accounted_for(tmp_path):
    rebuilt = record("Activation/relu.py", 0, 1, ROUND0, ROUND1,
                     published=(None, collapse(ROUND1 + HARNESS)))
    # both kernels collapsed, their last line apart: the diff's hunk reaches the harness line but
    # not the kernel above, whose indentation is known nowhere
    before = ROUND0.replace("relu", "abs").replace("tl.where(x > 0, x, 0.0)", "tl.abs(x)")
    after = before.replace("return out", "return out.view_as(input)")
    lost = record("Math/abs.py", 0, 1, before, after,
                  published=(collapse(before + HARNESS), collapse(after + HARNESS)))
    outside = record("Broadcast/expand_where.py", 1, 2, ROUND0, ROUND1)
    folder = write(tmp_path / "kbx_corpus", "all_records.jsonl", [rebuilt, lost, outside])
    write(folder, "correctness_transitions.jsonl", [rebuilt])
    corpus = read_corpus(folder, known_tasks={"Activation/relu", "Math/abs"})
    status = Counter(r["status"] for r in corpus.records)
    assert len(corpus.records) == 4 and status == {"used": 1, "skipped": 2, "repeat": 1}
    assert next(r for r in corpus.records if r["status"] == "repeat")["reason"] == \
        "same record as all_records.jsonl:1"
    k = corpus.kernels
    assert k[("Activation/relu", 1)].code == ROUND1 and k[("Activation/relu", 0)].code == ROUND0
    assert "rebuilt from the corpus's diffs" in k[("Activation/relu", 1)].reason
    assert "harness below line 23 cut" in k[("Activation/relu", 0)].reason
    assert k[("Math/abs", 0)].status == "skipped" and re.search(
        r"newlines collapsed as published; 18 of its 22 lines \(lines 1-18\) are in no diff",
        k[("Math/abs", 0)].reason)
    assert k[("Broadcast/expand_where", 2)].reason == "task not in the KernelBench-X tree"
    assert corpus.summary().endswith("6 kernels (task x round): 2 to judge, 4 skipped (2 newlines "
                                     "collapsed as published, 2 task not in the KernelBench-X "
                                     "tree)")
    rows = {(r["task_id"], r["round"]): r for r in replay_rows(corpus)}
    # every round up to the corpus's last, for the tasks in the tree only
    assert set(rows) == {(t, r) for t in ("Activation/relu", "Math/abs") for r in (0, 1, 2)}
    assert rows[("Activation/relu", 2)]["completion"] == (
        "(kbx replay: no kernel: the corpus holds no round-2 kernel of Activation/relu)")
    assert "data_utils" not in rows[("Activation/relu", 0)]["completion"]
    assert rows[("Activation/relu", 0)]["peer"] == {
        "round": 0, "call_ok": False, "exec_ok": False, "perf_ok": False, "speedup": None,
        "error": "ValueError: bad block", "source": "all_records.jsonl:1 before_code", "skip": ""}
    assert rows[("Math/abs", 1)]["completion"].startswith("(kbx replay: no kernel: newlines")
    assert rows[("Math/abs", 1)]["peer"]["skip"] and rows[("Math/abs", 1)]["peer"]["exec_ok"]


def test_the_backend_serves_each_round_and_says_why_a_round_has_no_kernel(tmp_path):
    folder = write(tmp_path / "kbx_corpus", "all_records.jsonl",
                   [record("Activation/relu.py", 1, 2, ROUND0, ROUND1)])
    (tmp_path / "kernelbenchx" / "Activation").mkdir(parents=True)
    (tmp_path / "kernelbenchx" / "Activation" / "relu.py").write_text("# the tree beside it\n")
    cfg = load_config(["model=kbx_corpus", f"model.options.path={folder}"]).model
    backend = build_backend(cfg)
    assert backend.held_tasks() == {"Activation/relu": 1}

    def ask(rnd: int):
        meta = {"task_id": "Activation/relu", "sample": 0, "round": rnd, "branch": 0,
                "method": "geak_rounds"}
        return asyncio.run(backend.generate([], GenParams(meta=meta)))

    first, second, third = ask(0), ask(1), ask(2)
    assert first.text.startswith("(kbx replay: no kernel: the corpus holds no round-0 kernel")
    assert first.peer == {}
    assert ROUND0.strip() in second.text and second.peer["round"] == 1
    assert ROUND1.strip() in third.text and third.peer["exec_ok"] is True
    assert third.peer["speedup"] == 0.93


@pytest.mark.skipif(not CORPUS.is_dir(), reason=f"no KernelBench-X corpus at {CORPUS} (set "
                    "KBX_EXTERNAL)")
def test_the_published_corpus_loads_with_every_record_accounted_for():
    files = sorted(CORPUS.glob("*.jsonl"))
    lines = sum(1 for f in files for ln in f.read_text().splitlines() if ln.strip())
    corpus = read_corpus(CORPUS)
    assert lines == len(corpus.records) == 201
    assert Counter(r["status"] for r in corpus.records) == {"used": 81, "repeat": 91,
                                                            "skipped": 29}
    assert all(r["reason"] for r in corpus.records if r["status"] != "used")
    kernels = list(corpus.kernels.values())
    assert len(kernels) == 194 and Counter(k.status for k in kernels) == {"judged": 145,
                                                                          "skipped": 49}
    reasons = Counter(k.reason.split(";")[0] for k in kernels if k.status == "skipped")
    assert reasons == {"task not in the KernelBench-X tree": 46,
                       "newlines collapsed as published": 3}
    assert {k.task_id for k in kernels if k.status == "skipped" and k.reason.startswith(
        "newlines")} == {"Math/erf"}
    gelu = [corpus.kernels[("Activation/gelu_bf16", r)] for r in (0, 1, 2)]
    assert all(k.status == "judged" and "rebuilt" in k.reason for k in gelu)
    for k in gelu:  # the rebuilt text is the published one, whitespace aside, and is code
        compile(k.code, k.task_id, "exec")
        published = k.published.split("#" * 40)[0]
        assert re.sub(r"\s+", "", k.code) == re.sub(r"\s+", "", published)
    rows = replay_rows(corpus)
    assert len(rows) == 65 * 3 and sum(r["completion"].startswith("```") for r in rows) == 145
