"""The evaluator's settings, kept free of torch so that loading a config stays fast."""
from __future__ import annotations

from dataclasses import dataclass

from kbx_ray.evaluate.common.timing import TimingConfig
from kbx_ray.config.identity import FILLED, LIMIT, RUN, exempt, verdict, walk
from kbx_ray.config.schema import Choice


class Device(Choice):
    auto = "auto"            # cuda where a GPU is visible, else cpu
    cuda = "cuda"
    cpu = "cpu"


def resolve_device(requested: str) -> str:
    """`Device.auto` -> "cuda" where a GPU is visible, else "cpu"; any other value as it is."""
    if requested != "auto":
        return requested
    try:
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"
    except ImportError:  # pragma: no cover
        return "cpu"


class SmallOnly(Choice):
    auto = "auto"            # small cases only on CPU
    true = "true"
    false = "false"


class TorchCompute(Choice):
    fail = "fail"            # aten compute seen at run time fails the candidate
    flag = "flag"            # ... is recorded only (debugging; never a published verdict)


class Replay(Choice):
    on = "on"                # outputs judged from a replay of the recorded kernel program
    off = "off"              # the live call's outputs only (benchmark baselines, debugging)


class Monitor(Choice):
    on = "on"                # the in-process monitor refuses and its observations fail
    off = "off"              # tests only: the design test, the replay alone judges


class TimingCases(Choice):
    large = "large"          # time the non-small cases
    all = "all"


class Landlock(Choice):
    auto = "auto"            # on for CPU workers; off for GPU workers until validated there
    on = "on"                # required: a worker where it does not take is refused
    off = "off"


@dataclass
class SandboxConfig:
    device: str = verdict("cpu")                # "cuda" or "cpu" (Triton interpreter)
    cpu_seconds: int = exempt(900, why=LIMIT)   # RLIMIT_CPU over the worker's life
    file_mb: int = exempt(64, why=LIMIT)        # RLIMIT_FSIZE: caps the log and anything the
    #                                             candidate writes
    open_files: int = exempt(1024, why=LIMIT)   # RLIMIT_NOFILE
    extra_procs: int = exempt(64, why=LIMIT)    # RLIMIT_NPROC above the processes this user already
    #                                             runs
    memory_gb: float = exempt(0.0, why=LIMIT)   # RLIMIT_AS on CPU workers (0 = off; CUDA reserves
    #                                             huge VA)
    network: bool = verdict(False)              # allow network (off: a private network namespace if
    #                                             possible)
    landlock: Landlock = verdict(Landlock.auto)  # auto: on where the kernel has Landlock
    max_output_mb: int = exempt(0, why=LIMIT)   # cap on bytes a reply may carry (0 = auto:
    #                                             reply_cap_bytes)
    extra_env: dict[str, str] = verdict(factory=dict)


@dataclass
class EvalConfig:
    """Each field marks itself: `verdict(...)` (a change is another sweep) or `exempt(..., why=)`
    (config/identity.py; tests/unit/test_config_identity.py fails on a field with neither)."""
    device: Device = verdict(Device.auto)
    seeds: int = verdict(3)                         # correctness seeds per small case
    large_seeds: int = verdict(1)                   # correctness seeds per large case; a timed one
    #                                                 is also checked on a fresh seed after timing
    #                                                 (random tasks use `seeds`)
    base_seed: int = verdict(0)
    small_only: SmallOnly = verdict(SmallOnly.auto)  # auto (small cases on CPU only) | true |
    #                                                 false
    torch_compute: TorchCompute = verdict(TorchCompute.fail)  # fail | flag: aten compute seen at
    #                                                 run time
    replay: Replay = verdict(Replay.on)             # on: each checked call's kernel program is
    #                                                 replayed on fresh secret inputs, and judged
    #                                                 (INTEGRITY.md) | off
    monitor: Monitor = verdict(Monitor.on)          # off: tests only (the in-process monitor
    #                                                 refuses nothing, decides nothing)
    load_timeout_s: float = exempt(120.0, why=LIMIT)
    case_timeout_s: float = exempt(120.0, why=LIMIT)
    timing: TimingConfig = verdict(factory=TimingConfig)
    sandbox: SandboxConfig = walk(SandboxConfig)
    sol_limit: float = verdict(1.05)                # reject timings above this fraction of peak
    recycle_after: int = exempt(200, why=RUN)       # respawn the warm worker after this many
    #                                                 candidates
    ref_cache_entries: int = exempt(64, why=LIMIT)  # reference outputs kept per (task, case, seed)
    ref_cache_mb: int = exempt(4096, why=LIMIT)     # ... and at most this many MB of them
    timing_cases: TimingCases = verdict(TimingCases.large)  # large: time the non-small cases
    #                                                 (launch-bound toys say nothing about a
    #                                                 kernel) | all
    timing_group_mb: int = exempt(8192, why=RUN)    # timed cases held alone together, up to this
    #                                                 many MB of their inputs and outputs (kept
    #                                                 until each one's check)
    cpu_timing: bool = verdict(False)               # tests only: run the timing protocol on the
    #                                                 interpreter with the host clock (its figures
    #                                                 say nothing about any GPU)
    eval_budget_s: float = exempt(600.0, why=LIMIT) # one evaluation, every stage and request
    #                                                 together: past it the worker is killed and the
    #                                                 record says `timeout` (a fresh worker's start
    #                                                 does not count)
    secret_seeds: bool = verdict(True)              # input seeds drawn per evaluation from
    #                                                 `secrets` after the candidate's import (false:
    #                                                 base_seed + i, for debugging)
    unseen_cases: int = verdict(1)                  # cases drawn per evaluation from the task's
    #                                                 shape family (kbx_ray/unseen.py), checked on
    #                                                 every seed, never timed; 0 turns them off
    #                                                 (debugging: public cases only)
    timing_sets: int = verdict(2)                   # input sets the timed buffers rotate through
    #                                                 (rotation.py)
    fresh_sets: int = verdict(2)                    # sets never seen before, each called once after
    #                                                 timing
    fresh_ratio: float = verdict(2.0)               # a fresh call slower than this x the timed
    #                                                 median: a cache
    fresh_floor_us: float = verdict(100.0)          # ... and slower than the median + this (a call
    #                                                 timed alone pays its whole host launch path,
    #                                                 20-40 us per Triton launch from Python, and
    #                                                 cold caches: logspace, 4 us timed, took 45 us
    #                                                 on its first fresh call on the H200)
    gpu_mem_factor: float = exempt(6.0, why=RUN)   # GPU memory admission (admission.py): an
    #                                                 evaluation reserves its largest case's input
    #                                                 and output storage (cases/footprint.py) x
    #                                                 this, + the flush buffer and 25% (the CUDA
    #                                                 contexts stand apart, gpu_ctx_mb):
    #                                                 parent and worker each hold inputs, a copy and
    #                                                 outputs, timing adds rotated sets
    gpu_mem_budget_gb: float = exempt(0.0, why=RUN) # the per-GPU budget the evaluators sharing it
    #                                                 reserve from; 0: the device's total minus
    #                                                 gpu_mem_reserve_gb
    gpu_mem_reserve_gb: float = exempt(4.0, why=RUN) # left out of the device's total (processes
    #                                                 other than the evaluators, fragmentation)
    gpu_ctx_mb: int = exempt(1024, why=RUN)         # each evaluator process's standing device
    #                                                 memory (CUDA context, loaded modules), held
    #                                                 in the ledger for the evaluator's life: idle
    #                                                 ones held 612-952 MiB on an H100
    one_compile: str = exempt("auto", why=RUN)      # the replay process compiles each case's
    #                                                 kernels before the worker's first call and
    #                                                 seeds its cache (one_compile.py): auto (on a
    #                                                 GPU) | on | off
    peak_gbps: float = exempt(0.0, why=FILLED)      # filled from the hardware pool
    peak_tflops: dict[str, float] = exempt(factory=dict, why=FILLED)

    @property
    def timed_sets(self) -> int:
        """Input sets a timed case's call runs on: the rotated timing sets and the fresh ones
        (each one's outputs are kept to the recheck)."""
        return max(1, self.timing_sets) + max(0, self.fresh_sets)
