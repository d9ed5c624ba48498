"""What the README's install gives: the KernelBench extra holds what its problems import, and the
README's counts are what that install loads (the real tree, $KBX_EXTERNAL)."""
from __future__ import annotations

import os
import re
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
KB = Path(os.environ.get("KBX_EXTERNAL") or REPO / ".." / "shared" / "external").resolve() / \
    "KernelBench" / "KernelBench"
MAMBA2 = ["level3/48_Mamba2ReturnY", "level3/49_Mamba2ReturnFinalState"]


def extras() -> dict[str, list[str]]:
    return tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]


def test_the_kernelbench_extra_and_the_test_install_carry_einops():
    assert "einops" in extras()["kernelbench"] and "einops" in extras()["dev"]
    readme = (REPO / "README.md").read_text()
    assert 'pip install -e ".[kernelbench]"' in readme


@pytest.mark.skipif(not KB.is_dir(), reason=f"no KernelBench tree at {KB} (set KBX_EXTERNAL)")
def test_mamba2_loads_and_levels_1_to_3_load_what_the_readme_says(tmp_path, monkeypatch):
    pytest.importorskip("einops", reason="the [kernelbench] extra is not installed")
    from kbx_ray.suites.builtin import load_suite

    monkeypatch.setenv("KBX_SUITE_CACHE", str(tmp_path))
    skipped: dict[str, str] = {}
    assert [t.task_id for t in load_suite(KB, MAMBA2, "kernelbench", skipped)] == MAMBA2, skipped
    tasks = load_suite(KB, ["level1", "level2", "level3"], "kernelbench", skipped)
    said = re.search(r"Levels 1-3 load whole \((\d+)\)", (REPO / "README.md").read_text())
    assert said and len(tasks) == int(said.group(1)), (len(tasks), skipped)


@pytest.mark.skipif(not KB.is_dir(), reason=f"no KernelBench tree at {KB} (set KBX_EXTERNAL)")
def test_without_einops_the_two_mamba2_problems_are_skipped_as_the_readme_says(tmp_path,
                                                                               monkeypatch):
    """The README's own first install (no extra): 248, the Mamba2 pair skipped `needs einops`."""
    import sys

    from kbx_ray.suites.builtin import load_suite

    monkeypatch.setenv("KBX_SUITE_CACHE", str(tmp_path))  # probed afresh, not served from a cache
    monkeypatch.setitem(sys.modules, "einops", None)  # `import einops` fails as if not installed
    skipped: dict[str, str] = {}
    tasks = load_suite(KB, ["level1", "level2", "level3"], "kernelbench", skipped)
    readme = (REPO / "README.md").read_text()
    said = re.search(r"without einops the two Mamba2 problems are skipped, `needs einops`: (\d+)",
                     " ".join(readme.split()))
    assert said and len(tasks) == int(said.group(1)), (len(tasks), skipped)
    assert sorted(skipped) == MAMBA2, skipped
    assert all(why.startswith("needs einops") for why in skipped.values()), skipped
