"""A sweep's config.yaml and run.json -> the report's "What ran" table: one row per run of each
sweep (the first and each resume), so a reader sees the command, the code and the machines behind
the numbers (kbx_ray/records/provenance.py writes both files)."""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pandas as pd

COLUMNS = ["sweep_id", "run", "started", "state", "cells", "command", "commit", "versions",
           "hosts", "pools"]
NOTE = ("Each run of a sweep (the first and each resume), from its run.json; the resolved config and "
        "every grid variant as the cells ran it are in config.yaml beside the Parquet.")


def _versions(v: dict[str, Any]) -> str:
    keys = ("python", "torch", "triton", "ray", "vllm")
    return ", ".join(f"{k} {v[k]}" for k in keys if v.get(k))


def _pools(pools: dict[str, Any]) -> str:
    parts = []
    for name, seen in pools.items():
        gpus = "/".join(seen.get("gpu_name") or seen.get("device") or ["?"])
        drivers = "/".join(seen.get("driver") or [])
        parts.append(f"{name}: {gpus}" + (f" (driver {drivers})" if drivers else ""))
    return "; ".join(parts)


def _commit(git: dict[str, Any]) -> str:
    commit = (git.get("commit") or "")[:12]
    return (commit + (" (dirty)" if git.get("dirty") else "")) if commit else "unknown"


def run_rows(sweep_id: str, sweep_dir: Path) -> list[dict[str, str]]:
    path = Path(sweep_dir) / "run.json"
    try:
        runs = json.loads(path.read_text()).get("runs", [])
    except (OSError, ValueError, AttributeError):
        return [{"sweep_id": sweep_id, "run": "-", "state": "no run.json (a sweep from before "
                 "provenance was recorded)"}]
    rows = []
    for i, r in enumerate(runs):
        started = r.get("started_at")
        rows.append({
            "sweep_id": sweep_id, "run": str(i),
            "started": time.strftime("%Y-%m-%d %H:%M", time.gmtime(started)) if started else "",
            "state": str(r.get("state", "")),
            "cells": f"{r.get('cells_written', 0)}/{r.get('cells_to_run', 0)}",
            "command": " ".join(str(a) for a in (r.get("command") or [])[1:]),
            "commit": _commit(r.get("git") or {}), "versions": _versions(r.get("versions") or {}),
            "hosts": ", ".join(sorted({str(n.get("host")) for n in r.get("ray_nodes") or []})
                               or [str(r.get("host", ""))]),
            "pools": _pools(r.get("pools") or {})})
    return rows


def provenance_table(sources: list[Any]) -> pd.DataFrame:
    rows = [row for s in sources for row in run_rows(s.sweep_id, s.path)]
    return pd.DataFrame(rows, columns=COLUMNS).astype(object).fillna("")
