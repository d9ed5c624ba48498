"""What a sweep will do, before it does it: the dry-run's estimate, and a replay source's coverage
(every cell's first round, each branch, looked up in the source before Ray starts).

With no pool named (`hardware=[auto]`: on a CPU box, 0 GPU-hours), it also estimates the cells on
each GPU pool of cluster.yaml, alone and all together. The estimate counts what each cell can cost
at most: a method with R rounds and B branches makes up
to (R + 1) x B evaluations on the primary pool, and its final candidate one more on each other pool;
a timed evaluation takes up to both sides' timing budget per case. A rounds axis is already in the
method variants (`repair@R3`), so it is counted per budget.
"""
from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kbx_ray.errors import ConfigError
from kbx_ray.grid import methods, models

log = logging.getLogger(__name__)
CLUSTER_YAML = Path(__file__).resolve().parents[1] / "cluster.yaml"


@dataclass
class _Line:
    cells: int = 0
    evaluations: int = 0
    gpu_s: float = 0.0


def _count(p: Any, pools: dict[str, Any]) -> tuple[dict[str, _Line], dict[str, _Line]]:
    """Evaluations and GPU-seconds at most, per method variant and per pool, of the cells to run
    on these pools (the first primary)."""
    cfg = p.cfg
    variants = {m.name: m for m in methods(cfg)}
    cases = sum(len(t.cases) for t in p.tasks.values()) / max(1, len(p.tasks))
    per_eval_s = cases * (2 * cfg.evaluation.timing.budget_s + 0.2)
    todo = Counter(c.method.name for c in p.todo())
    names = list(pools)
    by_method = {name: _Line() for name in variants}
    by_pool = {name: _Line() for name in names}
    for name, n in todo.items():
        m = variants[name]
        evals = {pool: n * (m.rounds + 1) * m.branches if pool == names[0] else n
                 for pool in names}
        for pool, k in evals.items():
            gpu_s = k * per_eval_s if pools[pool].is_gpu else 0.0
            by_pool[pool].cells += n
            by_pool[pool].evaluations += k
            by_pool[pool].gpu_s += gpu_s
            by_method[name].evaluations += k
            by_method[name].gpu_s += gpu_s
        by_method[name].cells = n
    return by_method, by_pool


def estimate(p: Any) -> str:
    """Cells and GPU-hours, in total, per method and per pool (multi-line, for `--dry-run`); with
    no pool named, also on each GPU pool of cluster.yaml."""
    cfg = p.cfg
    variants = {m.name: m for m in methods(cfg)}
    n_models, n_samples = len(models(cfg)), cfg.sweep.samples
    names = list(p.pools)
    primary = names[0]
    by_method, by_pool = _count(p, p.pools)
    total_s = sum(line.gpu_s for line in by_pool.values())
    n_todo = p.n_todo
    head = (f"sweep {p.sweep_id}: {p.n_cells} cells ({len(p.tasks)} tasks x {len(variants)} "
            f"method variant(s) x {n_models} model(s) x {n_samples} sample(s)) x pools {names} "
            f"(primary {primary}); {p.n_cells - n_todo} already recorded, {n_todo} to run; at "
            f"most {total_s / 3600:.2f} GPU-hours (timing budget "
            f"{cfg.evaluation.timing.budget_s:g} s per case and side)")
    lines = [head]
    for name, line in by_method.items():
        m = variants[name]
        lines.append(f"  method {name}: {line.cells} cells to run, up to {m.rounds + 1} round(s) "
                     f"x {m.branches} branch(es): {line.evaluations} evaluations, "
                     f"{line.gpu_s / 3600:.2f} GPU-hours")
    for name, line in by_pool.items():
        role = "primary: every round" if name == primary else "final candidates"
        kind = "GPU" if p.pools[name].is_gpu else "CPU, no timing"
        lines.append(f"  pool {name} ({kind}; {role}): {line.evaluations} evaluations, "
                     f"{line.gpu_s / 3600:.2f} GPU-hours")
    if list(cfg.hardware) == ["auto"]:
        lines += cluster_estimate(p)
    return "\n".join(lines)


def cluster_estimate(p: Any, path: Path = CLUSTER_YAML) -> list[str]:
    """The same cells on each GPU pool of cluster.yaml (alone: every round on it), and on all of
    them at once (the first primary), with the least wall time its node types allow."""
    from kbx_ray.hardware import get_pool

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


def describe(p: Any) -> str:
    """The estimate, then what the sweep will compile ahead and how it loads its pools."""
    return estimate(p) + _aot_line(p) + _balance_line(p)


def _balance_line(p: Any) -> str:
    """Every round of a cell is evaluated on its primary pool; the others see its final candidate
    only. Said up front, since a repair sweep then loads the primary pool many times over."""
    if len(p.pools) < 2:
        return ""
    per_cell = max((max(1, m.branches) * (m.rounds + 1) for m in methods(p.cfg)), default=1)
    if per_cell <= 1:
        return ""
    primary = next(iter(p.pools))
    return (f"; imbalance: pool {primary} evaluates up to {per_cell} candidates per cell (every "
            f"round), each other pool 1 (the final): give {primary} about {per_cell}x the "
            "evaluators, or put the pool with the most GPUs first in hardware=")


def _aot_line(p: Any) -> str:
    if p.cfg.engine.aot_compile == "off":
        return ""
    archs = sorted({pool.compute_capability for pool in p.pools.values() if pool.compute_capability})
    if not archs:
        return "; engine.aot_compile: no pool has a compute_capability, nothing is compiled ahead"
    return (f"; ahead-of-time compiles for {', '.join(f'sm_{a}' for a in archs)} on "
            f"{p.cfg.engine.compile_workers} CPU compile worker(s) (engine.aot_compile="
            f"{p.cfg.engine.aot_compile})")


def check_replay(p: Any) -> None:
    """A replay model whose source cannot answer a cell's first round stops here, in one line
    (with `on_missing=skip`: one warning naming how many cells will be recorded as empty)."""
    from kbx_ray.llm.base import REGISTRY, replays

    for model in models(p.cfg):
        if not replays(model):
            continue
        backend = REGISTRY.build(model.backend, model)
        missing, total, first = backend.unanswered(
            c for c in p.todo() if c.model.name == model.name)
        if not missing:
            continue
        where = backend.source
        others = {o for m in methods(p.cfg) for o in backend.other_methods(m.name)}
        hint = (f"the source's rows are of method {', '.join(sorted(others))}: set "
                "model.options.match_method=false to replay them under another method, or "
                if others else "")
        if backend.skips_missing:
            log.warning("replay: %d of the %d cells to run have no completion in %s (first: %s); "
                        "on_missing=skip records them as no_code_block", missing, total, where,
                        first)
            continue
        raise ConfigError(f"replay source {where} cannot answer {missing} of the {total} cells to "
                          f"run (first: {first}): {hint}replay a sweep that ran these tasks and "
                          "samples, or narrow suite.include")
