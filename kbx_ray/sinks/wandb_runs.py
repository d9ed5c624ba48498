"""The W&B run of a sweep: its identity, its step across resumes, its generation metrics, and the
artifacts it closes with. Kept apart from wandb.py, which turns rows into logs.
More: kbx_ray/sinks/README.md, `wandb_runs.py`.
"""
from __future__ import annotations

import json
import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kbx_ray.records.metrics import key_part
from kbx_ray.sinks.wandb_settings import WandbConfig

logger = logging.getLogger(__name__)

STATE_FILE = "kbx_state.json"


def run_id_for(sweep_id: str) -> str:
    """The sweep id in W&B's run-id alphabet (at most 64 characters)."""
    from kbx_ray.types import stable_hash

    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", sweep_id)
    return safe if len(safe) <= 64 else f"{safe[:55]}-{stable_hash(sweep_id, n=8)}"


def readable(sweep_id: str) -> str:
    """The sweep id without its trailing 8-hex identity hash."""
    head, _, tail = sweep_id.rpartition("-")
    return head if head and re.fullmatch(r"[0-9a-f]{8}", tail) else sweep_id


def tags_for(config: dict[str, Any], extra: list[str]) -> list[str]:
    variants = config.get("variants") or {}
    methods = [m.get("name", "") for m in variants.get("methods", [])]
    models = [m.get("name", "") for m in variants.get("models", [])]
    suite = (config.get("suite") or {}).get("name")
    pools = list(config.get("pools") or config.get("hardware") or [])
    tags = ([f"method:{m}" for m in methods] + [f"model:{m}" for m in models]
            + ([f"suite:{suite}"] if suite else []) + [f"pool:{p}" for p in pools] + list(extra))
    return list(dict.fromkeys(t[:64] for t in tags if t))


def init_args(cfg: WandbConfig, sweep_id: str, config: dict[str, Any],
              run_dir: Path) -> dict[str, Any]:
    """`wandb.init` keyword arguments for the sweep's one run."""
    return dict(project=cfg.project, entity=cfg.entity, group=cfg.group or readable(sweep_id),
                job_type="sweep", name=sweep_id, id=run_id_for(sweep_id), resume="allow",
                tags=tags_for(config, list(cfg.tags)), config=config, dir=str(run_dir),
                mode=cfg.mode, reinit="create_new")


def avoid_same_second(run_dir: Path, run_id: str) -> None:
    """An offline run's folder is named by the second it starts and its id: a resume in the same
    second as the run before it would share that folder, so it waits for the next second."""
    import time

    for _ in range(3):
        stamp = time.strftime("%Y%m%d_%H%M%S")
        if not list((run_dir / "wandb").glob(f"*-{stamp}-{run_id}")):
            return
        time.sleep(1.05 - time.time() % 1)


class RunState:
    """The run's last step, kept in the sweep folder so a resume logs after it."""

    def __init__(self, sweep_dir: Path) -> None:
        self.path = Path(sweep_dir) / "wandb" / STATE_FILE
        self.run_id = ""
        self.step = 0
        self.resumes = 0  # earlier runs of this W&B run (each resume adds one)

    def begin(self, run_id: str) -> None:
        self.run_id = run_id
        try:
            saved = json.loads(self.path.read_text())
        except (OSError, ValueError):
            saved = {}
        if saved.get("run_id") == run_id:
            self.step = int(saved.get("step", -1)) + 1
            self.resumes = int(saved.get("resumes", 0)) + 1

    def next_step(self) -> int:
        step, self.step = self.step, self.step + 1
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"run_id": self.run_id, "step": step,
                                   "resumes": self.resumes}))
        os.replace(tmp, self.path)
        return step


@dataclass
class _Gen:
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    truncated: int = 0

    def metrics(self) -> dict[str, float]:
        n = max(self.calls, 1)
        return {"calls": float(self.calls), "prompt_tokens": float(self.prompt_tokens),
                "completion_tokens": float(self.completion_tokens),
                "mean_latency_s": self.latency_s / n, "truncation_rate": self.truncated / n,
                "tokens_per_s": self.completion_tokens / self.latency_s if self.latency_s else 0.0}


class GenerationTally:
    """Per model (and overall): calls, tokens, mean latency, truncation rate (finish_reason
    `length`), and tokens/s of a request (completion tokens over the calls' summed latency)."""

    def __init__(self) -> None:
        self.tallies: dict[str, _Gen] = {}

    def update(self, rows: list[dict]) -> dict[str, float]:
        touched = set()
        for r in rows:
            for key in ("overall", key_part(r.get("model"))):
                t = self.tallies.setdefault(key, _Gen())
                t.calls += 1
                t.prompt_tokens += int(r.get("prompt_tokens") or 0)
                t.completion_tokens += int(r.get("completion_tokens") or 0)
                t.latency_s += float(r.get("latency_s") or 0.0)
                t.truncated += r.get("finish_reason") == "length"
                touched.add(key)
        return self._keyed(touched)

    def flat(self) -> dict[str, float]:
        return self._keyed(set(self.tallies))

    def _keyed(self, keys: set[str]) -> dict[str, float]:
        return {f"generation/{k}/{name}": v for k in sorted(keys)
                for name, v in self.tallies[k].metrics().items()}


def replica_gauges(backends: list[Any]) -> dict[str, float]:
    """Per replica of each backend that balances over replicas (its `replicas`, an
    llm/replica_group.py:ReplicaGroup): calls served, the most requests it held at once, and what
    it generated (completion tokens, mean latency, truncation rate, tokens/s since the group
    started)."""
    out: dict[str, float] = {}
    for backend in backends:
        group = getattr(backend, "replicas", None)
        served = getattr(group, "served", None)
        if not isinstance(served, list):
            continue
        label = key_part(getattr(getattr(backend, "spec", None), "name", None)
                         or getattr(backend, "name", "model"))
        for i, (n, peak) in enumerate(zip(served, getattr(group, "peak", [0] * len(served)))):
            out[f"generation/{label}/replica{i}/served"] = float(n)
            out[f"generation/{label}/replica{i}/peak_inflight"] = float(peak)
        for i, tally in enumerate(getattr(group, "gen", [])):
            for name, v in tally.metrics().items():
                out[f"generation/{label}/replica{i}/{name}"] = v
    return out


def log_artifacts(run: Any, sweep_dir: Path, run_id: str) -> None:
    """The Parquet results (with config.yaml and run.json) and the report, built now."""
    import wandb

    results = wandb.Artifact(f"results-{run_id}", type="results",
                             description="Parquet evaluations and generations, config.yaml, run.json")
    for sub in ("evaluations", "generations"):
        if (sweep_dir / sub).is_dir():
            results.add_dir(str(sweep_dir / sub), name=sub)
    for name in ("config.yaml", "run.json"):
        if (sweep_dir / name).is_file():
            results.add_file(str(sweep_dir / name), name=name)
    run.log_artifact(results)
    try:
        from kbx_ray.report import build_report

        paths = build_report([sweep_dir], sweep_dir / "report")
    except Exception as e:  # noqa: BLE001 - the results are logged; a report is a convenience
        logger.warning("the report was not built for W&B (%s: %s); build it with "
                       "`kbx report %s`", type(e).__name__, str(e).splitlines()[0][:200], sweep_dir)
        return
    report = wandb.Artifact(f"report-{run_id}", type="report", description="kbx report")
    report.add_dir(str(paths.markdown.parent), name="report")
    run.log_artifact(report)
