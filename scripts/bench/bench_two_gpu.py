"""Two GPUs against one: the same candidates through one warm evaluator actor, then through two.

    python scripts/bench/bench_two_gpu.py [--include ids...] [--mutants 2]
                                          [--out scripts/bench/results/bench_engine.json]

Ray actors as a sweep uses them (`EvaluatorActor`, one GPU each, started and warm before the clock),
fed from one queue with one candidate in flight per actor, as the engine's evaluator groups do. Each
phase gets its own empty Triton cache, so the second does not reuse the first one's compiled
kernels. Throughput is candidates per minute; `two_gpu_scaling` = two actors' rate / one actor's
rate, goal >= 1.8 (issue 6). Every record must name the GPU it ran on. The result is merged into
bench_engine.json under `two_gpu_scaling` (the ratio) and `two_gpu` (the details), keeping the
engine-overhead figures already there.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts/bench"))
DEFAULT_TASKS = ["activation/relu", "math/exp", "reduce/sum", "normalization/layer_norm",
                 "fusion/add_gelu", "matrix_multiply/matmul", "index/index_select",
                 "linear_algebra/matvec", "pooling/avg_pool1d", "convolution/conv2d",
                 "quantization/matmul_w8a8", "random/rand"]


def phase(n_actors: int, cands: list, cfg, cache_root: str) -> dict:
    """Wall time of `cands` through `n_actors` warm actors, one candidate in flight per actor."""
    import ray

    from kbx_ray.evaluate.parent.actor import EvaluatorActor

    env = {"TRITON_CACHE_DIR": tempfile.mkdtemp(prefix=f"triton{n_actors}_", dir=cache_root)}
    actors = [EvaluatorActor.options(num_gpus=1, runtime_env={"env_vars": env}).remote(cfg)
              for _ in range(n_actors)]
    ray.get([a.info.remote() for a in actors], timeout=600)  # warm: worker up, CUDA init
    todo = list(enumerate(cands))
    running: dict = {}
    results: list = [None] * len(cands)
    t0 = time.perf_counter()
    for a in actors:
        if todo:
            i, (task, cand, _) = todo.pop(0)
            running[a.evaluate.remote(task, cand)] = (a, i)
    while running:
        (ref,), _ = ray.wait(list(running), num_returns=1)
        a, i = running.pop(ref)
        results[i] = ray.get(ref)
        if todo:
            j, (task, cand, _) = todo.pop(0)
            running[a.evaluate.remote(task, cand)] = (a, j)
    wall = time.perf_counter() - t0
    for a in actors:
        ray.kill(a)
    return {"actors": n_actors, "wall_s": round(wall, 2),
            "candidates_per_min": round(60 * len(cands) / wall, 1),
            "gpus": sorted({r.gpu_name for r in results}),  # what each evaluation saw
            "exec_ok": sum(bool(r.exec_ok) for r in results),
            "error_kinds": dict(Counter(r.error_kind for r in results if not r.exec_ok)),
            "verdicts": [r.error_kind for r in results],
            "per_actor_node_gpu": sorted({(r.node_accelerator, r.gpu_name) for r in results}),
            "results": results}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--include", nargs="*", default=DEFAULT_TASKS)
    ap.add_argument("--mutants", type=int, default=2, help="failing mutants per task")
    ap.add_argument("--label", default="")
    ap.add_argument("--fake-gpus", type=int, default=0,
                    help="declare N GPUs to a CPU-only Ray (a plumbing check: it stops before "
                         "writing, since no actor sees a GPU)")
    ap.add_argument("--out", default=str(ROOT / "scripts/bench/results/bench_engine.json"))
    args = ap.parse_args()

    import ray

    from bench_eval import candidates
    from kbx_ray.evaluate.settings import EvalConfig
    from kbx_ray.config.hardware import detect_local, peak_table

    ray.init(include_dashboard=False, configure_logging=False, log_to_driver=False,
             num_gpus=args.fake_gpus or None, _temp_dir=tempfile.mkdtemp(prefix="rb", dir="/tmp"))
    n_gpus = int(ray.cluster_resources().get("GPU", 0))
    if n_gpus < 2:
        raise SystemExit(f"this benchmark needs 2 GPUs in the local Ray cluster, it has {n_gpus}")
    pool = detect_local()
    cfg = EvalConfig(peak_gbps=pool.peak_gbps, peak_tflops=peak_table(pool))
    cands = candidates(args.include, args.mutants)
    cache_root = tempfile.mkdtemp(prefix="kbx_2gpu_")
    one = phase(1, cands, cfg, cache_root)
    print(json.dumps({k: v for k, v in one.items() if k != "results"}), flush=True)
    two = phase(2, cands, cfg, cache_root)
    print(json.dumps({k: v for k, v in two.items() if k != "results"}), flush=True)
    r1, r2 = one.pop("results"), two.pop("results")
    same = [a.exec_ok == b.exec_ok for a, b in zip(r1, r2)]
    if not all(g for g in one["gpus"] + two["gpus"]):
        raise SystemExit(f"an actor saw no GPU: {one['gpus']} {two['gpus']}")
    ratio = round(one["wall_s"] / two["wall_s"], 3)
    out = Path(args.out)
    doc = json.loads(out.read_text()) if out.exists() else {}
    doc["two_gpu_scaling"] = ratio
    doc["two_gpu"] = {
        "label": args.label, "measured_at": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "ray_version": ray.__version__, "gpus_in_cluster": n_gpus, "goal": 1.8,
        "n_candidates": len(cands), "tasks": args.include, "mutants_per_task": args.mutants,
        "one_actor": one, "two_actors": two, "same_verdicts": sum(same),
        "same_error_kind": sum(a.error_kind == b.error_kind for a, b in zip(r1, r2)),
        "note": "same candidates, warm actors started before the clock, a fresh Triton cache "
                "per phase; two_gpu_scaling = one actor's wall / two actors' wall"}
    doc.pop("two_gpu_note", None)
    out.write_text(json.dumps(doc, indent=1) + "\n")
    print(json.dumps({"two_gpu_scaling": ratio, "same_verdicts": f"{sum(same)}/{len(same)}"}))
    ray.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
