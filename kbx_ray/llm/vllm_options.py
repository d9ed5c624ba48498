"""The vllm backend's options (`model.options.*`), the dataclass it registers.

A leaf: a driver without vllm types a preset with it. `engine` names the AsyncEngineArgs the presets
and users set, typed, each None (vLLM's default, or the one named) unless given; `engine.args`
takes any other of vLLM's engine arguments, by vLLM's name (the backend's check compares those with
the installed vLLM's).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kbx_ray.config.schema import bounded

DEFAULT_MAX_NUM_SEQS = 256


@dataclass
class VLLMEngine:
    """vLLM's engine arguments; None: not passed (vLLM's default), unless its comment names one."""

    dtype: str | None = None
    tensor_parallel_size: int | None = None  # None: 1
    pipeline_parallel_size: int | None = None
    max_model_len: int | None = None
    gpu_memory_utilization: float | None = None
    max_num_seqs: int | None = None      # None: DEFAULT_MAX_NUM_SEQS
    max_num_batched_tokens: int | None = None
    enable_prefix_caching: bool | None = None
    enable_chunked_prefill: bool | None = None
    enforce_eager: bool | None = None
    trust_remote_code: bool | None = None
    quantization: str | None = None
    kv_cache_dtype: str | None = None
    seed: int | None = None
    revision: str | None = None
    tokenizer: str | None = None
    download_dir: str | None = None
    cpu_offload_gb: float | None = None
    block_size: int | None = None
    reasoning_parser: str | None = None
    disable_log_stats: bool | None = None  # None: true, as vllm.LLM (per-step stats cost CPU)
    distributed_executor_backend: str | None = None  # None: ray with tensor parallelism, else uni
    args: dict[str, Any] = field(default_factory=dict)  # other AsyncEngineArgs, by vLLM's names

    @property
    def tp(self) -> int:
        return self.tensor_parallel_size or 1

    @property
    def seqs(self) -> int:
        return self.max_num_seqs or DEFAULT_MAX_NUM_SEQS

    def kwargs(self) -> dict[str, Any]:
        """AsyncEngineArgs' keyword arguments: the fields given, the defaults named, then `args`."""
        out = {k: v for k, v in vars(self).items() if k != "args" and v is not None}
        out.setdefault("max_num_seqs", self.seqs)
        out.setdefault("disable_log_stats", True)
        out.setdefault("distributed_executor_backend", "ray" if self.tp > 1 else "uni")
        return {**out, **self.args}


@dataclass
class VLLMPlacement:
    """Where each replica runs (Ray)."""

    accelerator_type: str | None = None  # e.g. H100
    resources: dict[str, float] = field(default_factory=dict)  # per GPU (per replica on CPU)
    labels: dict[str, str] = field(default_factory=dict)       # node labels, e.g. kbx-role
    num_gpus: int | None = None          # None: engine.tensor_parallel_size; 0: a CPU engine
    num_cpus: float | None = None        # None: 1


@dataclass
class VLLMOptions:
    engine: VLLMEngine = field(default_factory=VLLMEngine)
    placement: VLLMPlacement = field(default_factory=VLLMPlacement)
    replicas: int = bounded(1, low=1)    # engines (Ray actors) behind one backend
    sampling: dict[str, Any] = field(default_factory=dict)  # extra sampling fields (request.py)
    env: dict[str, str] = field(default_factory=dict)       # each replica's environment
    max_inflight: int = 0                # requests per replica; 0: 1.1 x engine.max_num_seqs
    max_restarts: int = 2                # Ray restarts of a dead replica
    startup_timeout_s: float = 3600.0

    def __post_init__(self) -> None:
        tp, gpus = self.engine.tp, self.placement.num_gpus
        if gpus not in (None, 0, tp):
            raise ValueError(f"placement.num_gpus={gpus} must be 0 (CPU) or "
                             f"engine.tensor_parallel_size={tp}")
