"""A write-ahead log of generations, so that a resumed sweep never calls a model twice.

Each generation is appended (one JSON line, flushed) the moment it exists, before its candidate is
evaluated. Parquet parts are written per batch of complete cells; a driver killed in between loses
only evaluations, and on resume `lookup` serves the logged generation instead of a new LLM call.
A run that finishes cleanly has every cell it logged in Parquet, and removes the file
(engine.run_sweep); one that stopped keeps it for the resume.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import IO

from kbx_ray.types import Generation

FILE = "generations.wal.jsonl"


class GenerationLog:
    def __init__(self, sweep_dir: Path, fsync: bool = False) -> None:
        self.path = Path(sweep_dir) / FILE
        self.fsync = fsync  # flush alone survives a killed driver; fsync also a lost machine
        self.entries: dict[tuple[str, int, int], Generation] = {}
        if self.path.exists():
            for line in self.path.read_text().splitlines():
                try:
                    d = json.loads(line)
                    key = (d.pop("cell_id"), int(d.pop("round")), int(d.pop("branch", 0)))
                    self.entries[key] = Generation(**d)
                except (ValueError, TypeError, KeyError):
                    continue  # a line torn by a kill: that generation is simply redone
        self._fp: IO[str] | None = None

    def lookup(self, cell_id: str, rnd: int, branch: int = 0) -> Generation | None:
        return self.entries.get((cell_id, rnd, branch))

    def append(self, cell_id: str, rnd: int, branch: int, gen: Generation) -> None:
        if self._fp is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            torn = _ends_mid_line(self.path)
            self._fp = open(self.path, "a")
            if torn:  # a kill mid-line: end it, or the next entry is glued to it and lost too
                self._fp.write("\n")
        self._fp.write(json.dumps({"cell_id": cell_id, "round": rnd, "branch": branch,
                                   **vars(gen)}) + "\n")  # flat fields: asdict's deep copy is waste
        self._fp.flush()
        if self.fsync:
            os.fsync(self._fp.fileno())
        self.entries[(cell_id, rnd, branch)] = gen

    def forget(self, cell_ids: set[str]) -> None:
        """Drop in-memory entries of cells now recorded in Parquet (the file keeps them)."""
        for key in [k for k in self.entries if k[0] in cell_ids]:
            del self.entries[key]

    def close(self) -> None:
        if self._fp is not None:
            self._fp.close()
            self._fp = None


def _ends_mid_line(path: Path) -> bool:
    if not path.exists() or path.stat().st_size == 0:
        return False
    with open(path, "rb") as f:
        f.seek(-1, os.SEEK_END)
        return f.read(1) != b"\n"
