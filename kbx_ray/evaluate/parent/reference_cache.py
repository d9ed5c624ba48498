"""(task, case, seed) -> the reference's outputs, and (task, case, GPU, torch) -> its eager timing.

The parent runs the reference itself, never the worker. Both are the same for every candidate, so
they are kept: the outputs for the running evaluation only (they are keyed by its secret seeds),
bounded by `ref_cache_entries` and `ref_cache_mb`; the eager timings for the evaluator's life.
"""
from __future__ import annotations

from typing import Any, Callable

from kbx_ray.evaluate.common import timing as timing_mod
from kbx_ray.evaluate.parent.correctness import flatten, reference_outputs
from kbx_ray.evaluate.parent.precise import float64_outputs
from kbx_ray.evaluate.common.inputs import InputCache, replay_inputs
from kbx_ray.evaluate.parent.roofline import compute_dtype
from kbx_ray.evaluate.settings import EvalConfig
from kbx_ray.types import Task

RefOutputs = tuple[list, str, list]  # outputs, their structure, whether each was contiguous


class References:
    """The reference's outputs per seed and eager timings per case, with the dtype whose peak
    bounds each timed case (`dtype`)."""

    def __init__(self, cfg: EvalConfig, device: str, inputs: InputCache) -> None:
        self.cfg, self.device, self.inputs = cfg, device, inputs
        self.outputs: dict[tuple, RefOutputs] = {}  # reference outputs per seed
        self.times: dict[tuple, timing_mod.Timing] = {}
        self.dtypes: dict[tuple, str] = {}  # the dtype whose peak bounds each case
        self.drawn: dict[tuple, int] = {}  # parameters drawn afresh per replay (replay_inputs)
        self.limit: int | None = None  # a tighter byte cap for the running evaluation's outputs

    def args(self, ref_mod: Any, task: Task, case: dict, seed: int,
             fresh: int | None = None) -> tuple[tuple, dict]:
        """The inputs of (case, seed), or of its replay on `fresh` values (inputs.replay_inputs)."""
        if fresh is None:
            return self.inputs.get(ref_mod, task.task_hash, case, seed, self.device)
        args, kwargs, drawn = replay_inputs(self.inputs, ref_mod, task.task_hash, case, seed,
                                            fresh, self.device, task.name)
        self.drawn[(task.task_hash, case["name"], seed, fresh)] = drawn
        return args, kwargs

    def clear_seeded(self) -> None:
        """Drop what is keyed by an evaluation's secret seeds: no later evaluation hits it."""
        self.outputs.clear()
        self.drawn.clear()

    def drawn_for(self, ref_mod: Any, task: Task, case: dict, seed: int, fresh: int) -> int:
        """How many of the replay's parameters are drawn afresh on `fresh` values."""
        key = (task.task_hash, case["name"], seed, fresh)
        if key not in self.drawn:
            self.args(ref_mod, task, case, seed, fresh)
        return self.drawn[key]

    def outputs_for(self, ref_mod: Any, task: Task, case: dict, seed: int,
                    fresh: int | None = None) -> RefOutputs:
        """The reference's outputs for (task, case, seed[, fresh]): the same for every candidate,
        so kept."""
        key = (task.task_hash, case["name"], seed, fresh)
        if key not in self.outputs:
            def size(entry: RefOutputs) -> int:
                return sum(t.numel() * t.element_size() for t in entry[0])

            cap = self.cfg.ref_cache_mb << 20
            cap = cap if self.limit is None else min(cap, self.limit)
            while self.outputs and (len(self.outputs) >= self.cfg.ref_cache_entries or sum(
                    size(e) for e in self.outputs.values()) > cap):
                self.outputs.pop(next(iter(self.outputs)))
            self.outputs[key] = self._run(ref_mod, task, case, seed, fresh)
        return self.outputs[key]

    def _run(self, ref_mod: Any, task: Task, case: dict, seed: int,
             fresh: int | None) -> RefOutputs:
        """Outputs (row-major copies: the comparison walks them in flat chunks), the structure, and
        whether each output was contiguous (the layout the candidate's must match)."""
        args, kwargs = self.args(ref_mod, task, case, seed, fresh)
        out, tensors = reference_outputs(getattr(ref_mod, task.name), args, kwargs, task.mutates)
        import torch

        shape = "none" if out is None else ("tensor" if len(flatten(out)) == 1 and not
                                            isinstance(out, (tuple, list)) else f"tuple{len(out)}")
        contiguous = [t.is_contiguous() for t in tensors]
        return [t.detach().clone(memory_format=torch.contiguous_format) for t in tensors], shape, \
            contiguous

    def exact(self, ref_mod: Any, task: Task, case: dict, seed: int,
              fresh: int | None = None) -> list | None:
        """The reference on float64 copies of the same inputs (precise.py): asked only where the
        candidate disagrees with `outputs_for`, so not kept; None where it cannot run so, and for a random task (judged by its own check)."""
        if task.random:
            return None
        args, kwargs = self.args(ref_mod, task, case, seed, fresh)
        return float64_outputs(getattr(ref_mod, task.name), args, kwargs, task.mutates)

    def exact_for(self, ref_mod: Any, task: Task, case: dict) -> Callable[[int], Callable]:
        """seed -> a thunk for `exact` on that seed (asked for only where values disagree)."""
        return lambda seed: (lambda: self.exact(ref_mod, task, case, seed))

    def timing(self, ref_mod: Any, task: Task, case: dict, gpu_name: Any) -> timing_mod.Timing:
        """The eager reference timed with the worker's own `bench`, once per case and GPU."""
        import torch

        key = (task.task_id, task.task_hash, case["name"], gpu_name, torch.__version__)
        if key not in self.times:
            args, kwargs = self.inputs.get(ref_mod, task.task_hash, case, self.cfg.base_seed,
                                           self.device)
            self.dtypes[(task.task_hash, case["name"])] = compute_dtype((args, kwargs))
            fn = getattr(ref_mod, task.name)
            self.times[key] = timing_mod.bench(lambda: fn(*args, **kwargs), self.cfg.timing,
                                               self.device)
        return self.times[key]

    def dtype(self, task: Task, case: dict) -> str:
        return self.dtypes.get((task.task_hash, case["name"]), "float32")
