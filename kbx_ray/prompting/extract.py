"""Completion text -> Candidate: the last fenced Python block that defines the entry function.

Models wrap code in prose, think aloud in <think> blocks (sometimes with the opening tag in the
prompt, so only `</think>` shows), emit several blocks (a sketch, then the answer; or the kernel in
one block and the wrapper in the next), forget the fence, or run out of tokens. Each case either
yields code or a precise extraction failure (`no_code_block`, `truncated`).
"""
from __future__ import annotations

import ast
import re
import textwrap

from kbx_ray.types import Candidate, ErrorKind, Generation, stable_hash

_THINK = re.compile(r"<think>(.*?)(</think>|$)", re.S | re.I)
# The body runs to the next ``` or the end. Written as runs of non-backticks, not as a lazy `.*?`
# that steps one character at a time (25x slower on a 2 kB completion). The same blocks; an
# unclosed last block keeps the text's final newline, which every caller strips.
_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n([^`]*(?:`(?!``)[^`]*)*)(?:```|$)", re.S)
_PY_LANGS = ("", "python", "py", "python3", "py3", "triton")
_CODE_START = re.compile(r"^(import\s|from\s+\w|@|def\s|class\s)", re.M)
_TOP_DEF = re.compile(r"^(?:def|class)\s+(\w+)", re.M)
# finish reasons that mean "stopped at the token limit" across servers (OpenAI, vLLM, others)
TRUNCATED_REASONS = frozenset({"length", "max_tokens", "max_output_tokens"})


def candidate_id(task_id: str, code: str) -> str:
    return stable_hash(task_id, code.strip())


def _defines(code: str, entry: str, assigned: bool = True) -> bool:
    """A def or class of `entry`, or (with `assigned`) a top-level `entry = <other callable>`; a
    usage line such as `mean = mean(x)` or a comparison `mean == ...` defines nothing."""
    e = re.escape(entry)
    if re.search(rf"^\s*(?:def|class)\s+{e}\s*[(:]", code, re.M):
        return True
    return assigned and re.search(rf"^{e}\s*=(?!=)(?!\s*{e}\s*\()", code, re.M) is not None


def _parses(code: str) -> bool:
    try:
        ast.parse(code)
    except (SyntaxError, ValueError):
        return False
    return True


def split_think(text: str) -> tuple[str, str, bool]:
    """(answer, thoughts, unclosed): the text outside <think> blocks, the text inside them, and
    whether a block was still open at the end. A leading `</think>` with no opening tag closes a
    block that the chat template opened in the prompt."""
    thoughts: list[str] = []
    low = text.lower()
    end, start = low.find("</think>"), low.find("<think>")
    if end != -1 and (start == -1 or start > end):
        thoughts.append(text[:end])
        text = text[end + len("</think>"):]
    parts, pos, unclosed = [], 0, False
    for m in _THINK.finditer(text):
        parts.append(text[pos:m.start()])
        thoughts.append(m.group(1))
        unclosed = unclosed or not m.group(2)
        pos = m.end()
    parts.append(text[pos:])
    return "".join(parts), "\n".join(thoughts), unclosed


def _with_helpers(earlier: list[str], code: str) -> str:
    """A wrapper-only block gets the earlier blocks that define the kernels it launches."""
    if "triton.jit" in code:
        return code
    own = set(_TOP_DEF.findall(code))
    used = [b for b in earlier if "triton.jit" in b and any(
        n not in own and re.search(rf"\b{n}\b", code) for n in _TOP_DEF.findall(b))]
    return "\n\n".join(b.strip() for b in used + [code])


def python_blocks(text: str) -> list[str]:
    """Every fenced Python block of the answer (outside <think> blocks), dedented, in order."""
    answer = split_think(text)[0]
    return [textwrap.dedent(c) for lang, c in _FENCE.findall(answer) if lang.lower() in _PY_LANGS]


def _from_blocks(body: str, entry: str) -> str | None:
    """The last block with a def of `entry`, else the last that assigns it. Blocks are dedented:
    a fence under a list item indents its code."""
    python = [textwrap.dedent(c) for lang, c in _FENCE.findall(body) if lang.lower() in _PY_LANGS]
    for assigned in (False, True):
        for i in range(len(python) - 1, -1, -1):
            if _defines(python[i], entry, assigned):
                return _with_helpers(python[:i], python[i]).strip() + "\n"
    return None


def _unfenced(body: str, entry: str) -> str | None:
    """Code with no fence: from the first import/decorator/def on, less any trailing prose."""
    body = _FENCE.sub("", body)
    start = _CODE_START.search(body)
    if start is None or not _defines(body[start.start():], entry):
        return None
    lines = body[start.start():].rstrip().splitlines()
    for cut in range(len(lines), 0, -1):  # drop trailing prose paragraphs until the rest parses
        if cut < len(lines) and not re.match(r"[A-Za-z]", lines[cut]):
            continue
        if _parses("\n".join(lines[:cut])) and _defines("\n".join(lines[:cut]), entry):
            return "\n".join(lines[:cut]).strip() + "\n"
    return "\n".join(lines).strip() + "\n"  # let the static check report the syntax error


def extract_code(text: str, entry: str) -> str | None:
    """The code of the last Python block defining `entry` (plus earlier blocks holding the kernels
    it launches); else unfenced code defining it; else, when a <think> block never closed, the same
    search inside it; else None."""
    answer, thoughts, unclosed = split_think(text)
    code = _from_blocks(answer, entry) or _unfenced(answer, entry)
    if code is None and unclosed:
        code = _from_blocks(thoughts, entry)
    return code


def extract(gen: Generation, task_id: str, entry: str) -> Candidate:
    code = extract_code(gen.text, entry)
    answer, _, unclosed = split_think(gen.text)
    cut = gen.finish_reason.lower() in TRUNCATED_REASONS
    # an open last fence is the cut only if the code came from it: a finished module followed by a
    # usage snippet that ran out of tokens is still a finished module
    open_tail = answer.count("```") % 2 == 1 and code != _from_blocks(
        answer[:answer.rfind("```")], entry)
    if cut and (code is None or unclosed or open_tail or not _parses(code)):
        return Candidate(candidate_id=stable_hash(task_id, ErrorKind.TRUNCATED, gen.text),
                         task_id=task_id, code=code or "", entry=entry,
                         error_kind=ErrorKind.TRUNCATED,
                         error_msg="the completion hit the token limit before the code was "
                                   "complete: raise model.max_tokens")
    if code is None:
        return Candidate(candidate_id=stable_hash(task_id, "nocode", gen.text), task_id=task_id,
                         code="", entry=entry, error_kind=ErrorKind.NO_CODE_BLOCK,
                         error_msg=f"no Python code block defining {entry}() in the completion")
    return Candidate(candidate_id=candidate_id(task_id, code), task_id=task_id, code=code, entry=entry)
