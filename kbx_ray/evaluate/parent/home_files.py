"""Files the parent writes into a worker's temp dir, which the candidate can write too.
More: kbx_ray/evaluate/parent/README.md, `home_files.py`.
"""
from __future__ import annotations

import os
import time
from pathlib import Path


def write_fresh(path: str | Path, data: bytes) -> None:
    """`data` at `path`, written afresh under a new name and renamed over it: whatever the
    candidate left at `path` (a file of its own, a link to a file of the parent's) is replaced,
    never kept and never followed."""
    folder, name = os.path.split(os.fspath(path))
    tmp = os.path.join(folder, f".{name}.{os.getpid()}.{time.monotonic_ns()}.new")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    try:
        with os.fdopen(fd, "wb") as fp:
            fp.write(data)
        os.replace(tmp, path)
    except BaseException:
        if os.path.lexists(tmp):
            os.unlink(tmp)
        raise
