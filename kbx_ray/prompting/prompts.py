"""Task (+ hardware facts, exemplars, the last verdict) -> chat messages, rendered from templates.
More: kbx_ray/prompting/README.md, `prompts.py`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from string import Template
from typing import Any, Sequence

from kbx_ray.types import EvalResult, Task, trim

REPO = Path(__file__).resolve().parents[2]
TEMPLATES_DIR = REPO / "conf" / "prompts"
EXEMPLARS_DIR = REPO / "conf" / "exemplars"


class TemplateError(ValueError):
    """A prompt template is missing or names a placeholder that does not exist."""


@dataclass(frozen=True)
class Prompt:
    messages: list[dict[str, str]]


class Templates:
    """conf/prompts/*.txt, each overridable by a file of the same name in `override_dir`."""

    def __init__(self, override_dir: str | Path | None = None) -> None:
        self.dirs = [TEMPLATES_DIR]
        if override_dir:
            self.dirs.insert(0, Path(override_dir).expanduser())
        if not self.dirs[0].is_dir():
            raise TemplateError(f"templates_dir {self.dirs[0]} is not a folder: point "
                                "method.templates_dir at a folder of *.txt prompt templates")

    def text(self, name: str) -> str:
        for d in self.dirs:
            if (d / f"{name}.txt").is_file():
                return (d / f"{name}.txt").read_text()
        raise TemplateError(f"no prompt template {name}.txt in {', '.join(map(str, self.dirs))}")

    def render(self, name: str, /, **values: Any) -> str:
        try:
            return Template(self.text(name)).substitute(values).strip()
        except (KeyError, ValueError) as e:
            known = ", ".join("$" + k for k in sorted(values)) or "no placeholders"
            raise TemplateError(f"template {name}.txt uses {e}, which does not exist here "
                                f"(it has {known})") from None


def hardware_facts(pool: Any | None) -> str:
    if pool is None or not getattr(pool, "peak_gbps", 0):
        return ""
    tf = ", ".join(f"{k} {v:g}" for k, v in sorted(getattr(pool, "peak_tflops", {}).items()))
    return (f"\nTarget GPU: {pool.gpu} ({pool.sm_count} SMs, {pool.peak_gbps:g} GB/s memory "
            f"bandwidth, peak TFLOP/s: {tf}).")


def build_prompt(task: Task, pool: Any | None = None, extra: str = "", *,
                 exemplars: list[Task] | tuple = (), cot: bool = False,
                 templates: Templates | None = None) -> Prompt:
    t = templates or Templates()
    parts = []
    if exemplars:
        parts.append(t.render("few_shot", examples="\n\n".join(_exemplar(t, e) for e in exemplars)))
    contract = t.render("contract", signature=task.signature)
    hw = hardware_facts(pool).strip()
    parts.append(t.render("task", task_id=task.task_id, description=task.description,
                          reference=task.reference_source.rstrip(),
                          hardware=hw + "\n\n" if hw else "", contract=contract))
    if cot:
        parts.append(t.render("cot"))
    if extra:
        parts.append(extra)
    return Prompt(messages=[{"role": "system", "content": t.render("system")},
                            {"role": "user", "content": "\n\n".join(parts)}])


def _exemplar(t: Templates, e: Task) -> str:
    return t.render("exemplar", name=e.name, description=e.description,
                    reference=e.reference_source.rstrip(),
                    kernel=Path(e.solution_path).read_text().rstrip())


@lru_cache(maxsize=4)
def load_exemplars(root: str | None = None) -> tuple[Task, ...]:
    from kbx_ray.suites.builtin import load_suite

    return tuple(load_suite(root or EXEMPLARS_DIR))


def pick_exemplars(task: Task, k: int, root: str | None = None) -> list[Task]:
    """k exemplars, those of the task's own category first; never one with the task's name."""
    others = [e for e in load_exemplars(root) if e.name != task.name]
    others.sort(key=lambda e: (e.category != task.category, e.task_id))
    return others[:k]


# ---- feedback --------------------------------------------------------------------------------
def feedback_kind(r: EvalResult) -> str:
    """Which feedback a verdict calls for: it failed to run, ran wrong, or is correct."""
    return "performance" if r.exec_ok else ("correctness" if r.call_ok else "compile")


def feedback(r: EvalResult, kinds: Sequence[str], t: Templates) -> str:
    """The harness's verdict as text, with the detail of the kinds the method asks for."""
    kind = feedback_kind(r)
    if kind not in kinds:
        return t.render("feedback_performance", timing="") if r.exec_ok else t.render("feedback_hidden")
    if kind == "compile":
        return t.render("feedback_compile", error_kind=r.error_kind, stage=r.stage,
                        error_msg=trim(r.error_msg, 1200))
    if kind == "correctness":
        return t.render("feedback_correctness", error_kind=r.error_kind,
                        error_msg=trim(r.error_msg, 800), cases=mismatch_summary(r))
    return t.render("feedback_performance", timing=timing_summary(r))


def mismatch_summary(r: EvalResult) -> str:
    lines = []
    for c in r.cases:
        status = "ok" if c.ok else f"FAILED: {c.error_kind}: {c.message}"
        lines.append(f"- {c.case}: max abs err {c.max_abs_err:.3g}, max rel err "
                     f"{c.max_rel_err:.3g}; {status}")
    return "\n".join(lines) or "- (no case finished)"


def timing_summary(r: EvalResult) -> str:
    if r.timing_skipped:
        return f"Timing was skipped: {r.timing_skipped}."
    lines = ["Timing against eager PyTorch (speedup > 1 is faster):"]
    for c in r.cases:
        if c.speedup is None:
            continue
        sol = f", {c.sol_fraction:.1%} of the GPU's peak" if c.sol_fraction else ""
        lines.append(f"- {c.case}: {c.cand_ms:.4f} ms vs eager {c.ref_ms:.4f} ms, speedup "
                     f"{c.speedup:.2f}x{sol}")
    if r.speedup is not None and math.isfinite(r.speedup):
        sol = f", geomean SOL fraction {r.sol_fraction:.1%}" if r.sol_fraction else ""
        lines.append(f"Geomean speedup {r.speedup:.2f}x{sol}.")
    return "\n".join(lines)


def answer_text(a: Any) -> str:
    """The previous answer as the assistant's turn: its code, or (no code) its trimmed text."""
    if a.candidate.code:
        return f"```python\n{a.candidate.code.rstrip()}\n```"
    return trim(a.generation.text, 1500) or "(an empty answer)"


def repair_prompt(first: Prompt, prev: Any, kinds: Sequence[str], t: Templates) -> Prompt:
    """The first prompt, the previous answer, and the harness's verdict on it."""
    ask = t.render("repair", round=prev.round, feedback=feedback(prev.result, kinds, t))
    return Prompt(messages=[*first.messages, {"role": "assistant", "content": answer_text(prev)},
                            {"role": "user", "content": ask}])


def agent_prompt(first: Prompt, best: Any, last: list[Any], rnd: int, kinds: Sequence[str],
                 t: Templates) -> Prompt:
    """The agent's reflector (best so far fails) or optimizer (it is correct) turn."""
    others = "\n".join(f"- candidate {a.branch}: " + (
        "correct" if a.result.exec_ok else f"{a.result.error_kind}: "
        f"{(trim(a.result.error_msg, 160).splitlines() or [''])[0]}")
        for a in last if a is not best) or "- (none)"
    name = "agent_optimize" if best.result.exec_ok else "agent_reflect"
    ask = t.render(name, round=rnd, branch=best.branch, best_round=best.round, others=others,
                   report=feedback(best.result, kinds, t))
    return Prompt(messages=[*first.messages, {"role": "assistant", "content": answer_text(best)},
                            {"role": "user", "content": ask}])
