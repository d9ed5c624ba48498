"""The KernelBench probe never touches the network: a problem whose model comes from the Hugging Face
hub (level 4) is skipped at once, even in a process that imported huggingface_hub online before
(as vLLM and transformers do), and the process is left as online as it was."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from kbx_ray.errors import SuiteError
from kbx_ray.suites import kernelbench

pytestmark = pytest.mark.slow  # starts child processes

PROBLEM = '''
from huggingface_hub import hf_hub_download

def get_inputs():
    return []

def get_init_inputs():
    return [hf_hub_download("kbx-test/no-such-model", "config.json", cache_dir={cache!r})]
'''


class NetworkTouched(BaseException):
    """Raised by the blocked socket calls; a BaseException, so no retry loop swallows it."""


def test_probe_skips_a_hub_model_without_the_network_after_an_online_import(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    constants = pytest.importorskip("huggingface_hub.constants")
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)  # imported online, as vLLM leaves it
    touched: list[tuple] = []

    def blocked(*args, **kwargs):
        touched.append(args[:2])
        raise NetworkTouched(args[:2])
    monkeypatch.setattr(socket, "getaddrinfo", blocked)
    monkeypatch.setattr(socket.socket, "connect", blocked)
    monkeypatch.setattr(socket, "create_connection", blocked)

    path = tmp_path / "1_hub_model.py"
    with pytest.raises(SuiteError):
        kernelbench._probe(path, PROBLEM.format(cache=str(tmp_path / "hub")))
    assert touched == []
    # the rest of the process stays online (a vLLM engine may download its model after the load)
    assert constants.HF_HUB_OFFLINE is False and constants.is_offline_mode() is False
    assert "HF_HUB_OFFLINE" not in os.environ


def test_hub_offline_first_import_inside_is_put_back_online(tmp_path: Path):
    """huggingface_hub first imported inside the block reads offline there, online after it."""
    code = (
        "import os, sys\n"
        "os.environ.pop('HF_HUB_OFFLINE', None); os.environ.pop('TRANSFORMERS_OFFLINE', None)\n"
        "from kbx_ray.suites.kernelbench import hub_offline\n"
        "assert 'huggingface_hub.constants' not in sys.modules\n"
        "with hub_offline():\n"
        "    from huggingface_hub import constants\n"
        "    inside = constants.is_offline_mode()\n"
        "print(inside, constants.is_offline_mode(), os.environ.get('HF_HUB_OFFLINE'))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split() == ["True", "False", "None"]
