"""The default sweep on a local Ray cluster into Parquet, then a resume that evaluates nothing."""
from __future__ import annotations

import json

import pytest
import ray

from kbx_ray.orchestration import engine
from kbx_ray.config.compose import load_config
from kbx_ray.errors import ConfigError
from kbx_ray.sinks import read_table
from kbx_ray.types import SCHEMA_VERSION

INCLUDE = "suite.include=[activation/relu,math/exp,reduce/sum]"


@pytest.fixture(scope="module")
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, configure_logging=False)
    yield
    ray.shutdown()


def test_sweep_then_resume(local_ray, tmp_path):
    overrides = [f"output_dir={tmp_path}", INCLUDE, "sink.wandb.mode=disabled"]
    p = engine.run_sweep(load_config(overrides))
    assert p.n_todo == 3
    ev = read_table(p.sweep_dir, "evaluations")
    gen = read_table(p.sweep_dir, "generations")
    assert sorted(ev.task_id) == ["activation/relu", "math/exp", "reduce/sum"]
    assert ev.exec_ok.all() and ev.call_ok.all() and (ev.error_kind == "").all()
    # the secret input seeds each evaluation drew are recorded, and never repeat across rows
    seeds = [list(s) for s in ev.seeds]
    assert all(seeds) and len({tuple(s) for s in seeds}) == len(seeds)
    assert (ev.schema_version == SCHEMA_VERSION).all() and (ev.hardware == "cpu").all()
    assert (ev.device == "cpu").all() and ev.timing_skipped.str.contains("no GPU").all()
    assert set(ev.cell_id) == set(gen.cell_id) and set(ev.candidate_id) == set(gen.candidate_id)
    assert gen.completion.str.contains("@triton.jit").all()
    cases = json.loads(ev[ev.task_id == "activation/relu"].cases.iloc[0])
    assert cases and all(c["ok"] for c in cases)
    parts = sorted(p.sweep_dir.rglob("*.parquet"))
    assert not (p.sweep_dir / "generations.wal.jsonl").exists()  # a clean finish: all in Parquet

    again = engine.run_sweep(load_config(overrides))
    assert again.sweep_id == p.sweep_id and again.n_todo == 0
    assert sorted(p.sweep_dir.rglob("*.parquet")) == parts  # nothing evaluated, nothing written

    # Adding a task resumes into the same sweep and runs only the new cell.
    more = load_config([f"output_dir={tmp_path}", "suite.include=[activation/relu,math/exp,"
                        "reduce/sum,linear_algebra/matvec]", "sink.wandb.mode=disabled"])
    p3 = engine.run_sweep(more)
    assert [c.task_id for c in p3.todo()] == ["linear_algebra/matvec"]
    assert len(read_table(p.sweep_dir, "evaluations")) == 4


def test_noop_sweep_batches_evaluations_and_records_every_cell_once(local_ray, tmp_path):
    """mode=noop sends many candidates per evaluator call (engine.eval_batch): each cell still gets
    its own verdict, one row, and a re-run finds them all done."""
    overrides = [f"output_dir={tmp_path}", INCLUDE, "sink.wandb.mode=disabled", "engine.mode=noop",
                 "engine.eval_batch=16", "sweep.samples=40", "engine.flush_every=25"]
    p = engine.run_sweep(load_config(overrides))
    ev = read_table(p.sweep_dir, "evaluations")
    gen = read_table(p.sweep_dir, "generations")
    assert p.n_cells == 120 and len(ev) == len(gen) == 120
    assert ev.cell_id.is_unique and set(ev.cell_id) == {c.cell_id for c in p.cells()}
    assert ev.exec_ok.all() and (ev.candidate_id == gen.set_index("cell_id").loc[
        ev.cell_id, "candidate_id"].values).all()
    assert engine.run_sweep(load_config(overrides)).n_todo == 0


def test_dry_run_counts_cells(tmp_path):
    cfg = load_config([f"output_dir={tmp_path}", INCLUDE, "sweep.samples=2", "hardware=[cpu,h200]"])
    p = engine.plan(cfg)
    assert p.n_cells == 3 * 2 and p.n_todo == 6
    assert all(c.hardware == ("cpu", "h200") for c in p.cells())
    text = engine.describe(p)
    assert "6 cells" in text and "primary cpu" in text and "GPU-hours" in text


def test_dry_run_prices_gpu_pools_at_their_measured_cost(tmp_path):
    """A pool with a measured cost per evaluation (conf/hardware eval_gpu_s) is priced at it, with
    its source named, beside the timing budget's bound; one without says it has none."""
    from kbx_ray.config.hardware import get_pool

    h100 = get_pool("h100")
    assert h100.eval_gpu_s > 0 and "suite_gpu.py" in h100.eval_gpu_s_source
    base = [f"output_dir={tmp_path}", INCLUDE, "sweep.samples=2", "method=repair",
            "method.rounds=2"]
    head = engine.describe(engine.plan(load_config([*base, "hardware=[h100]"]))).splitlines()[0]
    evaluations = 3 * 2 * 3  # cells x rounds: every round on the primary pool
    want = f"about {evaluations * h100.eval_gpu_s / 3600:.2f} GPU-hours at the measured cost " \
           f"(h100 {h100.eval_gpu_s:g} s an evaluation, {h100.eval_gpu_s_source})"
    assert want in head and "at most" in head, head
    other = engine.describe(engine.plan(load_config([*base, "hardware=[l4]"]))).splitlines()[0]
    assert "no measured cost per evaluation for these GPUs" in other and "about" not in other


def test_missing_pool_is_a_clear_error(local_ray, tmp_path):
    from kbx_ray.errors import ConfigError

    cfg = load_config([f"output_dir={tmp_path}", "suite.include=[math/exp]", "hardware=h100",
                       "sink.wandb.mode=disabled"])
    with pytest.raises(ConfigError, match="no node in the Ray cluster offers hardware pool 'h100'"):
        engine.run_sweep(cfg)


def test_a_changed_verdict_setting_is_another_sweep_or_refused(local_ray, tmp_path, caplog):
    """evaluation.fresh_sets was missing from the sweep's identity: a re-run with it changed
    resumed and mixed verdicts. Now it is a new sweep; under sweep_id= it is refused in one line."""
    from kbx_ray.cli import commands as cli

    base = [f"output_dir={tmp_path}", "suite.include=[activation/relu]", "sink.wandb.mode=disabled"]
    p = engine.run_sweep(load_config(base))
    assert p.n_todo == 1 and (p.sweep_dir / "identity.json").is_file()
    caplog.set_level("INFO", logger="kbx_ray.records.sweep_folder")
    other = engine.run_sweep(load_config([*base, "evaluation.fresh_sets=3"]))
    assert other.sweep_id != p.sweep_id and other.n_todo == 1  # judged again, in its own folder
    assert f"not a resume of {p.sweep_id}: evaluation.fresh_sets=2 -> 3" in caplog.text
    named = [*base, "sweep_id=mine"]
    engine.run_sweep(load_config(named))
    changed = [*named, "evaluation.fresh_sets=3"]
    with pytest.raises(ConfigError, match=r"evaluation.fresh_sets=2 -> 3; drop sweep_id="):
        engine.plan(load_config(changed))
    assert cli.main(["sweep", *changed]) == 2  # one line (tests/integration/test_cli.py)
    forced = engine.run_sweep(load_config([*changed, "force_resume=true"]))
    assert forced.n_todo == 0  # resumed on purpose: nothing re-judged


def test_an_undecodable_replayed_kernel_is_a_record_not_a_traceback(local_ray, tmp_path):
    kernels = tmp_path / "kernels" / "activation"
    kernels.mkdir(parents=True)
    (kernels / "relu.py").write_bytes(b'import triton\n\ndef relu(x):\n    return "\xff"\n')
    p = engine.run_sweep(load_config([f"output_dir={tmp_path}/results", "sink.wandb.mode=disabled",
                                      "suite.include=[activation/relu]", "model=replay",
                                      f"model.options.path={tmp_path / 'kernels'}"]))
    ev, gen = read_table(p.sweep_dir, "evaluations"), read_table(p.sweep_dir, "generations")
    assert len(ev) == 1 and ev.error_kind[0] == "no_code_block" and not ev.exec_ok[0]
    assert "relu.py is not valid utf-8 (byte 0xff on line 4)" in gen.completion[0]


def test_dry_run_with_no_pool_named_estimates_every_pool_of_cluster_yaml(tmp_path):
    """On a CPU box the local pool costs CPU-hours, not GPU-hours, and the pools of cluster.yaml,
    which do not exist here, get one line saying how to ask for them; a user planning a run on the
    cluster (engine.ray_address) gets each of its GPU pools' estimate, alone and all together."""
    import yaml

    from kbx_ray.orchestration.dry_run import CLUSTER_YAML

    spec = yaml.safe_load(CLUSTER_YAML.read_text())["available_node_types"]
    pools = [nt["labels"]["kbx-pool"] for nt in spec.values()
             if nt.get("labels", {}).get("kbx-role") == "evaluation"]
    assert len(pools) >= 4
    base = [f"output_dir={tmp_path}", INCLUDE, "method=repair", "method.rounds=2"]
    here = engine.describe(engine.plan(load_config(base))).splitlines()
    # 3 cells x 3 rounds x 2 s: 0.3 CPU-minutes (not "0.00 GPU-hours")
    assert "GPU-hours" not in here[0] and "about 0.3 CPU-minutes on the CPU pool (2.00 s an " \
        "evaluation, measured on a 2-core CPU box" in here[0], here[0]
    assert not any(" alone (" in ln for ln in here) and len(here) == 4, here
    assert here[-1].strip().startswith(f"(GPU-hours on a cluster: name its pools, e.g. hardware=["
                                       f"{','.join(pools)}]")
    text = engine.describe(engine.plan(load_config([*base, "engine.ray_address=auto"])))
    lines = text.splitlines()
    for pool in pools:
        (line,) = [ln for ln in lines if ln.strip().startswith(f"pool {pool} alone (")]
        # 3 cells x 3 rounds, each up to (2 x 1 s budget + 0.2 s) per case
        assert " 9 evaluations, " in line and " 0.00 GPU-hours" not in line, line
    assert any(ln.strip().startswith(f"all {len(pools)} (hardware=[{','.join(pools)}]")
               for ln in lines)
    named = engine.describe(engine.plan(load_config([*base, "hardware=cpu"])))
    assert "cluster.yaml" not in named  # a named pool is the plan: estimated alone


def test_a_resumed_cpu_sweep_is_estimated_from_its_own_evaluations(tmp_path):
    """The CPU-hours of the cells left come from what this sweep's evaluations took (their median
    `eval_wall_s` on the CPU), not from the constant measured elsewhere."""
    from kbx_ray.sinks import ParquetSink
    from kbx_ray.records.sweep_folder import sweep_id

    cfg = load_config([f"output_dir={tmp_path}", INCLUDE])
    sink = ParquetSink(tmp_path / sweep_id(cfg))
    sink.start(1, {})
    sink.write_evaluations([{"cell_id": f"elsewhere-{i}", "candidate_id": f"k{i}", "device": d,
                             "eval_wall_s": w} for i, (d, w) in
                            enumerate([("cpu", 4.0), ("cpu", 9.0), ("cpu", 6.0), ("cuda", 0.1)])])
    sink.close()
    head = engine.describe(engine.plan(cfg)).splitlines()[0]
    # 3 cells to run (none of the rows is one of them), each 6 s: the median of the 3 CPU rows
    assert "3 to run; about 0.3 CPU-minutes on the CPU pool (6.00 s an evaluation, the median " \
           "of this sweep's 3 rows;" in head, head


def test_dry_run_all_pools_together_has_its_least_wall_time_too(tmp_path):
    """Together the pools run side by side, so the busiest bounds the wall time: here the one
    a10g node (3 final kernels) outlasts 8 H100s judging all 9 rounds."""
    import re

    from kbx_ray.orchestration import dry_run

    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(
        "available_node_types:\n"
        "  eval.h100x8: {max_workers: 1, resources: {GPU: 8}, labels: {kbx-role: evaluation, "
        "kbx-pool: h100}}\n"
        "  eval.a10gx1: {max_workers: 1, resources: {GPU: 1}, labels: {kbx-role: evaluation, "
        "kbx-pool: a10g}}\n")
    # a long timing budget, so that the hours are large enough to compare at two decimals
    p = engine.plan(load_config([f"output_dir={tmp_path}", INCLUDE, "method=repair",
                                 "method.rounds=2", "evaluation.timing.budget_s=100"]))
    lines = dry_run.cluster_estimate(p, cluster)
    wall = {ln.split()[1] if not ln.strip().startswith("all") else "all":
            float(re.search(r"at least ([\d.]+) h of wall time", ln).group(1))
            for ln in lines[1:]}
    assert set(wall) == {"h100", "a10g", "all"}, lines
    # a10g alone judges 9 evaluations on 1 GPU; together it checks the 3 final kernels
    assert wall["all"] == pytest.approx(wall["a10g"] / 3, abs=0.01), lines
    assert wall["all"] > wall["h100"], lines
