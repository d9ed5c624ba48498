"""The evaluator's settings, kept free of torch so that loading a config stays fast."""
from __future__ import annotations

from dataclasses import dataclass, field

from kbx_ray.evaluate.sandbox import SandboxConfig
from kbx_ray.evaluate.timing import TimingConfig


@dataclass
class EvalConfig:
    device: str = "auto"             # auto | cuda | cpu
    seeds: int = 3                   # correctness seeds per small case
    large_seeds: int = 1             # correctness seeds per large case; a timed one is also checked
    #                                  on a fresh seed after timing (random tasks use `seeds`)
    base_seed: int = 0
    small_only: str = "auto"         # auto (small cases on CPU only) | "true" | "false"
    torch_compute: str = "fail"      # fail | flag: aten compute seen at run time
    load_timeout_s: float = 120.0
    case_timeout_s: float = 120.0
    timing: TimingConfig = field(default_factory=TimingConfig)
    sandbox: SandboxConfig = field(default_factory=SandboxConfig)
    sol_limit: float = 1.05          # reject timings above this fraction of peak
    recycle_after: int = 200         # respawn the warm worker after this many candidates
    ref_cache_entries: int = 64      # reference outputs kept per (task, case, seed)
    ref_cache_mb: int = 4096         # ... and at most this many MB of them
    timing_cases: str = "large"      # large: time the non-small cases (launch-bound toys say
    #                                  nothing about a kernel) | all
    timing_group_mb: int = 8192      # timed cases held alone together, up to this many MB of
    #                                  their inputs and outputs (kept until each one's check)
    cpu_timing: bool = False         # tests only: run the timing protocol on the interpreter with
    #                                  the host clock (its figures say nothing about any GPU)
    eval_budget_s: float = 600.0     # one evaluation, every stage and request together: past it
    #                                  the worker is killed and the record says `timeout`
    secret_seeds: bool = True        # input seeds drawn per evaluation from `secrets` after the
    #                                  candidate's import (false: base_seed + i, for debugging)
    unseen_cases: int = 1            # cases drawn per evaluation from the task's shape family
    #                                  (kbx_ray/unseen.py), checked on every seed, never timed;
    #                                  0 turns them off (debugging: public cases only)
    timing_sets: int = 2             # input sets the timed buffers rotate through (rotation.py)
    fresh_sets: int = 2              # sets never seen before, each called once after timing
    fresh_ratio: float = 2.0         # a fresh call slower than this x the timed median: a cache
    fresh_floor_us: float = 100.0    # ... and slower than the median + this (a call timed alone
    #                                  pays its whole host launch path, 20-40 us per Triton launch
    #                                  from Python, and cold caches: logspace, 4 us timed, took 45 us
    #                                  on its first fresh call on the H200)
    peak_gbps: float = 0.0           # filled from the hardware pool
    peak_tflops: dict[str, float] = field(default_factory=dict)
