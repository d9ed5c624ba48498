"""The data that flows through kbx_ray, as frozen dataclasses.

task -> prompt -> generation -> candidate -> EvalResult -> Record. Every field carries a one-line
comment so that the Parquet schema documents itself (see `Record`).
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any

SCHEMA_VERSION = 1

CATEGORIES = (
    "Fusion", "Math", "LinearAlgebra", "Activation", "MatrixMultiply", "Reduce", "Index", "Loss",
    "Quantization", "Normalization", "Optimizer", "SpatialOps", "Convolution", "Random", "Pooling",
)


class _Str(str, Enum):
    """A member is its string (compares, hashes, formats and serialises as its value)."""

    __str__ = str.__str__
    __format__ = str.__format__


class ErrorKind(_Str):
    """Every way a candidate can end. Strings, so they read well in Parquet and W&B."""

    NO_CODE_BLOCK = "no_code_block"          # the completion holds no usable Python block
    TRUNCATED = "truncated"                  # generation stopped at the token limit
    SYNTAX_ERROR = "syntax_error"            # the code does not parse
    DISQUALIFIED = "disqualified"            # a static or runtime integrity check failed
    IMPORT_ERROR = "import_error"            # importing the candidate module raised
    MISSING_ENTRY = "missing_entry"          # the module lacks the entry function
    RUNTIME_ERROR = "runtime_error"          # calling the entry function raised
    SHAPE_MISMATCH = "shape_mismatch"        # output shape differs from the reference
    DTYPE_MISMATCH = "dtype_mismatch"        # output dtype differs from the reference
    MISMATCH = "mismatch"                    # values outside tolerance (or the task's check failed)
    NONDETERMINISTIC = "nondeterministic"    # two runs on the same inputs disagree
    INPUT_MUTATED = "input_mutated"          # an input changed that the task does not declare mutated
    OUTPUT_ALIASES_INPUT = "output_aliases_input"  # an output shares memory with an input
    TIMEOUT = "timeout"                      # a stage ran past its time limit
    CRASH = "crash"                          # the worker died (segfault, exit, resource limit)
    CUDA_ERROR = "cuda_error"                # a CUDA error poisoned the worker's context
    TIMING_INVALID = "timing_invalid"        # timing failed a cross-check (wall clock, SOL > 100%)
    UNSUPPORTED_INTERPRETER = "unsupported_interpreter"  # the CPU interpreter cannot run it
    INFRA_ERROR = "infra_error"              # the harness failed, not the candidate
    REPLAY_UNSUPPORTED = "replay_unsupported"  # its kernel program could not be replayed: no
    #                                            verdict (never a pass)


class Stage(_Str):
    """How far an evaluation got, in order: `EvalResult.stage` is the last one reached."""

    EXTRACT = "extract"          # the completion -> the candidate's code
    STATIC = "static"            # parse and static integrity checks
    COMPILE = "compile"          # import and the first call, on the smallest case
    CORRECTNESS = "correctness"  # every case and seed against the reference
    TIMING = "timing"            # timed against the eager reference
    DONE = "done"                # judged: correct, and timed where timed


STAGES = tuple(Stage)


def stable_hash(*parts: Any, n: int = 16) -> str:
    """A short hex digest of JSON-serialisable parts; stable across runs and machines."""
    blob = json.dumps(parts, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:n]


@dataclass(frozen=True)
class Task:
    task_id: str            # "<category>/<name>", e.g. "activation/relu"
    name: str               # entry function name the candidate must define
    category: str           # one of CATEGORIES
    level: int              # difficulty 1-5
    description: str        # module docstring: what the model is told
    signature: str          # "relu(x: torch.Tensor) -> torch.Tensor"
    reference_source: str   # source of the reference function
    path: str               # absolute path of task.py
    solution_path: str      # absolute path of solution.py ("" when the suite has none)
    cases: tuple[dict, ...]  # the task's CASES, each with "name" and "small"
    task_hash: str          # hash of task.py's bytes: a changed task is a new cell
    mutates: tuple[str, ...] = ()  # arguments mutated by contract
    random: bool = False    # outputs are random: compare by distribution, not values


@dataclass(frozen=True)
class Generation:
    text: str                # the completion
    prompt_tokens: int = 0   # tokens in the prompt (0 when the backend has no tokenizer)
    completion_tokens: int = 0  # tokens generated
    latency_s: float = 0.0   # wall time of the call
    finish_reason: str = "stop"  # "stop" or "length" (truncated)
    model: str = ""          # the backend's model name
    peer_verdict: str = ""   # replayed from another harness: its verdict (pass | fail, "" unknown)
    peer: dict = field(default_factory=dict)  # replayed from a study's corpus: its verdicts of
    #                                           the kernel (records.PEER_FIELDS)


@dataclass(frozen=True)
class Candidate:
    candidate_id: str        # hash of (task_id, code); identical code is one candidate
    task_id: str
    code: str                # the module source ("" when extraction failed)
    entry: str               # entry function name
    error_kind: str = ""     # set when extraction failed (no_code_block, truncated, ...)
    error_msg: str = ""


@dataclass
class CaseResult:
    case: str                       # case name
    seeds: int = 0                  # seeds checked
    ok: bool = False                # correct on every seed
    max_abs_err: float = 0.0        # worst absolute error over seeds
    max_rel_err: float = 0.0        # worst relative error over seeds
    message: str = ""               # why it failed, one line
    error_kind: str = ""            # an ErrorKind when it failed
    cand_ms: float | None = None    # candidate median time
    cand_p20_ms: float | None = None
    cand_p80_ms: float | None = None
    cand_reps: int = 0
    ref_ms: float | None = None     # eager reference median time
    ref_reps: int = 0
    speedup: float | None = None    # ref_ms / cand_ms
    gbps: float | None = None       # achieved bandwidth of the candidate
    tflops: float | None = None     # achieved compute rate of the candidate
    sol_fraction: float | None = None  # max(bw / peak_bw, flops / peak_flops)
    replay_ms: float | None = None  # its recorded kernel program's median (a CUDA graph on a GPU)


@dataclass
class EvalResult:
    task_id: str
    candidate_id: str
    stage: str = Stage.EXTRACT      # last stage reached (a Stage)
    call_ok: bool = False           # compiled and ran on the smallest case
    exec_ok: bool = False           # correct on every case and seed, no disqualifying check
    error_kind: str = ""            # an ErrorKind, "" when exec_ok
    error_msg: str = ""             # trimmed, one line or a few
    flags: list[str] = field(default_factory=list)  # integrity observations
    cases: list[CaseResult] = field(default_factory=list)
    speedup: float | None = None    # geomean over timed cases
    sol_fraction: float | None = None  # geomean SOL fraction over timed cases
    timing_skipped: str = ""        # why timing did not run ("" when it did)
    device: str = ""                # "cuda" or "cpu"
    gpu_name: str = ""              # the GPU the worker actually saw
    driver: str = ""
    torch_version: str = ""
    triton_version: str = ""
    eval_wall_s: float = 0.0
    stage_s: dict[str, float] = field(default_factory=dict)  # wall seconds per stage (profiling)
    seeds: list[int] = field(default_factory=list)  # every input seed drawn, in order (secret
    #                                                 per evaluation: kept for reproduction)
    unseen_cases: list[dict] = field(default_factory=list)  # the cases drawn for this evaluation
    #                                 from the task's shape family (kbx_ray/unseen.py), in full
    node_id: str = ""               # the Ray node the evaluator ran on ("" outside Ray)
    node_accelerator: str = ""      # that node's advertised accelerator type

    def to_dict(self) -> dict:
        return asdict(self)


def trim(msg: str, limit: int = 600) -> str:
    """Keep the head and the tail of a long message: errors say most at their ends."""
    msg = msg.strip()
    if len(msg) <= limit:
        return msg
    half = limit // 2 - 8
    return msg[:half] + "\n[...]\n" + msg[-half:]
