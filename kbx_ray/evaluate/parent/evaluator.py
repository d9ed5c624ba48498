"""One candidate through the stages: static checks -> compile/call -> correctness -> timing -> roofline.

The parent (this process) is the judge. It runs the reference and the comparison itself and times the
eager reference with the same `bench` the worker uses; the worker only runs candidate code. Any
failure becomes an `EvalResult` with an `error_kind`; nothing here raises for a bad candidate.
"""
from __future__ import annotations

import ast
import logging
import math
import random
import secrets
import time
from contextlib import contextmanager
from typing import Any, Iterator

from kbx_ray import unseen
from kbx_ray.evaluate.parent import case_checks
from kbx_ray.evaluate.parent.admission import (Admission, device_ledger, file_shared_oom,
                                                give_back_cached, is_oom, release_cached)
from kbx_ray.evaluate.parent.case_checks import Fail as _Fail
from kbx_ray.evaluate.static.checks import static_check
from kbx_ray.evaluate.parent.correctness_stage import check_cases
from kbx_ray.evaluate.parent.gpu_memory import MemoryLedger
from kbx_ray.evaluate.parent.gpulock import GpuLock, NoLock
from kbx_ray.evaluate.common.inputs import InputCache
from kbx_ray.evaluate.parent.reference_cache import References
from kbx_ray.evaluate.parent.replay_check import Replay
from kbx_ray.evaluate.parent.sandbox import Sandbox, WorkerDied, scrub_paths
from kbx_ray.evaluate.settings import EvalConfig, resolve_device
from kbx_ray.evaluate.parent.timing_stage import time_cases
from kbx_ray.suites.task_import import load_module
from kbx_ray.types import Candidate, ErrorKind, EvalResult, Stage, Task, trim

log = logging.getLogger(__name__)


class Evaluator:
    """A warm sandbox, its replay process and the reference cache; `memory`: the GPU ledger."""

    def __init__(self, cfg: EvalConfig | None = None, memory: MemoryLedger | None = None) -> None:
        self.cfg = cfg or EvalConfig()
        self.device = resolve_device(self.cfg.device)
        self.cfg.sandbox.device = self.device
        self.sandbox = Sandbox(self.cfg.sandbox, stateful=True)  # `load` first, then its ops
        self.inputs = InputCache()
        self.refs = References(self.cfg, self.device, self.inputs)  # outputs per seed, timings
        self.replay = Replay(self.cfg, self.device)  # the replay process (replay_check.py)
        self.count = 0
        self.deadline = math.inf  # the running evaluation's end (perf_counter), `eval_budget_s`
        self.spent = 0.0  # the running evaluation's time in earlier attempts (not admission waits)
        self.unbilled = 0.0  # the running attempt's time starting a worker: not the candidate's
        self.seeds: list[int] = []  # the seeds drawn for the running evaluation
        self.lock: GpuLock | NoLock = NoLock()
        if self.device == "cuda":  # evaluators sharing this GPU: timing runs alone (gpulock.py)
            import torch

            self.lock = GpuLock(str(torch.cuda.get_device_properties(0).uuid))
            memory = memory or device_ledger(self.cfg)
        self.memory = Admission(self.cfg, memory)
        if self.device == "cuda":  # the contexts of this process, the worker and the replay's
            self.memory.stand(2 + int(self.replay.on))

    def close(self) -> None:
        self.sandbox.kill()
        self.replay.kill()
        self.lock.close()
        self.memory.close()

    def small_only(self) -> bool:
        """Only the small (interpreter-sized) cases run here."""
        return self.cfg.small_only == "true" or (self.cfg.small_only == "auto" and self.device == "cpu")

    def cases_for(self, task: Task) -> list[dict]:
        small = self.small_only()
        return [c for c in task.cases if c["small"] or not small]

    def _unseen(self, ref_mod: Any, task: Task, res: EvalResult) -> list[dict]:
        """Cases no task file lists, drawn secretly after the candidate's import (unseen.py),
        checked on every seed, never timed; drawn off the candidate's budget."""
        with self._unbilled():
            res.unseen_cases = unseen.cases(ref_mod, task.cases, self.cfg.unseen_cases,
                                            random.Random(self._unseen_seed(task)), self.small_only())
        return res.unseen_cases

    def _unseen_seed(self, task: Task) -> int:
        """The seed of this evaluation's unseen cases: secret like the input seeds."""
        return secrets.randbelow(2**63) if self.cfg.secret_seeds else self.cfg.base_seed

    def evaluate(self, task: Task, cand: Candidate) -> EvalResult:
        """The verdict. A failure of this process (an OOM in the reference or the comparison) is
        `infra_error`, retried once on a fresh worker; nothing here raises for it. Each attempt
        holds a GPU memory reservation (admission.py); an OOM while other evaluators held memory
        is `infra_error` too (`oom_shared_gpu`), and an OOM's retry holds the whole device."""
        t0 = time.perf_counter()
        before = self._sharing()
        need, alone, flags, self.spent = self._memory_need(task), False, [], 0.0
        for attempt in (0, 1):
            res = EvalResult(task_id=task.task_id, candidate_id=cand.candidate_id,
                             device=self.device)
            with self.memory.hold(need, alone=alone):
                ok = self._admitted_attempt(task, cand, res, flags)
            if ok or attempt:
                break
            alone = is_oom(res.error_msg)  # the memory ran out: the retry runs alone
            log.warning("evaluating %s failed (%s); retrying once%s", cand.candidate_id,
                        res.error_msg, " alone on the GPU" if alone else "")
        if attempt:
            res.flags += flags + ["retried_infra_error"]
        info = self.sandbox.info
        res.gpu_name, res.driver = info.get("gpu_name", ""), info.get("driver", "")
        res.torch_version, res.triton_version = info.get("torch", ""), info.get("triton", "")
        res.eval_wall_s = time.perf_counter() - t0
        res.stage_s.update({k: round(v - before.get(k, 0.0), 4)
                            for k, v in self._sharing().items()})
        self.count += 1
        if self.count % self.cfg.recycle_after == 0 or "tampered_runtime" in res.flags:
            self.sandbox.kill()
            self.replay.kill()
        return res

    def _sharing(self) -> dict[str, float]:
        """Running totals: waiting for GPU memory, the replay's warm compiles, and on a GPU for
        its lock and holding it alone."""
        got = {"mem_wait": self.memory.wait_s, "mem_wait_free": self.memory.free_wait_s} \
            if self.memory.ledger is not None else {}
        # the replay's compiles of each case's kernels off the GPU hold (`warm`), and on a GPU
        # the kernels its replays still compiled themselves (a count)
        got["replay_warm"] = self.replay.warm_s
        if self.device == "cuda":
            got["replay_compiles"] = float(self.replay.compiles)
            got.update(self.lock.totals())
        return got

    def _memory_need(self, task: Task) -> int:
        """The bytes this evaluation reserves (Admission.need); the three processes keep at most
        `cache_limit` of its inputs and outputs (the worker's goes with `load`)."""
        need, limit = self.memory.need(task.path, self.cases_for(task))
        self.inputs.limit = self.refs.limit = limit
        self.replay.cache_bytes = limit or 0
        return need

    def _admitted_attempt(self, task: Task, cand: Candidate, res: EvalResult,
                          flags: list[str]) -> bool:
        """One try, once its memory is reserved: `eval_budget_s` counts from here. An OOM while
        other evaluators held memory is `infra_error` (False: worth one more, alone)."""
        started = time.perf_counter()
        self.deadline = started + self.cfg.eval_budget_s - self.spent
        self.unbilled = 0.0
        try:
            ok = self._attempt(task, cand, res)
            if ok and self.memory.shared_oom(res):
                file_shared_oom(res)
                flags.append("oom_shared_gpu")
                self._recover()  # a fresh worker for the retry, as after any infra_error
                ok = False
            release_cached([self.sandbox, self.replay.sandbox], self.device)
            return ok
        finally:
            self.spent += time.perf_counter() - started - self.unbilled

    def _start_worker(self) -> None:
        """The worker and the replay process, started off the candidate's budget if not up."""
        with self._unbilled():
            self.sandbox.start()
            self.replay.start()

    @contextmanager
    def _unbilled(self) -> Iterator[None]:
        """The platform's work inside an attempt: it moves the deadline, off `spent`."""
        t = time.perf_counter()
        try:
            yield
        finally:
            took = time.perf_counter() - t
            self.unbilled += took
            self.deadline += took

    def _attempt(self, task: Task, cand: Candidate, res: EvalResult) -> bool:
        """One try; False when this process failed (worth one more)."""
        self.seeds = res.seeds
        try:
            self._run(task, cand, res)
            res.stage, res.exec_ok = Stage.DONE, True
        except _Fail as f:
            case_checks.file_failure(res, f)  # an interpreter gap: awaits a GPU, never a pass
            if f.kind == ErrorKind.INFRA_ERROR:  # the worker's harness failed: one more try on
                return bool(self._recover())  # a fresh worker (an H100 OOM drawing timing inputs)
        except WorkerDied as d:
            res.error_kind, res.error_msg = d.kind, trim(scrub_paths(d.msg))
        except Exception as e:  # noqa: BLE001 - the parent's own failure, never the candidate's
            log.exception("evaluating %s failed in the parent", cand.candidate_id)
            self._recover()
            res.exec_ok, res.error_kind = False, ErrorKind.INFRA_ERROR
            res.error_msg = trim(scrub_paths(f"the evaluator failed at stage {res.stage} "
                                             f"({type(e).__name__}: {e}); not the candidate's "
                                             "fault: re-run it"))
            return False
        finally:
            self.refs.clear_seeded()  # keyed by this evaluation's secret seeds: no later hits
            self.inputs.clear()
        return True

    def _recover(self) -> None:
        """After a failure here: drop what this process holds and start the worker afresh."""
        self.refs.clear_seeded()
        self.inputs.clear()
        self.sandbox.kill()
        self.replay.kill()
        give_back_cached(self.device)

    def _seed(self, i: int) -> int:
        """Input seed `i`: secret, drawn after the candidate's import, recorded in `res.seeds`."""
        s = secrets.randbelow(2**31 - 1) + 1 if self.cfg.secret_seeds else self.cfg.base_seed + i
        self.seeds.append(s)
        return s

    def _run(self, task: Task, cand: Candidate, res: EvalResult) -> None:
        mark = self._static(task, cand, res)
        self._start_worker()
        if self.sandbox.bare or self.replay.sandbox.bare:
            res.flags.append("no_landlock")  # judged by a worker free to write outside its dir
        module = f"{cand.candidate_id}_{self.count}"
        path = self.sandbox.write_code(f"kbx_cand_{module}", cand.code)
        self._ask({"op": "load", "code_path": path, "task_path": task.path, "entry": task.name,
                   "module": module, "task_key": task.task_hash, "monitor": self.monitor,
                   "deny": self.cfg.torch_compute == "fail", "cache_bytes": self.inputs.limit or 0},
                  self.cfg.load_timeout_s, res.stage)
        self.replay.begin(cand.code, module)
        mark = self._clock(res, "load", mark)
        ref_mod = load_module(task.path)
        cases = self.cases_for(task) + self._unseen(ref_mod, task, res)
        check_cases(self, ref_mod, task, cases, res)
        mark = self._clock(res, Stage.CORRECTNESS, mark)
        if self.device != "cuda" and not self.cfg.cpu_timing:
            res.timing_skipped = "no GPU: correctness ran under the Triton interpreter"
            return
        if self.device != "cuda":
            res.flags.append("cpu_timing")  # the protocol ran; its figures mean nothing
        time_cases(self, ref_mod, task, cases, res)
        self._clock(res, Stage.TIMING, mark)

    def _static(self, task: Task, cand: Candidate, res: EvalResult) -> float:
        """The extraction's error, the syntax and the static checks; the clock after them."""
        t_run = time.perf_counter()
        if cand.error_kind:
            raise _Fail(Stage.EXTRACT, cand.error_kind, cand.error_msg)
        res.stage = Stage.STATIC
        try:
            tree = ast.parse(cand.code)
        except SyntaxError as e:
            raise _Fail(Stage.STATIC, ErrorKind.SYNTAX_ERROR, f"line {e.lineno}: {e.msg}") from None
        rep = static_check(tree, task.name)
        res.flags += rep.flags
        if rep.violations:
            raise _Fail(Stage.STATIC, ErrorKind.DISQUALIFIED, "; ".join(rep.violations))
        res.stage = Stage.COMPILE
        return self._clock(res, Stage.STATIC, t_run)

    @staticmethod
    def _clock(res: EvalResult, stage: str, since: float) -> float:
        now = time.perf_counter()
        res.stage_s[stage] = round(now - since, 4)
        return now

    def _timed(self, case: dict, cases: list[dict]) -> bool:
        """Which cases are timed: the realistic (non-small) ones, unless a task has none."""
        if case.get("unseen"):  # drawn afresh each evaluation: no reference timing to compare
            return False
        if self.cfg.timing_cases == "all" or all(c["small"] for c in cases):
            return True
        return not case["small"]

    def _ask(self, header: dict, timeout: float, stage: str,
             res: EvalResult | None = None) -> tuple[dict, list[bytearray]]:
        left = self.deadline - time.perf_counter()
        if left <= 0:
            raise _Fail(stage, ErrorKind.TIMEOUT, f"the evaluation ran past its "
                        f"{self.cfg.eval_budget_s:.0f} s budget (evaluation.eval_budget_s)")
        try:
            reply, blobs = self.sandbox.request(header, min(timeout, left))
        except WorkerDied as d:
            if d.kind == ErrorKind.TIMEOUT and left < timeout:
                d.msg = (f"{header.get('op')}: the evaluation ran past its "
                         f"{self.cfg.eval_budget_s:.0f} s budget (evaluation.eval_budget_s)")
            raise _Fail(stage, d.kind, d.msg) from None
        prof = reply.get("prof")
        if res is not None and isinstance(prof, dict):  # the worker's own account: profiling only
            for k, v in prof.items():
                if k in ("inputs", "poison", "call", "encode") and isinstance(v, (int, float)):
                    res.stage_s[f"w_{k}"] = round(res.stage_s.get(f"w_{k}", 0.0) + float(v), 6)
        if not reply.get("ok"):
            raise _Fail.refused(stage, reply)
        return reply, blobs

    @property
    def monitor(self) -> bool:
        return str(self.cfg.monitor) == "on"
