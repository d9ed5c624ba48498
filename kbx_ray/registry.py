"""One registry for every extension point: `@register(kind, name)` on a factory.
More: kbx_ray/README.md, `registry.py`.
"""
from __future__ import annotations

import importlib
import importlib.util
import logging
import pkgutil
from collections.abc import Iterator, MutableMapping
from dataclasses import dataclass
from typing import Any, Callable

log = logging.getLogger(__name__)

F = Callable[..., Any]


class RegistryError(ValueError):
    """An unknown name, or an entry whose optional dependency is not installed."""


class MissingDependencyError(RegistryError):
    """The entry needs a package that is not installed; the message says what to install."""


@dataclass
class Entry:
    kind: str
    name: str
    target: F | str                 # the factory, or "module:factory" imported when built
    requires: tuple[str, ...] = ()  # top-level modules the factory imports
    extra: str = ""                 # the pyproject extra that installs them ("" = name them)
    check: F | None = None          # the entry's own settings check, run before anything starts
    # capabilities the engine asks about instead of comparing names:
    gpus: F | None = None           # backend: model config -> its replicas' placement (replicas,
    #                                 gpus_per_replica, accelerator_type, resources, labels,
    #                                 max_inflight); None: it holds no GPU of the cluster
    replays: bool = False           # backend: answers from recorded completions (a `Replayer`)
    runs_rounds: bool = False       # method: runs `method.rounds` refinement rounds (a rounds axis
    #                                 multiplies it)
    options: type | None = None     # its options dataclass, typed before anything starts from
    #                                 `model.options` (backend), `method.options` (method),
    #                                 `suite.options` (suite) or `sink.<name>` (sink); None: it
    #                                 takes none

    def missing(self) -> str | None:
        """One line naming what to install, or None when every required module is present."""
        absent = [m for m in self.requires if importlib.util.find_spec(m) is None]
        if not absent:
            return None
        how = f"'kbx_ray[{self.extra}]'" if self.extra else " ".join(absent)
        return (f"{self.kind} {self.name!r} needs {', '.join(absent)}, which is not installed: "
                f"pip install {how}")

    def factory(self) -> F:
        problem = self.missing()
        if problem:
            raise MissingDependencyError(problem)
        if callable(self.target):
            return self.target
        module, _, attr = self.target.partition(":")
        return getattr(importlib.import_module(module), attr)


class Registry(MutableMapping):
    """name -> Entry for one kind; `in`, lookup and listing discover the kind's packages first."""

    def __init__(self, kind: str, packages: tuple[str, ...]) -> None:
        self.kind, self.packages = kind, packages
        self._entries: dict[str, Entry] = {}
        self._discovered = False

    def discover(self) -> None:
        """Import every module of the kind's packages once, so their decorators run."""
        if self._discovered:
            return
        self._discovered = True
        for package in self.packages:
            pkg = importlib.import_module(package)
            for info in pkgutil.iter_modules(pkg.__path__, f"{package}."):
                try:
                    importlib.import_module(info.name)
                except ImportError as e:  # a module whose own import fails registers nothing
                    log.debug("registry %s: skipped %s: %s", self.kind, info.name, e)

    def add(self, entry: Entry) -> None:
        old = self._entries.get(entry.name)
        if old is not None and old.target is not entry.target and _origin(old) != _origin(entry):
            raise RegistryError(f"{self.kind} {entry.name!r} is registered twice "
                                f"({_origin(old)} and {_origin(entry)}): rename one")
        self._entries[entry.name] = entry

    def entry(self, name: str) -> Entry:
        if name not in self._entries:
            self.discover()
        if name not in self._entries:
            raise RegistryError(f"unknown {self.kind} {name!r}: choose one of {', '.join(self)}")
        return self._entries[name]

    def build(self, name: str, *args: Any, **kwargs: Any) -> Any:
        return self.entry(name).factory()(*args, **kwargs)

    # MutableMapping: `name in REGISTRY`, sorted(REGISTRY), REGISTRY[name] = "module:factory"
    def __getitem__(self, name: str) -> Entry:
        try:
            return self.entry(name)
        except RegistryError:
            raise KeyError(name) from None

    def __setitem__(self, name: str, target: F | str | Entry) -> None:
        entry = target if isinstance(target, Entry) else Entry(self.kind, name, target)
        self._entries[name] = entry

    def __delitem__(self, name: str) -> None:
        del self._entries[name]

    def __contains__(self, name: object) -> bool:
        if name not in self._entries:
            self.discover()
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        self.discover()
        return iter(sorted(self._entries))

    def __len__(self) -> int:
        self.discover()
        return len(self._entries)


def _origin(e: Entry) -> str:
    t = e.target
    return t if isinstance(t, str) else f"{t.__module__}:{t.__qualname__}"


# Each kind and the packages its entries live in; what an entry's factory takes and returns is the
# kind's contract: backend (model config -> Backend, llm/base.py), method (method config -> Method,
# methods/base.py), sink (SinkContext -> Sink or None, sinks/base.py), suite (its typed options,
# none where it registered none -> SuiteFormat, suites/__init__.py).
KINDS: dict[str, Registry] = {
    "backend": Registry("backend", ("kbx_ray.llm", "kbx_ray.mutation")),
    "method": Registry("method", ("kbx_ray.methods",)),
    "sink": Registry("sink", ("kbx_ray.sinks",)),
    "suite": Registry("suite", ("kbx_ray.suites",)),
}


def registry(kind: str) -> Registry:
    if kind not in KINDS:
        raise RegistryError(f"unknown registry kind {kind!r}: choose one of "
                            f"{', '.join(sorted(KINDS))}")
    return KINDS[kind]


def add_kind(kind: str, packages: tuple[str, ...]) -> Registry:
    """A new extension point: its name and the packages to discover."""
    return KINDS.setdefault(kind, Registry(kind, packages))


def register(kind: str, name: str, *, requires: tuple[str, ...] = (), extra: str = "",
             check: F | None = None, gpus: F | None = None, replays: bool = False,
             runs_rounds: bool = False, options: type | None = None) -> Callable[[F], F]:
    """Register the decorated factory as `name` of `kind`; it is returned unchanged. `options`:
    the dataclass that types the entry's own settings (the structured schema checks them: an
    unknown key or a bad value is one line). `check`, for a backend: (model config, local) ->
    None, for what a type cannot say (a weights folder, vLLM's engine arguments). The capabilities
    (`Entry`'s fields) are declared here, so the engine asks the entry and never compares a name."""

    def wrap(factory: F) -> F:
        registry(kind).add(Entry(kind, name, factory, tuple(requires), extra, check, gpus,
                                 replays, runs_rounds, options))
        return factory

    return wrap
