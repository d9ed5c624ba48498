"""One candidate through the stages: static checks -> compile/call -> correctness -> timing -> roofline.

The parent (this process) is the judge. It runs the reference and the comparison itself and times the
eager reference with the same `bench` the worker uses; the worker only runs candidate code. Any
failure becomes an `EvalResult` with an `error_kind`; nothing here raises for a bad candidate.
"""
from __future__ import annotations

import ast
import logging
import math
import secrets
import time

from typing import Any

from kbx_ray.evaluate import timing as timing_mod
from kbx_ray.evaluate.checks import static_check
from kbx_ray.evaluate.settings import EvalConfig
from kbx_ray.evaluate.correctness import Verdict, compare, flatten, seed_dependence, layout_problem
from kbx_ray.evaluate.gpulock import GpuLock, NoLock
from kbx_ray.evaluate.inputs import InputCache
from kbx_ray.evaluate.protocol import tensor_from_wire
from kbx_ray.evaluate.roofline import compute_dtype, roofline
from kbx_ray.evaluate.sandbox import Sandbox, WorkerDied, scrub_paths
from kbx_ray.metrics import geomean
from kbx_ray.suite import load_module
from kbx_ray.types import Candidate, CaseResult, EvalResult, Task, trim

log = logging.getLogger(__name__)


class _Fail(Exception):
    def __init__(self, stage: str, kind: str, msg: str) -> None:
        super().__init__(msg)
        self.stage, self.kind, self.msg = stage, kind, msg


def resolve_device(requested: str) -> str:
    if requested != "auto":
        return requested
    try:
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"
    except ImportError:  # pragma: no cover
        return "cpu"


class Evaluator:
    """Holds one warm sandbox and a cache of eager reference timings."""

    def __init__(self, cfg: EvalConfig | None = None) -> None:
        self.cfg = cfg or EvalConfig()
        self.device = resolve_device(self.cfg.device)
        self.cfg.sandbox.device = self.device
        self.sandbox = Sandbox(self.cfg.sandbox)
        self.ref_times: dict[tuple, timing_mod.Timing] = {}
        self.inputs = InputCache()
        self.ref_outputs: dict[tuple, tuple[list, str, list]] = {}  # reference outputs per seed
        self.case_dtypes: dict[tuple, str] = {}  # the dtype whose peak bounds each case
        self.count = 0
        self.deadline = math.inf  # the running evaluation's end (perf_counter), `eval_budget_s`
        self.seeds: list[int] = []  # the seeds drawn for the running evaluation
        self.lock: GpuLock | NoLock = NoLock()
        if self.device == "cuda":  # evaluators sharing this GPU: timing runs alone (gpulock.py)
            import torch

            self.lock = GpuLock(str(torch.cuda.get_device_properties(0).uuid))

    def close(self) -> None:
        self.sandbox.close()
        self.lock.close()

    def cases_for(self, task: Task) -> list[dict]:
        small = self.cfg.small_only == "true" or (self.cfg.small_only == "auto" and self.device == "cpu")
        return [c for c in task.cases if c["small"] or not small]

    def evaluate(self, task: Task, cand: Candidate) -> EvalResult:
        """The verdict. A failure of this process (an OOM in the reference or the comparison) is
        `infra_error`, retried once on a fresh worker; nothing here raises for it."""
        t0 = time.perf_counter()
        self.deadline = t0 + self.cfg.eval_budget_s
        waited, held = self.lock.wait_s, self.lock.exclusive_s
        for attempt in (0, 1):
            res = EvalResult(task_id=task.task_id, candidate_id=cand.candidate_id,
                             device=self.device)
            if self._attempt(task, cand, res) or attempt:
                break
            log.warning("evaluator failed on %s (%s); retrying once", cand.candidate_id,
                        res.error_msg)
        if attempt:
            res.flags.append("retried_infra_error")
        info = self.sandbox.info
        res.gpu_name, res.driver = info.get("gpu_name", ""), info.get("driver", "")
        res.torch_version, res.triton_version = info.get("torch", ""), info.get("triton", "")
        res.eval_wall_s = time.perf_counter() - t0
        if self.device == "cuda":  # GPU sharing: waiting for the lock, and holding it alone
            res.stage_s["lock_wait"] = round(self.lock.wait_s - waited, 4)
            res.stage_s["exclusive"] = round(self.lock.exclusive_s - held, 4)
        self.count += 1
        if self.count % self.cfg.recycle_after == 0 or "tampered_runtime" in res.flags:
            self.sandbox.kill()
        return res

    def _attempt(self, task: Task, cand: Candidate, res: EvalResult) -> bool:
        """One try; False when this process failed (worth one more)."""
        self.seeds = res.seeds
        try:
            self._run(task, cand, res)
            res.stage, res.exec_ok = "done", True
        except _Fail as f:
            res.stage, res.error_kind, res.error_msg = f.stage, f.kind, trim(scrub_paths(f.msg))
        except WorkerDied as d:
            res.error_kind, res.error_msg = d.kind, trim(scrub_paths(d.msg))
        except Exception as e:  # noqa: BLE001 - the parent's own failure, never the candidate's
            log.exception("evaluating %s failed in the parent", cand.candidate_id)
            self._recover()
            res.exec_ok, res.error_kind = False, "infra_error"
            res.error_msg = trim(scrub_paths(f"the evaluator failed at stage {res.stage} "
                                             f"({type(e).__name__}: {e}); not the candidate's "
                                             "fault: re-run it"))
            return False
        finally:
            self.ref_outputs.clear()  # keyed by this evaluation's secret seeds: no later hits
            self.inputs.clear()
        return True

    def _recover(self) -> None:
        """After a failure here: drop what this process holds and start the worker afresh."""
        self.ref_outputs.clear()
        self.inputs.clear()
        self.sandbox.kill()
        if self.device == "cuda":
            import torch

            torch.cuda.empty_cache()

    def _seed(self, i: int) -> int:
        """Input seed number `i` of this evaluation: secret, drawn after the candidate's import
        (which can then precompute nothing), recorded in `EvalResult.seeds`."""
        s = secrets.randbelow(2**31 - 1) + 1 if self.cfg.secret_seeds else self.cfg.base_seed + i
        self.seeds.append(s)
        return s

    # ---- stages ----------------------------------------------------------------------------
    def _run(self, task: Task, cand: Candidate, res: EvalResult) -> None:
        t_run = time.perf_counter()
        if cand.error_kind:
            raise _Fail("extract", cand.error_kind, cand.error_msg)
        res.stage = "static"
        try:
            tree = ast.parse(cand.code)
        except SyntaxError as e:
            raise _Fail("static", "syntax_error", f"line {e.lineno}: {e.msg}") from None
        rep = static_check(tree, task.name)
        res.flags += rep.flags
        if rep.violations:
            raise _Fail("static", "disqualified", "; ".join(rep.violations))
        res.stage = "compile"
        mark = self._clock(res, "static", t_run)
        module = f"{cand.candidate_id}_{self.count}"
        path = self.sandbox.write_code(f"kbx_cand_{module}", cand.code)
        self._ask({"op": "load", "code_path": path, "task_path": task.path, "entry": task.name,
                   "module": module, "task_key": task.task_hash}, self.cfg.load_timeout_s, "compile")
        mark = self._clock(res, "load", mark)
        ref_mod = load_module(task.path)
        cases = self.cases_for(task)
        for i, case in enumerate(cases):
            n = self.cfg.seeds if case["small"] or task.random else max(1, self.cfg.large_seeds)
            seeds = [self._seed(j) for j in range(n)]  # fresh per case: no case tells another's
            cr = self._check_case(ref_mod, task, case, seeds, res, first=i == 0)
            res.cases.append(cr)
            if not cr.ok:
                raise _Fail("correctness", cr.error_kind, f"case {case['name']}: {cr.message}")
        mark = self._clock(res, "correctness", mark)
        if self.device != "cuda" and not self.cfg.cpu_timing:
            res.timing_skipped = "no GPU: correctness ran under the Triton interpreter"
            return
        if self.device != "cuda":
            res.flags.append("cpu_timing")  # the protocol ran; its figures mean nothing
        res.stage = "timing"
        timed = [(c, cr) for c, cr in zip(cases, res.cases) if self._timed(c, cases)]
        for group in self._timing_groups(ref_mod, timed):
            # One exclusive hold per group: each hold first waits for every evaluator's shared work
            # in flight (a compile can take seconds), so one per case would idle the GPU that often.
            with self.lock.exclusive():
                measured = [self._time_case(ref_mod, task, case) for case, _ in group]
            for (case, cr), m in zip(group, measured):
                self._check_timed_case(ref_mod, task, case, cr, res, *m)
        self._clock(res, "timing", mark)
        timed = [c.speedup for c in res.cases if c.speedup]
        if timed:
            res.speedup = geomean(timed)
        sols = [c.sol_fraction for c in res.cases if c.sol_fraction]
        if sols:
            res.sol_fraction = geomean(sols)

    @staticmethod
    def _clock(res: EvalResult, stage: str, since: float) -> float:
        now = time.perf_counter()
        res.stage_s[stage] = round(now - since, 4)
        return now

    def _timed(self, case: dict, cases: list[dict]) -> bool:
        """Which cases are timed: the realistic (non-small) ones, unless a task has none."""
        if self.cfg.timing_cases == "all" or all(c["small"] for c in cases):
            return True
        return not case["small"]

    def _ask(self, header: dict, timeout: float, stage: str,
             res: EvalResult | None = None) -> tuple[dict, list[bytearray]]:
        left = self.deadline - time.perf_counter()
        if left <= 0:
            raise _Fail(stage, "timeout", f"the evaluation ran past its {self.cfg.eval_budget_s:.0f}"
                        " s budget (evaluation.eval_budget_s)")
        try:
            reply, blobs = self.sandbox.request(header, min(timeout, left))
        except WorkerDied as d:
            if d.kind == "timeout" and left < timeout:
                d.msg = (f"{header.get('op')}: the evaluation ran past its "
                         f"{self.cfg.eval_budget_s:.0f} s budget (evaluation.eval_budget_s)")
            raise _Fail(stage, d.kind, d.msg) from None
        prof = reply.get("prof")
        if res is not None and isinstance(prof, dict):  # the worker's own account: profiling only
            for k, v in prof.items():
                if k in ("inputs", "poison", "call", "encode") and isinstance(v, (int, float)):
                    res.stage_s[f"w_{k}"] = round(res.stage_s.get(f"w_{k}", 0.0) + float(v), 6)
        if not reply.get("ok"):
            raise _Fail(stage, reply.get("error_kind", "infra_error"), reply.get("error_msg", ""))
        return reply, blobs

    def _check_case(self, ref_mod: Any, task: Task, case: dict, seeds: list[int], res: EvalResult,
                    first: bool) -> CaseResult:
        cr = CaseResult(case=case["name"], seeds=len(seeds))
        outs_by_seed = []
        for i, seed in enumerate(seeds):  # one seed per request: a reply holds one seed's outputs
            with self.lock.shared():
                t0 = time.perf_counter()
                reply, blobs = self._ask({"op": "run", "case": case, "seeds": [seed],
                                          "repeat": i == 0}, self.cfg.case_timeout_s,
                                         "compile" if first and i == 0 else "correctness", res)
                res.stage, res.call_ok = "correctness", True
                info = reply["results"][0]
                t1 = time.perf_counter()
                outs = [tensor_from_wire(m, b).to(self.device)
                        for m, b in zip(info["outputs"], blobs)]
                outs_by_seed.append(outs)
                t2 = time.perf_counter()
                v = self._integrity(info, task, res) or self._verdict(ref_mod, task, case, seed,
                                                                      outs, info)
            for key, dt in (("worker_run", t1 - t0), ("decode", t2 - t1),
                            ("judge", time.perf_counter() - t2)):
                res.stage_s[key] = round(res.stage_s.get(key, 0.0) + dt, 4)
            cr.max_abs_err = max(cr.max_abs_err, v.max_abs_err)
            cr.max_rel_err = max(cr.max_rel_err, v.max_rel_err)
            if not v.ok:
                cr.error_kind, cr.message = v.kind, f"seed {seed}: {v.message}"
                return cr
        if task.random and len(outs_by_seed) > 1:
            pairs = list(zip(*outs_by_seed[:2]))
            why = ("different seeds gave identical outputs" if all(
                a.shape == b.shape and bool((a == b).all()) for a, b in pairs) else next(
                (w for w in (seed_dependence(a, b) for a, b in pairs) if w), ""))
            if why:
                cr.error_kind, cr.message = "mismatch", why
                return cr
        cr.ok = True
        return cr

    def _integrity(self, info: dict, task: Task, res: EvalResult) -> Verdict | None:
        """Worker observations that fail a candidate whatever its values."""
        if info.get("tampered"):
            res.flags.append("tampered_runtime")
            return Verdict(False, "disqualified", "the candidate patched the harness runtime")
        if info.get("side_stream_launches"):
            return Verdict(False, "disqualified", "a Triton kernel was launched on a non-default "
                           "CUDA stream (its time escapes the timing events)")
        if info.get("stream_changed"):
            return Verdict(False, "disqualified", "the candidate left a non-default stream current")
        if info.get("launches", 0) == 0:
            return Verdict(False, "disqualified", "no Triton kernel was launched")
        if info.get("torch_ops"):
            flag = "torch_compute:" + ",".join(info["torch_ops"][:5])
            if flag not in res.flags:
                res.flags.append(flag)
            if self.cfg.torch_compute == "fail":
                return Verdict(False, "disqualified", f"computes with torch ops {info['torch_ops'][:5]}")
        if info.get("aliased"):
            return Verdict(False, "output_aliases_input", "an output shares memory with an input")
        if info.get("mutated"):
            return Verdict(False, "input_mutated", f"inputs {info['mutated']} changed but the task "
                                                   "does not declare them mutated")
        if info.get("nondeterministic"):
            return Verdict(False, "nondeterministic", "two runs on the same inputs disagree")
        return None

    def _reference(self, ref_mod: Any, task: Task, case: dict,
                   seed: int) -> tuple[list, str, list]:
        """The reference's outputs for (task, case, seed): the same for every candidate, so kept."""
        key = (task.task_hash, case["name"], seed)
        if key not in self.ref_outputs:
            def size(entry: tuple[list, str, list]) -> int:
                return sum(t.numel() * t.element_size() for t in entry[0])

            while self.ref_outputs and (len(self.ref_outputs) >= self.cfg.ref_cache_entries or sum(
                    size(e) for e in self.ref_outputs.values()) > self.cfg.ref_cache_mb << 20):
                self.ref_outputs.pop(next(iter(self.ref_outputs)))
            self.ref_outputs[key] = self._run_reference(ref_mod, task, case, seed)
        return self.ref_outputs[key]

    def _run_reference(self, ref_mod: Any, task: Task, case: dict,
                       seed: int) -> tuple[list, str, list]:
        """Outputs (row-major copies: the comparison walks them in flat chunks), the structure, and
        whether each output was contiguous (the layout the candidate's must match)."""
        args, kwargs = self.inputs.get(ref_mod, task.task_hash, case, seed, self.device)
        out = getattr(ref_mod, task.name)(*args, **kwargs)
        import inspect

        import torch

        bound = inspect.signature(getattr(ref_mod, task.name)).bind(*args, **kwargs).arguments
        tensors = flatten(out) + [bound[m] for m in task.mutates if m in bound]
        shape = "none" if out is None else ("tensor" if len(flatten(out)) == 1 and not
                                            isinstance(out, (tuple, list)) else f"tuple{len(out)}")
        contiguous = [t.is_contiguous() for t in tensors]
        return [t.detach().clone(memory_format=torch.contiguous_format) for t in tensors], shape, \
            contiguous

    def _verdict(self, ref_mod: Any, task: Task, case: dict, seed: int, outs: list,
                 info: dict) -> Verdict:
        ref, shape, contiguous = self._reference(ref_mod, task, case, seed)
        if info.get("structure") != shape:
            return Verdict(False, "shape_mismatch", f"returned {info.get('structure')}, expected {shape}")
        for i, (meta, c) in enumerate(zip(info.get("outputs", []), contiguous)):
            why = layout_problem(meta.get("shape", []), meta.get("stride", []), c)
            if why:
                return Verdict(False, "shape_mismatch", f"output {i}: {why}")
        return compare(outs, ref, ref_mod, case)

    def _timing_groups(self, ref_mod: Any, timed: list[tuple]) -> list[list[tuple]]:
        """Consecutive timed cases whose inputs and outputs fit `timing_group_mb` together: the
        worker keeps each timed case's buffers until its post-timing check."""
        groups: list[list[tuple]] = []
        room = 0.0
        for item in timed:
            mb = (ref_mod.cost(item[0]).get("bytes") or 0) / 2**20
            if not groups or mb > room:
                groups.append([])
                room = float(self.cfg.timing_group_mb)
            groups[-1].append(item)
            room -= mb
        return groups

    def _time_case(self, ref_mod: Any, task: Task,
                   case: dict) -> tuple[dict, float, Any, tuple[dict, list]]:
        """The candidate's and the reference's timing loops (the caller holds the GPU alone). The
        timed buffers rotate through `timing_sets` secret input sets (rotation.py)."""
        from dataclasses import asdict

        fresh = max(0, self.cfg.fresh_sets)
        seeds = [self._seed(i) for i in range(max(1, self.cfg.timing_sets) + fresh)]
        asked = time.perf_counter()
        reply, blobs = self._ask({"op": "time", "case": case, "seed": seeds[0], "seeds": seeds,
                                  "fresh": fresh, "timing": asdict(self.cfg.timing)},
                                 self.cfg.case_timeout_s + 4 * self.cfg.timing.budget_s, "timing")
        parent_wall_ms = (time.perf_counter() - asked) * 1e3  # our clock, not the worker's word
        return (reply["timing"], parent_wall_ms, self._ref_timing(ref_mod, task, case),
                (reply.get("timed_check") or {}, blobs))

    def _check_timed_calls(self, ref_mod: Any, task: Task, case: dict, checked: dict,
                           blobs: list) -> None:
        """Every timed call launched a kernel and returned a new object, and the last output on
        each input set is right for that set's values."""
        where = f"case {case['name']}, its timed calls checked after timing"
        if checked.get("error"):
            raise _Fail("timing", "runtime_error", f"{where}: {checked['error']}")
        if checked.get("launchless"):
            raise _Fail("timing", "disqualified", f"{where}: {checked['launchless']} of "
                        f"{checked.get('calls')} timed calls launched no Triton kernel")
        if checked.get("repeated"):
            raise _Fail("timing", "disqualified", f"{where}: {checked['repeated']} timed calls "
                        "returned an output object returned before (a cached result)")
        if not checked.get("samples"):
            raise _Fail("timing", "infra_error", f"{where}: the worker sent no timed outputs")
        k = 0
        for sample in checked["samples"]:
            metas = sample["outputs"]
            outs = [tensor_from_wire(m, b).to(self.device) for m, b in zip(metas, blobs[k:])]
            k += len(metas)
            ref, _, contiguous = self._reference(ref_mod, task, case, int(sample["seed"]))
            v = compare(outs, ref, ref_mod, case)
            for i, (meta, c) in enumerate(zip(metas, contiguous)):
                why = layout_problem(meta.get("shape", []), meta.get("stride", []), c)
                v = Verdict(False, "shape_mismatch", f"output {i}: {why}") if why and v.ok else v
            if not v.ok:
                raise _Fail("timing", v.kind, f"{where} (a cached or stale result?): {v.message}")

    def _check_fresh_calls(self, case: dict, t: dict, checked: dict) -> None:
        """A call on inputs never seen before costs what a timed call costs. A cache keyed by the
        inputs' content hits on every rotated set after its first visit and misses here, where it
        must compute (rotation.py); its outputs were compared with the reference already."""
        times = [x for x in checked.get("fresh_ms") or [] if isinstance(x, (int, float))]
        if not times or t["median_ms"] <= 0:
            return
        # on the CPU (`cpu_timing`, tests of the protocol) the host clock of a loaded box is noisy
        ratio = self.cfg.fresh_ratio if self.device == "cuda" else max(10.0, self.cfg.fresh_ratio)
        bound = ratio * t["median_ms"] + 0.02
        if min(times) > bound:
            raise _Fail("timing", "timing_invalid", f"case {case['name']}: calls on inputs never "
                        f"seen before took {min(times):.3f} ms, against {t['median_ms']:.3f} ms "
                        "on the timed ones (results cached by the inputs' content?)")

    def _check_timed_case(self, ref_mod: Any, task: Task, case: dict, cr: CaseResult,
                          res: EvalResult, t: dict, parent_wall_ms: float, ref_t: Any,
                          timed: tuple[dict, list]) -> None:
        """The timed calls' outputs, then fresh values in the timed buffers, checked (GPU shared),
        then the timing's own checks."""
        fresh = self._seed(len(self.seeds))
        with self.lock.shared():
            self._check_timed_calls(ref_mod, task, case, *timed)
            reply, blobs = self._ask({"op": "recheck", "case": case, "fresh_seed": fresh},
                                     self.cfg.case_timeout_s, "timing", res)
            check = reply["check"]
            outs = [tensor_from_wire(m, b).to(self.device) for m, b in zip(check["outputs"], blobs)]
            v = self._integrity(check, task, res) or self._verdict(ref_mod, task, case, fresh, outs,
                                                                   check)
        if not v.ok:
            raise _Fail("timing", v.kind, f"case {case['name']}, after timing (a cached or stale "
                                          f"result?): {v.message}")
        if t["event_sum_ms"] > min(t["wall_s"] * 1e3, parent_wall_ms) * 1.02 + 1.0:
            raise _Fail("timing", "timing_invalid", f"case {case['name']}: the reported event times "
                        f"({t['event_sum_ms']:.1f} ms) exceed the wall clock ({parent_wall_ms:.1f} ms)")
        self._check_fresh_calls(case, t, timed[0])
        if timing_mod.side_stream_suspect(timing_mod.Timing(**t)):
            raise _Fail("timing", "disqualified", f"case {case['name']}: {t['sync_tail_ms']:.3f} ms "
                        f"of GPU work after the call returned vs {t['median_ms']:.3f} ms by events "
                        "(side-stream work?)")
        if t.get("feed") == "host_bound":  # a call that syncs inside: its waits are in its times
            res.flags.append(f"timing_host_bound:{case['name']}")
        if ref_t.feed == "host_bound":  # the eager reference's own (its speedup is then generous)
            res.flags.append(f"timing_host_bound_ref:{case['name']}")
        cr.cand_ms, cr.cand_p20_ms, cr.cand_p80_ms = t["median_ms"], t["p20_ms"], t["p80_ms"]
        cr.cand_reps, cr.ref_ms, cr.ref_reps = t["reps"], ref_t.median_ms, ref_t.reps
        cr.speedup = ref_t.median_ms / t["median_ms"] if t["median_ms"] > 0 else None
        dtype = self.case_dtypes.get((task.task_hash, case["name"]), "float32")
        peak = self.cfg.peak_tflops.get(dtype, 0.0)
        cr.gbps, cr.tflops, cr.sol_fraction = roofline(ref_mod.cost(case), t["median_ms"],
                                                       self.cfg.peak_gbps, peak)
        if cr.sol_fraction and cr.sol_fraction > self.cfg.sol_limit:
            raise _Fail("timing", "timing_invalid", f"case {case['name']}: {cr.sol_fraction:.0%} of "
                        "the hardware's peak is physically impossible")

    def _ref_timing(self, ref_mod: Any, task: Task, case: dict) -> timing_mod.Timing:
        import torch

        key = (task.task_id, task.task_hash, case["name"], self.sandbox.info.get("gpu_name"),
               torch.__version__)
        if key not in self.ref_times:
            args, kwargs = self.inputs.get(ref_mod, task.task_hash, case, self.cfg.base_seed, self.device)
            self.case_dtypes[(task.task_hash, case["name"])] = compute_dtype((args, kwargs))
            fn = getattr(ref_mod, task.name)
            self.ref_times[key] = timing_mod.bench(lambda: fn(*args, **kwargs), self.cfg.timing,
                                                   self.device)
        return self.ref_times[key]
