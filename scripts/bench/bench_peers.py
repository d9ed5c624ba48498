"""The same kernels through the peers' own harnesses and through ours, in one run: verdict agreement
(every disagreement explained) and throughput (candidates fully judged per GPU-minute).

    python scripts/bench/bench_peers.py [--external ../shared/external] [--only NAME ...]
                                        [--out scripts/bench/results/bench_peers_h200.json]
    python scripts/bench/bench_peers.py --cpu     # ours only, under the Triton interpreter
    filters: --category Math Activation (task id prefixes), --kind port mutant torch (the file
    name's part after "__"), --limit N; --peer-sample K gives the peers every k-th candidate only
    (deterministic spread over the sorted list; ours judges all of them)

GPU run for the main session (one H200; the corpus is written by scripts/bench/peers/make_corpus.py):
    python3 -m pip install --no-deps --no-index .whl/*.whl   # carry [".whl"]: radon 6.0.1,
        # mando 0.7.1 (KernelBench-X; colorama, six are in the image), pydantic 2.12.5,
        # pydantic-core 2.41.5, annotated-types 0.7.0, typing-inspection 0.4.2 (KernelBench;
        # needs the image's typing-extensions >= 4.14.1)
    KBX_EXTERNAL=../shared/external timeout 560 python scripts/bench/bench_peers.py \
        --peer-sample 4 --out scripts/bench/results/bench_peers_h200.json
Throughput: candidates fully judged per GPU-minute for each side; the peers see a sample, so the
fair ratio is ours / theirs, each over its own judged candidates (same kind mix by construction of
the every-k-th sample); ours' per-candidate wall_s also lets one compare on the sample alone.

Candidates: scripts/bench/peers/kernelbenchx/*.py and scripts/bench/peers/kernelbench/*.py, each
one kernel whose docstring names its `task:`, the verdict it should get here (`expect:` pass or an
error kind), the peer's expected verdict (`peer:`) and `why`: solutions, plus wrong and cheating
variants.
- KernelBench-X: its own `scripts/run_eval.sh preds.jsonl OUT 0` (call -> exe -> efficiency), with
  PYTHONPATH=<tree>/data and KERNELBENCHX_GOLDEN_MACHINE (default h800; the image needs radon and
  tqdm). Its result files are keyed by file name, so kernels of one task go in separate runs.
- KernelBench: its `eval_kernel_against_ref` (5 correctness trials, timing on, backend triton), one
  fresh process per kernel as its own scripts do (the image needs pydantic).
- ours: one warm Evaluator on the same GPU (timing on), the adapters of kbx_ray/suites.
A disagreement is explained by our record's `stricter_reason` (a check the peer does not make), or
it is reported UNEXPLAINED with both sides' messages. One GPU: GPU time = wall time. The JSON is
rewritten after each harness, so a run cut short keeps what it measured.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
PEERS = Path(__file__).resolve().parent / "peers"
log = logging.getLogger("bench_peers")
KB_EVAL = """import json, sys, torch
from kernelbench.eval import eval_kernel_against_ref
ref, cand = open(sys.argv[1]).read(), open(sys.argv[2]).read()
r = eval_kernel_against_ref(ref, cand, seed_num=42, num_correct_trials=5, num_perf_trials=100,
                            measure_performance=True, backend="triton", device=0)
print("KBRESULT " + json.dumps({"compiled": r.compiled, "correctness": r.correctness,
                                "runtime_us": r.runtime, "metadata": str(r.metadata)[:400]}))
"""


@dataclass
class Cand:
    name: str       # file name
    suite: str      # kernelbenchx | kernelbench
    task_id: str
    code: str
    expect: str     # our expected verdict: pass or an error kind
    peer: str       # the peer's expected verdict: pass | fail
    why: str
    ours: dict = field(default_factory=dict)
    theirs: dict = field(default_factory=dict)


def candidates(only: list[str], categories: list[str] = (), kinds: list[str] = ()) -> list[Cand]:
    out = []
    for suite in ("kernelbenchx", "kernelbench"):
        for p in sorted((PEERS / suite).glob("*.py")):
            if p.name == "make_corpus.py" or (only and p.name not in only):
                continue
            kind = p.stem.split("__", 1)[-1]
            if kinds and kind not in kinds:
                continue
            code = p.read_text()
            meta = dict(re.findall(r"^(?:\"\"\")?(task|expect|peer):\s*(\S+)", code, re.M))
            if categories and not any(meta["task"].startswith(c) for c in categories):
                continue
            why = re.search(r"^why:\s*(.*?)\"\"\"", code, re.M | re.S)
            out.append(Cand(p.name, suite, meta["task"], code, meta["expect"], meta["peer"],
                            " ".join(why.group(1).split()) if why else ""))
    return out


def judge_ours(cands: list[Cand], external: Path, device: str) -> float:
    """Our verdicts, on one warm evaluator; the wall time spent judging."""
    from kbx_ray.evaluate.parent.evaluator import Evaluator
    from kbx_ray.evaluate.settings import EvalConfig
    from kbx_ray.prompting.extract import candidate_id
    from kbx_ray.llm.replay_files import with_peer_entry
    from kbx_ray.suites.builtin import get_task
    from kbx_ray.suites.peer import of_result
    from kbx_ray.types import Candidate

    roots = {"kernelbenchx": external / "KernelBenchX" / "data",
             "kernelbench": external / "KernelBench" / "KernelBench"}
    tasks = {(c.suite, c.task_id): get_task(c.task_id, roots[c.suite], c.suite) for c in cands}
    ev = Evaluator(EvalConfig(device=device, case_timeout_s=300, load_timeout_s=300))
    t0 = time.perf_counter()
    try:
        for c in cands:
            task = tasks[(c.suite, c.task_id)]
            code = with_peer_entry(c.code, task.name) if c.suite == "kernelbenchx" else c.code
            r = ev.evaluate(task, Candidate(candidate_id(task.task_id, code), task.task_id, code,
                                            task.name))
            c.ours = {"verdict": "pass" if r.exec_ok else "fail", "error_kind": r.error_kind,
                      "error_msg": r.error_msg[:300], "stricter_reason": of_result(r),
                      "wall_s": round(r.eval_wall_s, 3), "speedup": r.speedup}
            log.info("ours %s: %s %s", c.name, c.ours["verdict"], r.error_kind)
    finally:
        ev.close()
    return time.perf_counter() - t0


def run_kernelbenchx(cands: list[Cand], tree: Path, gpu: str) -> float:
    """KernelBench-X's own pipeline; kernels of one file go to separate runs."""
    rounds: list[list[Cand]] = []
    for c in cands:
        slot = next((r for r in rounds if all(x.task_id != c.task_id for x in r)), None)
        rounds.append([c]) if slot is None else slot.append(c)
    env = dict(os.environ, PYTHONPATH=f"{tree / 'data'}:{os.environ.get('PYTHONPATH', '')}",
               KERNELBENCHX_GOLDEN_MACHINE=os.environ.get("KERNELBENCHX_GOLDEN_MACHINE", "h800"),
               PYTHON_BIN=sys.executable)
    t0 = time.perf_counter()
    for i, group in enumerate(rounds):
        with tempfile.TemporaryDirectory() as tmp:
            preds = Path(tmp) / "preds.jsonl"
            preds.write_text("".join(json.dumps({"predict": c.code, "file": f"{c.task_id}.py"})
                                     + "\n" for c in group))
            r = subprocess.run(["bash", str(tree / "scripts" / "run_eval.sh"), str(preds),
                                str(Path(tmp) / "out"), gpu], capture_output=True, text=True,
                               env=env, cwd=tree, timeout=3600)
            inter = Path(tmp) / "out" / "intermediate"
            call, exe = (_by_file(inter / f"results_{s}.jsonl") for s in ("call", "exe"))
            for c in group:
                key = f"{c.task_id}.py"
                ok = bool(call.get(key, {}).get("ok")) and bool(exe.get(key, {}).get("ok"))
                c.theirs = {"verdict": "pass" if ok else "fail",
                            "call_ok": bool(call.get(key, {}).get("ok")),
                            "stderr": (exe.get(key) or call.get(key) or {}).get("stderr", "")[-300:]
                            or (r.stderr[-300:] if r.returncode else "")}
        log.info("KernelBench-X round %d/%d done", i + 1, len(rounds))
    return time.perf_counter() - t0


def _by_file(path: Path) -> dict[str, dict]:
    rows = [json.loads(x) for x in path.read_text().splitlines() if x.strip()] \
        if path.is_file() else []
    return {r["file"]: r for r in rows}


def run_kernelbench(cands: list[Cand], tree: Path, gpu: str) -> float:
    """KernelBench's eval, a fresh process per kernel."""
    env = dict(os.environ, PYTHONPATH=f"{tree / 'src'}:{os.environ.get('PYTHONPATH', '')}",
               CUDA_VISIBLE_DEVICES=gpu)
    t0 = time.perf_counter()
    for c in cands:
        level, stem = c.task_id.split("/")
        with tempfile.TemporaryDirectory() as tmp:
            cand = Path(tmp) / "cand.py"
            cand.write_text(c.code)
            r = subprocess.run([sys.executable, "-c", KB_EVAL,
                                str(tree / "KernelBench" / level / f"{stem}.py"), str(cand)],
                               capture_output=True, text=True, env=env, timeout=900)
        line = next((x for x in r.stdout.splitlines() if x.startswith("KBRESULT ")), None)
        res = json.loads(line[9:]) if line else {"error": (r.stderr or r.stdout)[-300:]}
        c.theirs = {"verdict": "pass" if res.get("correctness") else "fail", **res}
    return time.perf_counter() - t0


def explain(c: Cand) -> str:
    """Why ours and the peer's verdicts differ ("" when they agree)."""
    theirs = c.theirs.get("verdict") or c.peer  # the --cpu smoke compares with the expected one
    if c.ours.get("verdict") == theirs:
        return ""
    if c.ours.get("stricter_reason"):
        return f"ours is stricter: {c.ours['stricter_reason']}"
    return (f"UNEXPLAINED: ours {c.ours.get('error_kind') or 'pass'} "
            f"({c.ours.get('error_msg', '')[:160]}); peer {theirs} "
            f"({str(c.theirs.get('stderr') or c.theirs.get('metadata') or '')[:160]})")


def summary(cands: list[Cand], walls: dict[str, float]) -> dict[str, Any]:
    rows = []
    for c in cands:
        expected = "pass" if c.expect == "pass" else c.expect
        got = c.ours.get("verdict") if c.ours.get("verdict") == "pass" else c.ours.get("error_kind")
        rows.append({**asdict(c), "code": None, "as_expected": got == expected,
                     "agree": not explain(c), "explanation": explain(c)})
    per_suite = {}
    for suite in sorted({c.suite for c in cands}):
        n = sum(c.suite == suite for c in cands)
        judged = {"ours": n, "peer": sum(c.suite == suite and bool(c.theirs) for c in cands)}
        per_suite[suite] = {h: {"wall_s": round(w, 2), "judged": judged[h],
                                "per_gpu_minute": round(judged[h] / (w / 60), 2)}
                            for (s, h), w in walls.items() if s == suite and w > 0}
        per_suite[suite]["candidates"] = n
    return {"candidates": rows, "throughput": per_suite,
            "agreement": sum(r["agree"] for r in rows) / max(1, len(rows)),
            "unexplained": [r["name"] for r in rows if r["explanation"].startswith("UNEXPLAINED")],
            "not_as_expected": [r["name"] for r in rows if not r["as_expected"]]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--external", type=Path, default=Path(
        os.environ.get("KBX_EXTERNAL") or ROOT / ".." / "shared" / "external"))
    ap.add_argument("--cpu", action="store_true", help="ours only, on the CPU (a smoke run)")
    ap.add_argument("--only", nargs="*", default=[], help="candidate file names")
    ap.add_argument("--category", nargs="*", default=[], help="task id prefixes")
    ap.add_argument("--kind", nargs="*", default=[], help="port mutant torch epilogue ...")
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--peer-sample", type=int, default=1, help="peers judge every k-th")
    ap.add_argument("--gpu", default="0")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    external = args.external.resolve()
    cands = [c for c in candidates(args.only, args.category, args.kind)
             if not (args.cpu and c.suite == "kernelbench")]
    cands = cands[:args.limit] if args.limit else cands
    out = args.out or ROOT / "scripts" / "bench" / "results" / (
        "bench_peers_cpu.json" if args.cpu else "bench_peers_h200.json")
    walls: dict[tuple[str, str], float] = {}

    def save() -> None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps({"device": "cpu" if args.cpu else _gpu_name(),
                                   **summary(cands, walls)}, indent=2, default=str))

    for suite in ("kernelbenchx", "kernelbench"):
        group = [c for c in cands if c.suite == suite]
        if group:
            walls[(suite, "ours")] = judge_ours(group, external, "cpu" if args.cpu else "cuda")
            save()
    if not args.cpu:
        k = max(1, args.peer_sample)
        kbx = [c for c in cands if c.suite == "kernelbenchx"][::k]
        kb = [c for c in cands if c.suite == "kernelbench"][::k]
        if kbx:
            walls[("kernelbenchx", "peer")] = run_kernelbenchx(kbx, external / "KernelBenchX",
                                                               args.gpu)
            save()
        if kb:
            walls[("kernelbench", "peer")] = run_kernelbench(kb, external / "KernelBench",
                                                             args.gpu)
    save()
    log.info("wrote %s", out)
    return 0


def _gpu_name() -> str:
    import torch

    return torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU"


if __name__ == "__main__":
    sys.exit(main())
