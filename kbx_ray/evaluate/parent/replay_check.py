"""A checked call's recorded kernel program -> the verdict of its replay on fresh secret inputs.
More: kbx_ray/evaluate/parent/README.md, `replay_check.py`.
"""
from __future__ import annotations

import os
import secrets
import time
from dataclasses import dataclass
from typing import Any, Callable

from kbx_ray.evaluate import program
from kbx_ray.evaluate.parent import case_checks
from kbx_ray.evaluate.parent.correctness import Verdict
from kbx_ray.evaluate.parent.reference_cache import References
from kbx_ray.evaluate.parent.sandbox import Flight, Sandbox, WorkerDied
from kbx_ray.evaluate.protocol import tensor_from_wire
from kbx_ray.evaluate.reply import CallReport
from kbx_ray.evaluate.settings import EvalConfig
from kbx_ray.evaluate.static.kernels import kernel_source
from kbx_ray.types import ErrorKind, Stage, Task

PAYLOAD_SHARE = 4  # a program with no fresh input carries under 1/4 of its outputs' values
# a live timed call this much faster than its own recorded program did not run it (noise: the
# program's graph has no host overhead on a GPU; on the CPU both run the interpreter)
FASTER = {"cuda": 0.7, "cpu": 0.5}
PROGRAM_BUDGET_S, PROGRAM_CI = 0.3, 0.03  # the program's timing: a bound by a factor, not a figure


class Replay:
    """The replay process beside one evaluator's worker, and the verdicts it gives."""

    def __init__(self, cfg: EvalConfig, device: str) -> None:
        self.cfg, self.device = cfg, device
        self.on = str(cfg.replay) == "on"
        self.sandbox = Sandbox(cfg.sandbox)
        self.kernels = self.module = self.source = ""
        self.programs: dict[str, tuple[program.Program, int]] = {}  # case -> its last program
        self.warmed: set[str] = set()  # cases whose kernels this process compiled (`warm`)
        self.warm_s = 0.0  # time asking for those compiles (a running total)
        self.compiles = 0  # kernels its replays still compiled, by its word (a running total)
        self.cache_bytes = 0  # what it may keep of its inputs (admission.cache_limit; 0: its cap)

    def begin(self, code: str, module: str) -> None:
        """A new candidate: its kernel module, written for the replay process to build."""
        self.programs, self.warmed = {}, set()
        if self.on:
            self.module, self.source = module, kernel_source(code)
            self.kernels = self.sandbox.write_code(f"kbx_kern_{module}", self.source)

    def start(self) -> None:
        """The replay process, started if none is up (the caller keeps it off the budget)."""
        if self.on:
            self.sandbox.start()

    def kill(self) -> None:
        self.sandbox.kill()
        self.warmed = set()

    def _fresh(self, seed: int) -> int:
        return secrets.randbelow(2**31 - 1) + 1 if self.cfg.secret_seeds else seed + 1_000_003

    def verdict(self, refs: References, ref_mod: Any, task: Task, case: dict, seed: int,
                info: CallReport, left: Callable[[], float]) -> Verdict | None:
        """None when the replay agrees with the reference (or is off); else the failing verdict.
        `left`: seconds of the evaluation's budget left."""
        got = self.submit(refs, ref_mod, task, case, seed, info, left)
        return self.collect(got, refs, ref_mod, task) if isinstance(got, Pending) else got

    def submit(self, refs: References, ref_mod: Any, task: Task, case: dict, seed: int,
               info: CallReport, left: Callable[[], float],
               released: Callable[[], Any] | None = None) -> Pending | Verdict | None:
        """The replay of the call's program sent on its way (`collect` judges it), or at once the
        verdict of a program that cannot be replayed. The reference runs meanwhile. `released`:
        the caller's GPU hold let go (gpulock.released), where the case's first program is
        compiled before its replay runs (`warm`)."""
        if not self.on:
            return None
        raw = info.program
        if not raw:
            return Verdict(False, ErrorKind.INFRA_ERROR,
                           "no verdict can be given: the worker sent no kernel program")
        if "unsupported" in raw:
            return Verdict(False, ErrorKind.REPLAY_UNSUPPORTED,
                           f"its kernel program could not be recorded ({raw['unsupported']}), "
                           "so no verdict can be given")
        try:
            prog = program.parse(raw)
        except program.ProgramError as e:
            return Verdict(False, ErrorKind.DISQUALIFIED,
                           f"its recorded kernel program is outside the replay's instruction "
                           f"set: {e}")
        fresh = self._fresh(seed)
        self.programs[case["name"]] = (prog, seed)
        why = self._payload(prog, refs, ref_mod, task, case, seed, fresh)
        if why:
            return Verdict(False, ErrorKind.DISQUALIFIED, why)
        if released is not None and case["name"] not in self.warmed:
            self._warm(prog, task, case, seed, fresh, left, released)
        flight = self._send("replay", prog, task, case, seed, fresh, left, {})
        if isinstance(flight, Verdict):
            return flight
        refs.outputs_for(ref_mod, task, case, seed, fresh)  # beside the replay, kept for collect
        return Pending(prog, case, seed, fresh, flight)

    def collect(self, p: Pending, refs: References, ref_mod: Any, task: Task) -> Verdict | None:
        """The replayed outputs of `p` against the reference on the same fresh inputs."""
        outs = self._outputs(p.prog, self._receive(p.flight))
        if isinstance(outs, Verdict):
            return outs
        ref = refs.outputs_for(ref_mod, task, p.case, p.seed, p.fresh)
        v = case_checks.values(outs, ref[0], ref_mod, p.case,
                               lambda: refs.exact(ref_mod, task, p.case, p.seed, p.fresh))
        if v.ok:
            return None
        v.message = ("the replay of its kernel program (its Triton launches and allowlisted "
                     f"steps only) on fresh inputs differs from the reference: {v.message}")
        return v

    def warm(self, prog: program.Program, task: Task, case: dict, seed: int,
             left: Callable[[], float], released: Callable[[], Any]) -> None:
        """`prog`'s kernels compiled here for `case` ahead of its first call (one_compile.py)."""
        self._warm(prog, task, case, seed, self._fresh(seed), left, released)

    def _warm(self, prog: program.Program, task: Task, case: dict, seed: int, fresh: int,
              left: Callable[[], float], released: Callable[[], Any]) -> None:
        """The case's kernels compiled in this process with the GPU hold let go: a compile of
        seconds would otherwise keep every evaluator waiting to time waiting on it. What it
        says is no verdict (the replay compiles what it lacks and files any failure)."""
        t0 = time.perf_counter()
        self.warmed.add(case["name"])
        with released():
            self._request("warm", prog, task, case, seed, fresh, left, {})
        self.warm_s += time.perf_counter() - t0

    def _payload(self, prog: program.Program, refs: References, ref_mod: Any, task: Task,
                 case: dict, seed: int, fresh: int) -> str:
        """Where no input is drawn afresh (logspace, arange, rand), an answer computed on the host
        could only travel in the program's scalars and constants: bound them by the outputs."""
        if refs.drawn_for(ref_mod, task, case, seed, fresh):
            return ""
        numel = sum(t.numel() for t in refs.outputs_for(ref_mod, task, case, seed)[0])
        carried = prog.payload()
        if numel >= 64 and carried * PAYLOAD_SHARE >= numel:
            return (f"its kernel program carries {carried} values outside its kernels for "
                    f"{numel} output values: an answer computed on the host")
        return ""

    def time_program(self, task: Task, case: dict, live_ms: float, timing: dict,
                     left: Callable[[], float]) -> tuple[float, float] | Verdict | None:
        """The case's recorded program timed alone (`replay_time`; the caller holds the GPU
        alone): (its median, its fastest-runs figure), timed once more when the live median looks
        faster than it (a busy host slows the program's run too). None: no program or replay off.
        It bounds the live figure by a factor (`FASTER`), so it is timed to a looser CI."""
        if not self.on or case["name"] not in self.programs:
            return None
        prog, seed = self.programs[case["name"]]
        cheap = timing if self.device != "cuda" else {  # the interpreter's reps are few anyway
            **timing, "budget_s": min(timing["budget_s"], PROGRAM_BUDGET_S),
            "target_rel_ci": max(timing["target_rel_ci"], PROGRAM_CI)}
        median, fast = 0.0, float("inf")
        for _ in range(2):
            got = self._request("replay_time", prog, task, case, seed, self._fresh(seed), left,
                                {"timing": cheap})
            if isinstance(got, Verdict):
                return got
            t = got[0]["timing"]
            median = float(t["median_ms"])
            # its fast runs (the 20th percentile), not its median: noise only ever slows a run
            fast = min(fast, float(t.get("p20_ms") or t["median_ms"]))
            if live_ms >= FASTER.get(self.device, 0.7) * fast:
                break
        return median, fast

    def judge_timing(self, case: dict, cr: Any, live_ms: float,
                     got: tuple[float, float] | Verdict | None) -> None:
        """A live timed median faster than its own program beyond noise did not run it (a faster
        path taken only in unwatched calls): `timing_invalid`. Both figures are recorded."""
        if got is None:
            return
        if isinstance(got, Verdict):
            raise case_checks.Fail(Stage.TIMING, got.kind, f"case {case['name']}, timing its "
                                   f"kernel program: {got.message}")
        cr.replay_ms, fast = got
        if live_ms < FASTER.get(self.device, 0.7) * fast:
            raise case_checks.Fail(Stage.TIMING, ErrorKind.TIMING_INVALID,
                                   f"case {case['name']}: its timed calls ({live_ms:.4g} ms) ran "
                                   f"faster than its own recorded kernel program ({fast:.4g} ms at "
                                   "its 20th percentile, timed twice): the timed calls did not "
                                   "run the program that was judged")

    def _outputs(self, prog: program.Program, got: tuple | Verdict) -> list | Verdict:
        if isinstance(got, Verdict):
            return got
        reply, blobs = got
        if isinstance(reply.get("compiles"), int):  # the replay process's word: profiling only
            self.compiles += max(0, reply["compiles"])
        metas = reply.get("outputs")
        if not isinstance(metas, list) or len(metas) != len(prog.outputs):
            return Verdict(False, ErrorKind.INFRA_ERROR, "no verdict can be given: the replay sent "
                           f"{metas!r:.80} for {len(prog.outputs)} outputs")
        return [tensor_from_wire(m, b).to(self.device) for m, b in zip(metas, blobs)]

    def _request(self, op: str, prog: program.Program, task: Task, case: dict, seed: int,
                 fresh: int, left: Callable[[], float], extra: dict) -> tuple | Verdict:
        flight = self._send(op, prog, task, case, seed, fresh, left, extra)
        return flight if isinstance(flight, Verdict) else self._receive(flight)

    def _send(self, op: str, prog: program.Program, task: Task, case: dict, seed: int,
              fresh: int, left: Callable[[], float], extra: dict) -> Flight | Verdict:
        if not self.sandbox.alive or not os.path.exists(self.kernels):  # a new process's home
            self.kernels = self.sandbox.write_code(f"kbx_kern_{self.module}", self.source)
        header = {"op": op, "task_path": task.path, "module": self.module,
                  "task_key": task.task_hash, "entry": task.name, "case": case, "seed": seed,
                  "fresh_seed": fresh, "kernels_path": self.kernels, "program": prog.to_wire(),
                  "cache_bytes": self.cache_bytes, **extra}
        budget = min(self.cfg.case_timeout_s, left())
        if budget <= 0:
            return Verdict(False, ErrorKind.TIMEOUT,
                           "the evaluation ran past its budget before its replay")
        try:
            return self.sandbox.send(header, budget)
        except WorkerDied as d:
            self.sandbox.kill()
            return Verdict(False, d.kind, f"the replay of its kernel program: {d.msg}")

    def _receive(self, flight: Flight) -> tuple | Verdict:
        try:
            reply, blobs = self.sandbox.receive(flight)
        except WorkerDied as d:
            self.sandbox.kill()
            return Verdict(False, d.kind, f"the replay of its kernel program: {d.msg}")
        if not reply.get("ok"):
            kind = reply.get("error_kind", ErrorKind.INFRA_ERROR)
            if kind not in (ErrorKind.RUNTIME_ERROR, ErrorKind.DISQUALIFIED,
                            ErrorKind.REPLAY_UNSUPPORTED, ErrorKind.TIMEOUT,
                            ErrorKind.CUDA_ERROR, ErrorKind.UNSUPPORTED_INTERPRETER):
                kind = ErrorKind.INFRA_ERROR
            if kind in (ErrorKind.INFRA_ERROR, ErrorKind.CUDA_ERROR, ErrorKind.TIMEOUT):
                self.sandbox.kill()  # its context or memory is suspect
            return Verdict(False, kind, str(reply.get("error_msg", ""))[:4000])
        return reply, blobs


@dataclass
class Pending:
    """A replay sent (`Replay.submit`) and not yet judged (`Replay.collect`)."""
    prog: program.Program
    case: dict
    seed: int
    fresh: int
    flight: Flight
