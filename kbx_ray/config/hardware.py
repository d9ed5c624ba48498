"""GPU pools: what each GPU type can do (roofline peaks) and how Ray places work on it.
More: kbx_ray/config/README.md, `hardware.py`.
"""
from __future__ import annotations

import dataclasses
import functools
import logging
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import yaml
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import ConfigKeyError, OmegaConfBaseException

from kbx_ray.errors import did_you_mean

log = logging.getLogger(__name__)

CONF_DIR = Path(__file__).resolve().parents[2] / "conf" / "hardware"

# dtype spellings -> the catalogue's keys ("torch." is stripped first; float8_* all mean fp8)
_DTYPE_ALIASES = {"fp32": "float32", "float": "float32", "fp16": "float16", "half": "float16",
                  "bf16": "bfloat16", "uint8": "int8"}


class UnknownHardwareError(KeyError):
    """A pool name nobody defined. A KeyError, so `pools[name]`-style callers still catch it."""

    def __str__(self) -> str:  # KeyError would repr() the message; users should read a line
        return str(self.args[0])


@dataclass(frozen=True)
class HardwarePool:
    name: str                                   # pool name used in configs, e.g. "h100"
    gpu: str                                    # device name as torch/NVML report it
    accelerator_type: str | None = None         # Ray accelerator type ("H100"); None = any/no GPU
    resources: dict[str, float] = field(default_factory=dict)  # extra custom Ray resources
    labels: dict[str, str] = field(default_factory=dict)       # Ray label selector
    peak_gbps: float = 0.0                      # memory bandwidth, GB/s; 0 = no roofline
    peak_tflops: dict[str, float] = field(default_factory=dict)  # dense TFLOP/s by dtype name
    sm_count: int = 0                           # streaming multiprocessors
    memory_gb: float = 0.0                      # device memory, GB
    name_patterns: tuple[str, ...] = ()         # whole-word substrings of the device name
    num_gpus_per_actor: float = 1               # GPUs each evaluator actor holds; 0 = CPU pool
    compute_capability: int = 0                 # e.g. 90 for sm_90 (ahead-of-time compiles); 0 = none
    eval_gpu_s: float = 0.0                     # measured GPU-seconds per evaluation; 0 = not measured
    eval_gpu_s_source: str = ""                 # where eval_gpu_s comes from (run, commit, jobs)

    @property
    def is_gpu(self) -> bool:
        return self.num_gpus_per_actor > 0

    def __hash__(self) -> int:  # the dict fields are unhashable; a pool is known by its name
        return hash(self.name)


def _pool_from_file(path: Path, base: HardwarePool | None) -> HardwarePool:
    """A pool from its yaml file, typed by the `HardwarePool` schema (OmegaConf): a file for a
    pool that exists overrides just its keys; each problem is one line naming the file."""
    name = path.stem
    try:
        data = OmegaConf.load(path)
    except yaml.YAMLError as exc:
        raise ValueError(f"{path}: not valid YAML ({str(exc).splitlines()[0]})") from None
    if not isinstance(data, DictConfig):
        raise ValueError(f"{path}: expected a mapping of pool fields")
    if data.get("name", name) != name:
        raise ValueError(f"{path}: name {data['name']!r} must match the file name {name!r}")
    node = OmegaConf.structured(base if base is not None else HardwarePool)
    OmegaConf.set_readonly(node, False)  # the pool is frozen once built, not while it is read
    node.name = name
    try:
        node = OmegaConf.merge(node, data)
    except ConfigKeyError as exc:
        known = [f.name for f in dataclasses.fields(HardwarePool) if f.name != "name"]
        raise ValueError(f"{path}: unknown key(s) [{exc.key!r}]{did_you_mean(str(exc.key), known)}"
                         f"; valid keys are {sorted(known)}") from None
    except OmegaConfBaseException as exc:
        raise ValueError(f"{path}: bad value ({exc.full_key}: {str(exc).splitlines()[0]})") from None
    if OmegaConf.is_missing(node, "gpu"):
        raise ValueError(f"{path}: a new pool needs at least 'gpu' (the device name)")
    return OmegaConf.to_object(node)  # type: ignore[return-value]


def _read_dir(conf_dir: Path, pools: dict[str, HardwarePool]) -> dict[str, HardwarePool]:
    for path in sorted(conf_dir.glob("*.yaml")):
        pools[path.stem] = _pool_from_file(path, pools.get(path.stem))
    return pools


@functools.cache
def _catalogue() -> dict[str, HardwarePool]:
    if not CONF_DIR.is_dir():  # a non-editable install that left conf/ behind
        raise FileNotFoundError(f"hardware catalogue {CONF_DIR} is missing: install kbx_ray with "
                                "`pip install -e .` from the repository")
    return _read_dir(CONF_DIR, {})


def __getattr__(name: str) -> Any:
    """`CATALOGUE` is read from conf/hardware on first use, so importing this module is free."""
    if name == "CATALOGUE":
        return _catalogue()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def get_pool(name: str, pools: Mapping[str, HardwarePool] | None = None) -> HardwarePool:
    pools = _catalogue() if pools is None else pools
    if name not in pools:
        raise UnknownHardwareError(f"unknown hardware pool {name!r}: choose one of "
                                   f"{', '.join(sorted(pools))} or add conf/hardware/{name}.yaml")
    return pools[name]


def _pattern_hits(pattern: str, device_name: str) -> bool:
    """Whole-word, case-insensitive: "H20" must not match "H200", nor "L4" match "L40S"."""
    return re.search(rf"(?<![A-Za-z0-9]){re.escape(pattern)}(?![A-Za-z0-9])", device_name,
                     re.IGNORECASE) is not None


def match_pool(device_name: str, pools: Mapping[str, HardwarePool] | None = None
               ) -> HardwarePool | None:
    """The pool whose longest name pattern occurs in device_name, or None."""
    best: tuple[int, HardwarePool] | None = None
    for pool in (_catalogue() if pools is None else pools).values():
        for pattern in pool.name_patterns:
            if _pattern_hits(pattern, device_name) and (best is None or len(pattern) > best[0]):
                best = (len(pattern), pool)
    return best[1] if best else None


def detect_local(pools: Mapping[str, HardwarePool] | None = None) -> HardwarePool:
    """The pool of this machine's GPU 0, so a laptop or a single GPU host needs no hardware=."""
    pools = _catalogue() if pools is None else pools
    try:
        import torch
    except ImportError:
        return get_pool("cpu", pools)
    if not torch.cuda.is_available():
        return get_pool("cpu", pools)
    device_name = torch.cuda.get_device_name(0)
    pool = match_pool(device_name, pools)
    if pool is not None:
        return pool
    props = torch.cuda.get_device_properties(0)
    slug = re.sub(r"[^a-z0-9]+", "_", device_name.lower().removeprefix("nvidia ")).strip("_")
    log.warning("GPU %r is not in the hardware catalogue: timing works but there is no roofline; "
                "add conf/hardware/%s.yaml with its peaks", device_name, slug)
    return HardwarePool(name=slug, gpu=device_name, sm_count=props.multi_processor_count,
                        memory_gb=round(props.total_memory / 1e9, 1), name_patterns=(device_name,))


def check_gpu_name(pool: HardwarePool, seen: str) -> str | None:
    """None if the evaluator ran where the pool says; else a line that names the misplacement.

    Ray places by what a node advertises, which a mistyped resource or label can get wrong; the
    GPU the worker actually opened is the ground truth, and timing on the wrong GPU is worse
    than no timing at all.
    """
    if not pool.is_gpu:
        if seen in ("", "cpu"):
            return None
        expected = "no GPU"
    elif any(_pattern_hits(p, seen) for p in pool.name_patterns):
        return None
    else:
        expected = f"an {pool.name_patterns[0]}" if pool.name_patterns else f"a {pool.gpu}"
    return (f"pool {pool.name!r} expected {expected} but the evaluator saw {seen!r}: "
            "fix the pool's placement (accelerator_type/resources/labels)")


ROLE_LABEL = "kbx-role"      # cluster.yaml's node roles: head, generation, evaluation, compile
POOL_LABEL = "kbx-pool"      # the hardware pool an evaluation node type serves


def on_role_cluster(pool: HardwarePool) -> HardwarePool:
    """The pool as placed on a cluster laid out like cluster.yaml (nodes labelled kbx-role).

    Accelerator type alone would let an h100 evaluator take a GPU of the H100 generation node, so
    evaluators also select `kbx-role: evaluation` and `kbx-pool: <pool>`, and ask for one unit of
    `eval_<pool>` per GPU: the label keeps them off generation nodes, and the resource is what an
    autoscaler that does not read label selectors (Ray's v1) needs to pick the right node type.
    A CPU pool keeps its own placement: it has no node type of its own.
    """
    if not pool.is_gpu:
        return pool
    labels = {ROLE_LABEL: "evaluation", POOL_LABEL: pool.name, **pool.labels}
    resources = dict(pool.resources) or {f"eval_{pool.name}": float(pool.num_gpus_per_actor)}
    return dataclasses.replace(pool, labels=labels, resources=resources)


def ray_options(pool: HardwarePool) -> dict[str, Any]:
    """Keyword arguments for `actor_cls.options(**opts)` that pin an evaluator to this pool."""
    return {"num_gpus": pool.num_gpus_per_actor if pool.is_gpu else 0,
            **node_options(pool.accelerator_type, pool.resources, pool.labels)}


def node_options(accelerator_type: str | None, resources: Mapping[str, float],
                 labels: Mapping[str, str]) -> dict[str, Any]:
    """The Ray options that choose an actor's node (evaluators here, vLLM replicas in llm/): the
    accelerator type, custom resources and a label selector, each only when set."""
    opts: dict[str, Any] = {}
    if accelerator_type:
        opts["accelerator_type"] = accelerator_type
    if resources:
        opts["resources"] = dict(resources)
    if labels:
        opts["label_selector"] = dict(labels)
    return opts


def peak_for(pool: HardwarePool, dtype_name: str) -> float:
    """Dense peak TFLOP/s of `pool` for a dtype; 0.0 means "no roofline".

    Fallbacks, for datasheets that leave a dtype out: float16 and bfloat16 stand in for each
    other (same tensor-core rate on every catalogued GPU); int8 is 2x float16 (the ratio on
    Ampere/Ada/Hopper); fp8 on GPUs without FP8 tensor cores runs upcast, so it gets float16.
    float32 is the CUDA-core figure, never tf32: ask for "tf32" explicitly when the kernel
    lets tl.dot use tensor cores on fp32 inputs. Other dtypes (int32, float64...) get float32.
    """
    peaks = pool.peak_tflops
    key = dtype_name.lower().removeprefix("torch.")
    key = "fp8" if key.startswith("float8") else _DTYPE_ALIASES.get(key, key)
    if key in peaks:
        return float(peaks[key])
    half = peaks.get("float16", peaks.get("bfloat16", 0.0))
    if key in ("float16", "bfloat16", "fp8"):
        return float(half)
    if key == "int8":
        return 2.0 * float(half)
    return float(peaks.get("float32", 0.0))


def selector_matches(selector: Mapping[str, str], labels: Mapping[str, str]) -> bool:
    """Ray's selector forms "v", "!v", "in(a,b)", "!in(a,b)"; a negation matches a missing key."""
    for key, want in selector.items():
        negate = want.startswith("!")
        body = want[1:] if negate else want
        values = {v.strip() for v in body[3:-1].split(",")} if body.startswith("in(") else {body}
        if (labels.get(key) in values) == negate:
            return False
    return True


def pool_available(pool: HardwarePool) -> bool:
    """Whether any live node of the connected Ray cluster could host one of this pool's actors.

    Ray would otherwise leave such an actor pending forever; checking at start turns that hang
    into an error that names the pool. Needs `ray.init()` to have run.
    """
    import ray

    opts = ray_options(pool)
    need: dict[str, float] = {"GPU": opts["num_gpus"]} if opts["num_gpus"] else {"CPU": 0.0}
    if pool.accelerator_type:
        need[f"accelerator_type:{pool.accelerator_type}"] = 0.001
    need.update(pool.resources)
    for node in ray.nodes():
        have = node.get("Resources", {})
        if (node.get("Alive") and all(k in have and have[k] >= v for k, v in need.items())
                and selector_matches(pool.labels, node.get("Labels") or {})):
            return True
    return False


def unavailable_message(pool: HardwarePool) -> str:
    """The one line to show when `pool_available` says no."""
    wants = [f"accelerator_type:{pool.accelerator_type}"] if pool.accelerator_type else []
    wants += [f"{k}={v:g}" for k, v in pool.resources.items()]
    wants += [f"label {k}={v}" for k, v in pool.labels.items()]
    what = ", ".join(wants) or ("a GPU" if pool.is_gpu else "a CPU")
    return (f"no node in the Ray cluster offers hardware pool {pool.name!r} ({what}): "
            "add a node type for it in cluster.yaml, or drop it from the sweep's hardware axis")


PEAK_DTYPES = ("float32", "tf32", "float16", "bfloat16", "int8", "fp8")


def peak_table(pool: HardwarePool) -> dict[str, float]:
    """`peak_for` of every dtype the roofline asks about, for an evaluator's config."""
    return {k: peak_for(pool, k) for k in PEAK_DTYPES}
