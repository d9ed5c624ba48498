"""Attempt + cell -> the Parquet rows (see sinks/parquet.py for the schemas)."""
from __future__ import annotations

import json
import time
from dataclasses import asdict
from typing import Any

from kbx_ray.suites import peer
from kbx_ray.types import SCHEMA_VERSION, Task


# a study's verdicts of a replayed corpus kernel (llm/replay_corpus.py): `peer_<field>` columns
PEER_FIELDS = ("round", "call_ok", "exec_ok", "perf_ok", "speedup", "error", "source", "skip")


def peer_columns(g: Any) -> dict:
    peer = getattr(g, "peer", None) or {}
    return {f"peer_{k}": peer.get(k) if peer.get(k) != "" else None for k in PEER_FIELDS}


def generation_row(sweep_id: str, cell: Any, a: Any) -> dict:
    g = a.generation
    return {
        "schema_version": SCHEMA_VERSION, "sweep_id": sweep_id, "cell_id": cell.cell_id,
        "task_id": cell.task_id, "method": cell.method.name, "model": cell.model.name,
        "sample": cell.sample, "round": a.round, "branch": a.branch,
        "prompt": _messages_json(a.prompt.messages), "completion": g.text,
        "prompt_tokens": g.prompt_tokens, "completion_tokens": g.completion_tokens,
        "latency_s": g.latency_s,
        "finish_reason": g.finish_reason, "candidate_id": a.candidate.candidate_id,
        "created_at": time.time(),
    }


def _messages_json(messages: list) -> str:
    """Every sample of a task shares its first prompt (methods/base.py:first_prompt): encode each
    prompt once. The cache holds the messages, so an id is not reused while its entry lives."""
    hit = _JSON.get(id(messages))
    if hit is None or hit[0] is not messages:
        if len(_JSON) >= 256:
            _JSON.clear()
        hit = _JSON[id(messages)] = (messages, json.dumps(messages))
    return hit[1]


_JSON: dict[int, tuple[list, str]] = {}


def evaluation_row(sweep_id: str, cell: Any, task: Task, a: Any, started: float,
                   hardware: str) -> dict:
    r = a.result
    return {
        "schema_version": SCHEMA_VERSION, "sweep_id": sweep_id, "cell_id": cell.cell_id,
        "candidate_id": a.candidate.candidate_id, "task_id": task.task_id,
        "task_hash": task.task_hash, "category": task.category, "level": task.level,
        "method": cell.method.name, "model": cell.model.name, "sample": cell.sample,
        "round": a.round, "branch": a.branch, "parent_candidate_id": a.parent_candidate_id,
        "stop_reason": a.stop_reason, "hardware": hardware,
        "gpu_name": r.gpu_name, "driver": r.driver, "torch_version": r.torch_version,
        "triton_version": r.triton_version, "device": r.device, "node_id": r.node_id,
        "node_accelerator": r.node_accelerator, "stage": str(r.stage),  # a Stage -> its string
        "call_ok": r.call_ok, "exec_ok": r.exec_ok, "error_kind": str(r.error_kind),
        "error_msg": r.error_msg, "flags": list(r.flags), "timing_skipped": r.timing_skipped,
        "cases": json.dumps([asdict(c) for c in r.cases]), "speedup": r.speedup,
        "sol_fraction": r.sol_fraction, "eval_wall_s": r.eval_wall_s, "started_at": started,
        "finished_at": time.time(), "final": a.final, "stage_s": json.dumps(r.stage_s),
        "peer_verdict": getattr(a.generation, "peer_verdict", "") or None,
        "stricter_reason": peer.of_result(r) or None,
        "seeds": [int(s) for s in getattr(r, "seeds", ())],
        "unseen_cases": list(getattr(r, "unseen_cases", ())),
        **peer_columns(a.generation),
    }
