"""The evaluator's GPU memory admission: gpu_memory.py's ledger around each evaluation.
More: kbx_ray/evaluate/parent/README.md, `admission.py`.
"""
from __future__ import annotations

import logging
from contextlib import contextmanager, nullcontext
from typing import Any, Iterator

from kbx_ray.cases import footprint
from kbx_ray.evaluate.parent.gpu_memory import MemoryLedger, budget_bytes, estimate_bytes
from kbx_ray.evaluate.parent.sandbox import Sandbox, WorkerDied
from kbx_ray.evaluate.settings import EvalConfig
from kbx_ray.suites.task_import import load_module
from kbx_ray.types import ErrorKind, EvalResult, trim

log = logging.getLogger(__name__)

OOM_TEXT = ("CUDA out of memory", "OutOfMemoryError")  # torch.OutOfMemoryError's type and text
# what the worker files an OOM in the call as
CANDIDATE_KINDS = (ErrorKind.RUNTIME_ERROR, ErrorKind.CUDA_ERROR)
REPLAY_SETS = 2  # the replay process's fresh inputs and its program's buffers, in footprints
CACHE_SETS = 2  # the parent's kept inputs and reference outputs, one footprint each (cache_limit)


def is_oom(msg: str) -> bool:
    return any(t in (msg or "") for t in OOM_TEXT)


def device_ledger(cfg: EvalConfig) -> MemoryLedger:
    """The ledger of this process's GPU (device 0 under CUDA_VISIBLE_DEVICES), keyed by its UUID
    like gpulock.py: `gpu_mem_budget_gb` if set, else the device's total minus
    `gpu_mem_reserve_gb`; beside others, an evaluation also waits for that much really free."""
    import torch

    uuid = str(torch.cuda.get_device_properties(0).uuid)
    if cfg.gpu_mem_budget_gb > 0:
        budget = int(cfg.gpu_mem_budget_gb * (1 << 30))
    else:
        budget = budget_bytes(torch.cuda.mem_get_info()[1], int(cfg.gpu_mem_reserve_gb * (1 << 30)))
    return MemoryLedger(uuid, budget, free=lambda: torch.cuda.mem_get_info()[0])


class Admission:
    """Reservations for one evaluator; every method is a no-op without a ledger."""

    def __init__(self, cfg: EvalConfig, ledger: MemoryLedger | None) -> None:
        self.cfg, self.ledger = cfg, ledger
        self._standing = ""

    def stand(self, processes: int) -> None:
        """Hold the evaluator's `processes` CUDA contexts for its life (`gpu_ctx_mb` each): on an
        H100 an idle one held 612-952 MiB, 24 of them 17 GiB that no reservation counted, and
        evaluations admitted within the ledger ran the device out of memory."""
        if self.ledger is not None and not self._standing:
            self._standing = self.ledger.standing(processes * (self.cfg.gpu_ctx_mb << 20))

    def close(self) -> None:
        if self.ledger is not None and self._standing:
            self.ledger.unstand(self._standing)
            self._standing = ""

    @property
    def wait_s(self) -> float:
        return self.ledger.wait_s if self.ledger else 0.0

    @property
    def free_wait_s(self) -> float:
        return self.ledger.free_wait_s if self.ledger else 0.0

    def need(self, task_path: str, cases: list[dict]) -> tuple[int, int | None]:
        """The bytes an evaluation of `cases` reserves and its `cache_limit` (0 and None without
        a ledger)."""
        if self.ledger is None:
            return 0, None
        try:
            ref_mod = load_module(task_path)
        except Exception:  # noqa: BLE001 - the attempt files the task's failure; reserve the floor
            ref_mod = None
        largest = self.largest(ref_mod, cases)
        return self.estimate_for(largest), self.cache_limit(largest)

    def estimate(self, ref_mod: Any, cases: list[dict]) -> int:
        """Peak bytes of evaluating `cases`: `estimate_for` their largest footprint (`largest`)."""
        return self.estimate_for(self.largest(ref_mod, cases)) if self.ledger is not None else 0

    def largest(self, ref_mod: Any, cases: list[dict]) -> int:
        """The largest case's bytes by footprint (or by its traffic, where that is larger).

        The footprint (cases/footprint.py: distinct input storages + outputs, sized under fake
        tensors, cached per task file and case), not `cost()`'s bytes: those are the compulsory
        traffic, which skips what a case allocates but an honest kernel need not read (a KV pool's
        spare blocks, a vocabulary table's unread rows, masked regions), and evaluations sized
        by it ran a shared GPU out of memory. Where the traffic is the larger (mlp_gelu's and
        gated_mlp's cost counts the [M, F] intermediate, which the reference allocates too), it
        is taken: never less than before. A footprint that fails counts zero bytes: the floor,
        and the OOM retry alone, remain."""
        try:
            return max((max(footprint.size(ref_mod, c), int(ref_mod.cost(c).get("bytes") or 0))
                        for c in cases), default=0)
        except Exception as e:  # noqa: BLE001 - a task's cost model must not fail the evaluation
            log.warning("memory estimate: footprint failed (%s); reserving the floor", e)
            return 0

    def estimate_for(self, largest: int) -> int:
        """gpu_memory.estimate_bytes on `largest` x `gpu_mem_factor` plus one per timing and fresh
        input set (on the H100 a decode-attention case ran out of memory while its worker drew
        its timing sets), the replay's sets and the parent's caches (`cache_limit`)."""
        # the worker's `time` holds every timing and fresh input set at once, on top of the rest;
        # the replay process holds a fresh input set and its program's buffers
        replay = str(self.cfg.replay) == "on"
        sets = self.cfg.timed_sets + (REPLAY_SETS if replay else 0) + CACHE_SETS
        # the replay process's flush buffer too (it times the program)
        return estimate_bytes(largest, (self.cfg.timing.flush_mb << 20) * (2 if replay else 1),
                              self.cfg.gpu_mem_factor + sets)

    def cache_limit(self, largest: int) -> int | None:
        """Bytes the parent may keep of one evaluation's inputs, and as many of its reference
        outputs: one largest footprint each (CACHE_SETS), within their configured caps. Each
        evaluation's seeds are its own, so what is kept serves only it, and H100 parents kept
        3-9 GiB of it for evaluations reserved at 4-11 in all. None without a ledger (nothing
        counted, nothing capped), and None for a size unknown (0: a footprint that failed), as
        the worker and the replay process read the 0 sent for it: their configured caps."""
        return int(largest) if self.ledger is not None and largest > 0 else None

    @contextmanager
    def hold(self, nbytes: int, alone: bool = False) -> Iterator[None]:
        """Reserve `nbytes` (or, `alone`, the whole budget once no one else holds any) for the
        body; waits while the other evaluators' reservations leave too little."""
        with (self.ledger.reserve(nbytes, alone=alone) if self.ledger else nullcontext()):
            yield

    def shared_oom(self, res: EvalResult) -> bool:
        """An out-of-memory error filed as the candidate's while another evaluator held memory on
        this device (gpu_memory.MemoryLedger.shared_since_admission): not the candidate's fault.
        The text decides only that it is an OOM; who else held memory is the ledger's word, and
        the retry alone gives the verdict, so a candidate that raises the text itself gains at
        most one re-run."""
        return (self.ledger is not None and res.error_kind in CANDIDATE_KINDS
                and is_oom(res.error_msg) and self.ledger.shared_since_admission())


def file_shared_oom(res: EvalResult) -> None:
    """The attempt's record once `shared_oom` holds: the platform's error, retried alone."""
    res.error_kind, res.exec_ok = ErrorKind.INFRA_ERROR, False
    res.error_msg = trim("out of GPU memory while other evaluators held memory on this GPU: not "
                         f"the candidate's fault; retried alone. {res.error_msg}")


def release_cached(sandboxes: list[Sandbox], device: str) -> None:
    """On a GPU, before the reservation goes: the worker and the replay process (`release`) and
    this process give their cached allocator blocks back, so the ledger tells the truth between
    evaluations (a warm process would otherwise keep the last evaluation's working set)."""
    if device != "cuda":
        return
    for sandbox in sandboxes:
        if sandbox.alive:
            try:
                sandbox.request({"op": "release"}, 30.0)
            except WorkerDied:
                sandbox.kill()
    give_back_cached(device)


def give_back_cached(device: str) -> None:
    """On a GPU, this process's cached allocator blocks back to the device (what is live stays):
    others share it."""
    if device == "cuda":
        import torch

        torch.cuda.empty_cache()
