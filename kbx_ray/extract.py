"""Completion text -> Candidate: the last fenced Python block that defines the entry function.

Models wrap code in prose, think aloud in <think> blocks, emit several blocks (a sketch, then the
answer), forget the fence, or run out of tokens. Each case either yields code or a precise
extraction failure (`no_code_block`, `truncated`).
"""
from __future__ import annotations

import re

from kbx_ray.types import Candidate, Generation, stable_hash

_THINK = re.compile(r"<think>.*?(</think>|$)", re.S | re.I)
_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)(?:```|$)", re.S)


def candidate_id(task_id: str, code: str) -> str:
    return stable_hash(task_id, code.strip())


def _defines(code: str, entry: str) -> bool:
    return re.search(rf"^\s*def\s+{re.escape(entry)}\s*\(", code, re.M) is not None


def extract_code(text: str, entry: str) -> str | None:
    """The code of the last Python block defining `entry`; else the last Python block; else None."""
    body = _THINK.sub("", text)
    blocks = [(lang.lower(), code) for lang, code in _FENCE.findall(body)]
    python = [c for lang, c in blocks if lang in ("", "python", "py", "python3", "triton")]
    for code in reversed(python):
        if _defines(code, entry):
            return code.strip() + "\n"
    if not blocks and _defines(body, entry) and re.search(r"^\s*(import|from)\s", body, re.M):
        # No fence at all: take the text from the first import on, if it defines the entry.
        start = re.search(r"^\s*(import|from)\s", body, re.M)
        return body[start.start():].strip() + "\n" if start else None
    return None


def extract(gen: Generation, task_id: str, entry: str) -> Candidate:
    code = extract_code(gen.text, entry)
    if gen.finish_reason == "length" and (code is None or not _balanced(gen.text)):
        return Candidate(candidate_id=stable_hash(task_id, "truncated", gen.text), task_id=task_id,
                         code=code or "", entry=entry, error_kind="truncated",
                         error_msg="the completion hit the token limit before the code was complete")
    if code is None:
        return Candidate(candidate_id=stable_hash(task_id, "nocode", gen.text), task_id=task_id,
                         code="", entry=entry, error_kind="no_code_block",
                         error_msg=f"no Python code block defining {entry}() in the completion")
    return Candidate(candidate_id=candidate_id(task_id, code), task_id=task_id, code=code, entry=entry)


def _balanced(text: str) -> bool:
    """Whether every opened fence was closed (an open fence at the end means truncation)."""
    return text.count("```") % 2 == 0
