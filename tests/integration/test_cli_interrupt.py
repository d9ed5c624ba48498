"""kbx takes Ctrl-C however it inherited SIGINT (kbx_ray/cli/process.py `interruptible`): a process
started with SIGINT ignored (a background job of a shell without job control) or blocked (a process
Ray started) would otherwise run on past it; and its caller's disposition and mask come back
after."""
from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow  # starts a child process

CODE = """
import os, signal, sys, time
from kbx_ray.cli.process import interruptible
signal.signal(signal.SIGINT, signal.SIG_IGN)
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
try:
    with interruptible():
        os.kill(os.getpid(), signal.SIGINT)  # as a Ctrl-C mid-sweep
        time.sleep(30)
    print("ran on past SIGINT")
except KeyboardInterrupt:
    print("interrupted")
with interruptible():
    inside = signal.getsignal(signal.SIGINT) is signal.default_int_handler
print(inside, signal.getsignal(signal.SIGINT) == signal.SIG_IGN,
      signal.SIGINT in signal.pthread_sigmask(signal.SIG_BLOCK, []))
"""


def test_an_inherited_ignored_and_blocked_sigint_interrupts_and_is_put_back():
    r = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split() == ["interrupted", "True", "True", "True"], r.stdout
