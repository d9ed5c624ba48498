"""What a sweep will do, before it does it: the dry-run's estimate, and a replay source's coverage
(every cell's first round, each branch, looked up in the source before Ray starts).
More: kbx_ray/orchestration/README.md, `dry_run.py`.
"""
from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from kbx_ray.methods.base import branches

if TYPE_CHECKING:
    from kbx_ray.config.hardware import HardwarePool
    from kbx_ray.config.plan import Sweep

log = logging.getLogger(__name__)
CLUSTER_YAML = Path(__file__).resolve().parents[2] / "cluster.yaml"


# Seconds one evaluation takes on a CPU pool (the Triton interpreter, small cases, no timing),
# where the sweep folder has no rows of its own yet. Measured on the 2-core AMD EPYC box, one
# evaluator: the default sweep's 176 cells took about 5 min (1.7 s a cell); activation/relu alone
# 2.0-2.3 s (`eval_wall_s`, quiet box); the median over the first 23 cells of math, activation,
# reduce and fusion 3.4 s with other jobs loading the box to 5x its cores. An LLM's wrong kernels
# mostly stop earlier.
CPU_EVAL_S = 2.0


@dataclass
class _Line:
    cells: int = 0
    evaluations: int = 0
    gpu_s: float = 0.0
    cpu_s: float = 0.0
    measured_s: float = 0.0  # GPU-seconds at the pools' measured cost (`eval_gpu_s`)
    unmeasured: int = 0  # evaluations on GPU pools with no measured cost


def cpu_eval_s(p: Sweep) -> tuple[float, str]:
    """(seconds per evaluation on a CPU pool, where that figure comes from): the median
    `eval_wall_s` of the sweep's own CPU rows when it is resumed, else CPU_EVAL_S."""
    import math

    if p.sweep_dir.is_dir() and p.done:
        try:
            from kbx_ray.sinks.parquet import read_table

            ev = read_table(p.sweep_dir, "evaluations")
            walls = ev.loc[ev["device"] == "cpu", "eval_wall_s"].dropna()
            if len(walls) and not math.isnan(float(walls.median())):
                return float(walls.median()), f"the median of this sweep's {len(walls)} rows"
        except Exception as e:  # noqa: BLE001 - only an estimate: fall back to the measured one
            log.debug("no per-evaluation cost from %s: %s", p.sweep_dir, e)
    return CPU_EVAL_S, "measured on a 2-core CPU box"


def _count(p: Sweep, pools: dict[str, HardwarePool]) -> tuple[dict[str, _Line], dict[str, _Line]]:
    """Evaluations and GPU-seconds at most, per method variant and per pool, of the cells to run
    on these pools (the first primary)."""
    variants = {m.name: m for m in p.axes.methods}
    cases = sum(len(t.cases) for t in p.tasks.values()) / max(1, len(p.tasks))
    per_eval_s = cases * (2 * p.evaluation.timing.budget_s + 0.2)
    cpu_s = cpu_eval_s(p)[0]
    todo = Counter(c.method.name for c in p.todo())
    names = list(pools)
    by_method = {name: _Line() for name in variants}
    by_pool = {name: _Line() for name in names}
    for name, n in todo.items():
        m = variants[name]
        evals = {pool: n * (m.rounds + 1) * branches(m) if pool == names[0] else n
                 for pool in names}
        for pool, k in evals.items():
            gpu = pools[pool].is_gpu
            for line in (by_pool[pool], by_method[name]):
                line.evaluations += k
                line.gpu_s += k * per_eval_s if gpu else 0.0
                line.cpu_s += 0.0 if gpu else k * cpu_s
                line.measured_s += k * pools[pool].eval_gpu_s if gpu else 0.0
                line.unmeasured += k if gpu and not pools[pool].eval_gpu_s else 0
            by_pool[pool].cells += n
        by_method[name].cells = n
    return by_method, by_pool


def estimate(p: Sweep) -> str:
    """Cells and GPU-hours, in total, per method and per pool (multi-line, for `--dry-run`); with
    no pool named, also on each GPU pool of cluster.yaml."""
    variants = {m.name: m for m in p.axes.methods}
    n_models, n_samples = len(p.axes.models), p.axes.samples
    names = list(p.pools)
    primary = names[0]
    by_method, by_pool = _count(p, p.pools)
    total_s = sum(line.gpu_s for line in by_pool.values())
    n_todo = p.n_todo
    head = (f"sweep {p.sweep_id}: {p.n_cells} cells ({len(p.tasks)} tasks x {len(variants)} "
            f"method variant(s) x {n_models} model(s) x {n_samples} sample(s)) x pools {names} "
            f"(primary {primary}); {p.n_cells - n_todo} already recorded, {n_todo} to run")
    if any(pool.is_gpu for pool in p.pools.values()):
        head += (f"; at most {total_s / 3600:.2f} GPU-hours (timing budget "
                 f"{p.evaluation.timing.budget_s:g} s per case and side)") + _measured(p.pools, by_pool)
    cpu_total = sum(line.cpu_s for line in by_pool.values())
    if cpu_total:
        per, source = cpu_eval_s(p)
        head += (f"; about {_cpu(cpu_total)} on the CPU pool ({per:.2f} s an "
                 f"evaluation, {source}; an evaluator's time: N evaluators divide the wall time)")
    lines = [head]
    for name, line in by_method.items():
        m = variants[name]
        lines.append(f"  method {name}: {line.cells} cells to run, up to {m.rounds + 1} round(s) "
                     f"x {branches(m)} branch(es): {line.evaluations} evaluations, {_hours(line)}")
    for name, line in by_pool.items():
        role = "primary: every round" if name == primary else "final candidates"
        kind = "GPU" if p.pools[name].is_gpu else "CPU, no timing"
        lines.append(f"  pool {name} ({kind}; {role}): {line.evaluations} evaluations, "
                     f"{_hours(line)}")
    if p.named_pools == ("auto",) and p.engine.ray_address:
        lines += cluster_estimate(p)  # the cluster it runs on: cluster.yaml's pools exist there
    elif p.named_pools == ("auto",) and _eval_node_types(CLUSTER_YAML):
        lines.append(f"  (GPU-hours on a cluster: name its pools, e.g. hardware=["
                     f"{','.join(_eval_node_types(CLUSTER_YAML))}], or engine.ray_address=auto "
                     "for every pool of cluster.yaml)")
    return "\n".join(lines)


def _measured(pools: dict[str, HardwarePool], by_pool: dict[str, _Line]) -> str:
    """The GPU-hours at each pool's measured cost per evaluation, where it is measured."""
    measured = {name: pools[name] for name, line in by_pool.items() if line.measured_s}
    if not measured:
        return "; no measured cost per evaluation for these GPUs (hardware eval_gpu_s)"
    hours = sum(line.measured_s for line in by_pool.values()) / 3600
    per = "; ".join(f"{name} {pool.eval_gpu_s:g} s an evaluation, {pool.eval_gpu_s_source}"
                    for name, pool in measured.items())
    left = sum(line.unmeasured for line in by_pool.values())
    rest = f", plus {left} evaluations on GPUs with no measured cost" if left else ""
    return f"; about {hours:.2f} GPU-hours at the measured cost ({per}){rest}"


def _hours(line: _Line) -> str:
    """GPU-hours, and CPU-hours where CPU pools evaluate too."""
    gpu = f"{line.gpu_s / 3600:.2f} GPU-hours"
    if not line.cpu_s:
        return gpu
    cpu = _cpu(line.cpu_s)
    return f"{gpu}, {cpu}" if line.gpu_s else cpu


def _cpu(seconds: float) -> str:
    """CPU time to read: minutes under 6 (0.1 h), where hours would print as 0.00."""
    return f"{seconds / 3600:.2f} CPU-hours" if seconds >= 360 else \
        f"{seconds / 60:.1f} CPU-minutes"


def cluster_estimate(p: Sweep, path: Path = CLUSTER_YAML) -> list[str]:
    """The same cells on each GPU pool of cluster.yaml (alone: every round on it), and on all of
    them at once (the first primary), with the least wall time its node types allow."""
    from kbx_ray.config.hardware import get_pool

    node_types = _eval_node_types(path)
    if not node_types:
        return []
    pools = {name: get_pool(name) for name in node_types}
    lines = [f"  on cluster.yaml's GPU pools (this run names none; plan for them with "
             f"hardware=[{','.join(pools)}] or any of them):"]
    for name, (node_type, gpus, nodes) in node_types.items():
        line = _count(p, {name: pools[name]})[1][name]
        lines.append(f"    pool {name} alone ({node_type}: {gpus} GPU(s) x up to {nodes} "
                     f"node(s)): {line.evaluations} evaluations, {line.gpu_s / 3600:.2f} "
                     f"GPU-hours, at least {line.gpu_s / 3600 / max(1, gpus * nodes):.2f} h of wall "
                     "time")
    every = _count(p, pools)[1]
    total = sum(line.gpu_s for line in every.values())
    # the pools run side by side: the busiest one (the primary, which judges every round) bounds it
    wall_h = max(every[name].gpu_s / 3600 / max(1, gpus * nodes)
                 for name, (_, gpus, nodes) in node_types.items())
    lines.append(f"    all {len(pools)} (hardware=[{','.join(pools)}], primary {next(iter(pools))}):"
                 f" {sum(line.evaluations for line in every.values())} evaluations, "
                 f"{total / 3600:.2f} GPU-hours, at least {wall_h:.2f} h of wall time")
    return lines


def _eval_node_types(path: Path) -> dict[str, tuple[str, int, int]]:
    """pool -> (node type, GPUs per node, max nodes) for cluster.yaml's evaluation node types."""
    import yaml

    try:
        spec = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError):
        return {}
    out: dict[str, tuple[str, int, int]] = {}
    for node_type, nt in (spec.get("available_node_types") or {}).items():
        labels = nt.get("labels") or {}
        if labels.get("kbx-role") == "evaluation" and labels.get("kbx-pool"):
            gpus = int((nt.get("resources") or {}).get("GPU", 0))
            out[str(labels["kbx-pool"])] = (node_type, gpus, int(nt.get("max_workers", 1)))
    return out


def describe(p: Sweep) -> str:
    """The estimate, then what the sweep will compile ahead and how it loads its pools."""
    return estimate(p) + _aot_line(p) + _balance_line(p)


def _balance_line(p: Sweep) -> str:
    """Every round of a cell is evaluated on its primary pool; the others see its final candidate
    only. Said up front, since a repair sweep then loads the primary pool many times over."""
    if len(p.pools) < 2:
        return ""
    per_cell = max((branches(m) * (m.rounds + 1) for m in p.axes.methods), default=1)
    if per_cell <= 1:
        return ""
    primary = next(iter(p.pools))
    return (f"; imbalance: pool {primary} evaluates up to {per_cell} candidates per cell (every "
            f"round), each other pool 1 (the final): give {primary} about {per_cell}x the "
            "evaluators, or put the pool with the most GPUs first in hardware=")


def _aot_line(p: Sweep) -> str:
    if p.engine.aot_compile == "off":
        return ""
    archs = sorted({pool.compute_capability for pool in p.pools.values() if pool.compute_capability})
    if not archs:
        return "; engine.aot_compile: no pool has a compute_capability, nothing is compiled ahead"
    return (f"; ahead-of-time compiles for {', '.join(f'sm_{a}' for a in archs)} on "
            f"{p.engine.compile_workers} CPU compile worker(s) (engine.aot_compile="
            f"{p.engine.aot_compile})")
