"""The driver's side of a Ray session: where Ray's own output goes, and noticing that the cluster
is gone before Ray ends the driver for it.

Ray prints every actor's stdout and stderr (vLLM's engine logs, a dying raylet's state dump) on
the driver's stdout and stderr. The CLI promises that stdout holds only the answer, so during a
sweep that output goes to `<sweep folder>/ray.log` instead.
More: kbx_ray/orchestration/README.md, `ray_session.py`.
"""
from __future__ import annotations

import asyncio
import logging
import socket
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

log = logging.getLogger(__name__)

LOG_FILE = "ray.log"


class ClusterLost(RuntimeError):
    """The Ray cluster's GCS stopped answering mid-sweep."""


@contextmanager
def worker_output_to(path: Path) -> Iterator[None]:
    """Ray's forwarded actor output goes to `path` inside the block (where the driver forwards it
    at all: `ray.init(log_to_driver=True)`, the default); the driver's own handler is put back
    after."""
    try:
        from ray._private import worker as ray_worker
        from ray._private.ray_logging import global_worker_stdstream_dispatcher as dispatcher
    except ImportError:  # another Ray layout: its output stays where Ray puts it
        yield
        return
    name = "ray_print_logs"
    saved = [h for h in list(dispatcher.handlers) if h[0] == name]
    if not saved:
        yield
        return
    out = open(path, "a", buffering=1, encoding="utf-8", errors="replace")

    def to_file(data: dict) -> None:
        try:
            ray_worker.print_worker_logs(data, out)
        except (OSError, ValueError):  # the file closed under a late batch: drop it
            pass

    dispatcher.remove_handler(name)
    dispatcher.add_handler(name, to_file)
    try:
        yield
    finally:
        dispatcher.remove_handler(name)
        for handler in saved:
            dispatcher.add_handler(*handler)
        out.close()


def gcs_address() -> tuple[str, int] | None:
    import ray

    try:
        host, port = str(ray.get_runtime_context().gcs_address).rsplit(":", 1)
        return host, int(port)
    except Exception:  # noqa: BLE001 - not connected, or a client session: nothing to watch
        return None


def reachable(address: tuple[str, int], timeout_s: float = 2.0) -> bool:
    try:
        with socket.create_connection(address, timeout=timeout_s):
            return True
    except OSError:
        return False


async def watch(lost_after_s: float = 15.0, every_s: float = 2.0) -> None:
    """Returns never; raises `ClusterLost` once the GCS has refused connections for
    `lost_after_s` (well inside Ray's own 60 s, after which it ends the driver)."""
    address = gcs_address()
    if address is None:
        await asyncio.Event().wait()
    down_since: float | None = None
    while True:
        await asyncio.sleep(every_s)
        up = await asyncio.to_thread(reachable, address)
        if up:
            down_since = None
            continue
        down_since = down_since or time.monotonic()
        if time.monotonic() - down_since >= lost_after_s:
            raise ClusterLost(f"the Ray cluster's GCS at {address[0]}:{address[1]} stopped "
                              f"answering ({lost_after_s:g} s): its head node was stopped or lost")
