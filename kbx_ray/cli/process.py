"""The kbx process's own ends: logs on stderr, Ctrl-C however SIGINT was inherited, a closed
stdout, and an exit that skips Ray's handlers once its cluster is gone."""
from __future__ import annotations

import logging
import signal
import sys
import threading
from contextlib import contextmanager
from typing import Iterator


def setup_logging(verbose: bool = False, quiet: bool = False) -> None:
    """Logs on stderr: rich on a terminal; outside one (a pipe, a file, CI) plain lines that are
    never wrapped, so a path is one grep-able string. `quiet`: warnings and errors only."""
    level = logging.DEBUG if verbose else logging.WARNING if quiet else logging.INFO
    handler: logging.Handler
    if sys.stderr.isatty():
        from rich.console import Console
        from rich.logging import RichHandler

        handler = RichHandler(console=Console(stderr=True), show_path=False, rich_tracebacks=False)
        handler.setFormatter(logging.Formatter("%(message)s"))
    else:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)-7s %(message)s",
                                               "%H:%M:%S"))
    logging.basicConfig(level=level, handlers=[handler], force=True)
    for noisy in ("ray", "wandb", "urllib3", "filelock", "vllm"):
        logging.getLogger(noisy).setLevel(max(level, logging.WARNING))
    # the console sink's progress and summary follow -q (sinks/console.py `_quiet`)
    logging.getLogger("kbx_ray.sinks.console").setLevel(logging.WARNING if quiet else
                                                        logging.NOTSET)


def exit_now(code: int) -> None:
    """Exit without Ray's exit handlers: with its cluster gone they wait on it (up to a minute)
    and then print their own dump."""
    import os

    try:  # the local Ray processes this driver started (a head node of its own), ended first
        from ray._private import worker as ray_worker

        node = ray_worker._global_node
        if node is not None and node.head:
            node.kill_all_processes(check_alive=False, allow_graceful=False)
    except Exception:  # noqa: BLE001 - exiting anyway
        pass
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


@contextmanager
def interruptible() -> Iterator[None]:
    """SIGINT raises KeyboardInterrupt inside the block, however the process inherited it; the
    disposition and mask are put back after (kbx called in-process leaves its caller as it was).

    A process starts with SIGINT ignored when its parent ignored it (a background job of a shell
    without job control, as scripts and CI runners start them; nohup-like wrappers), and with it
    blocked when its parent blocked it (Ray starts its processes so). Python then installs no
    handler, or never sees the signal, so a sweep ran on to its end, exit 0, past Ctrl-C or
    `kill -INT` instead of stopping with what it had recorded. As `ray job stop` relies on for a
    job's entrypoint (Ray unblocks SIGINT there), a command line that documents Ctrl-C takes it.
    Only in the main thread, where Python runs signal handlers."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = signal.getsignal(signal.SIGINT)
    mask = signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    if before == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        if before == signal.SIG_IGN:
            signal.signal(signal.SIGINT, signal.SIG_IGN)
        if signal.SIGINT in mask:
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})


def closed_stdout() -> int:
    """The reader of stdout left (`kbx tasks --json | head`): stop quietly, as `cat` does (exit
    141, 128 + SIGPIPE). stdout is pointed at /dev/null so the exit's own flush cannot fail."""
    import os

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return 141
