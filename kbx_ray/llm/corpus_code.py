"""A published corpus kernel's text -> the code to judge, or the reason it cannot be judged.
More: kbx_ray/llm/README.md, `corpus_code.py`.
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

SEPARATOR = re.compile(r"^#{40,}[ \t]*$", re.M)   # as kbx_tree.SEPARATOR, the tree's own files
_RUN = re.compile(r"#{40,}")                     # the same line, collapsed into its neighbours
_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")

Line = tuple[str, int]  # (kernel key, 1-based line number)


def cut_harness(code: str) -> tuple[str, int]:
    """(the code above the study's harness, the separator's line number; 0 if there is none)."""
    m = SEPARATOR.search(code)
    if m is None:
        return code, 0
    return code[:m.start()].rstrip() + "\n", code.count("\n", 0, m.start()) + 1


def parses(code: str) -> bool:
    try:
        ast.parse(code)
    except (SyntaxError, ValueError):
        return False
    return True


def diff_lines(diff: str, n_before: int,
               ) -> tuple[dict[int, str], dict[int, str], list[tuple[int, int]]]:
    """(before's lines the diff shows, after's lines it shows, (before, after) line pairs that it
    says are equal: context lines and every line outside its hunks)."""
    before: dict[int, str] = {}
    after: dict[int, str] = {}
    equal: list[tuple[int, int]] = []
    o = n = 1
    started = False
    for line in diff.splitlines():
        m = _HUNK.match(line)
        if m:
            start_o = int(m.group(1)) + (m.group(2) == "0")
            start_n = int(m.group(3)) + (m.group(4) == "0")
            while o < start_o:
                equal.append((o, n))
                o, n = o + 1, n + 1
            started = True
            continue
        if not started or line.startswith(("--- ", "+++ ", "\\")):
            continue
        tag, text = line[:1], line[1:]
        if tag in (" ", ""):
            before[o], after[n] = text, text
            equal.append((o, n))
            o, n = o + 1, n + 1
        elif tag == "-":
            before[o], o = text, o + 1
        elif tag == "+":
            after[n], n = text, n + 1
    while o <= n_before:
        equal.append((o, n))
        o, n = o + 1, n + 1
    return before, after, equal


@dataclass
class LineBook:
    """Every line of every kernel of the corpus that some record holds verbatim, with the equalities
    the diffs state, joined (union-find) so that a line known in one kernel is known in all."""

    parent: dict[Line, Line] = field(default_factory=dict)
    text: dict[Line, str] = field(default_factory=dict)
    sizes: dict[str, int] = field(default_factory=dict)

    def find(self, x: Line) -> Line:
        root = x
        while self.parent.get(root, root) != root:
            root = self.parent[root]
        while x != root:
            self.parent[x], x = root, self.parent.get(x, x)
        return root

    def join(self, a: Line, b: Line) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[ra] = rb
            if ra in self.text:
                self.text.setdefault(rb, self.text[ra])

    def know(self, line: Line, text: str) -> None:
        self.text.setdefault(self.find(line), text)

    def add_record(self, key_before: str, key_after: str, diff: str, n_before: int,
                   n_after: int, codes: tuple[str, str]) -> None:
        self.sizes.setdefault(key_before, n_before)
        self.sizes.setdefault(key_after, n_after)
        before, after, equal = diff_lines(diff or "", n_before)
        for o, n in equal:
            self.join((key_before, o), (key_after, n))
        for key, lines in ((key_before, before), (key_after, after)):
            for i, t in lines.items():
                self.know((key, i), t)
        for key, code in zip((key_before, key_after), codes):
            if parses(code):
                for i, t in enumerate(code.split("\n"), 1):
                    self.know((key, i), t)

    def lines(self, key: str) -> list[str | None]:
        return [self.text.get(self.find((key, i))) for i in range(1, self.sizes.get(key, 0) + 1)]


def _norm(s: str) -> str:
    return re.sub(r"\s+", "", s)


def _fill_top_level(lines: list[str | None], published: str) -> list[str | None]:
    """Gaps whose published text kept its line breaks and that sit between top-level lines (the
    line before neither opens a block nor continues): filled from the published text."""
    out = list(lines)
    flat = _norm(published)
    i = 0
    while i < len(out):
        if out[i] is not None:
            i += 1
            continue
        j = i
        while j < len(out) and out[j] is None:
            j += 1
        prev = next((x for x in reversed(out[:i]) if x and x.strip()), "")
        nxt = next((x for x in out[j:] if x and x.strip()), "")
        head = _norm("".join(x or "" for x in out[:i]))
        tail = _norm("".join(x or "" for x in out[j:]))
        opens = prev.rstrip().endswith((":", ",", "(", "[", "{", "\\"))
        top = (not prev or (prev == prev.lstrip() and not opens)) and nxt == nxt.lstrip()
        gap = _gap_text(published, flat, head, tail, j - i)
        if top and gap is not None and all(g == g.lstrip() for g in gap):
            out[i:j] = gap
        i = j
    return out


def _gap_text(published: str, flat: str, head: str, tail: str, n: int) -> list[str] | None:
    """The published text between the known head and tail, if it is exactly n lines."""
    if not (flat.startswith(head) and flat.endswith(tail)) or len(head) + len(tail) > len(flat):
        return None
    start, seen = 0, 0
    while seen < len(head):  # walk the published text to where the head's characters end
        if not published[start].isspace():
            seen += 1
        start += 1
    end, seen = len(published), 0
    while seen < len(tail):
        end -= 1
        if not published[end].isspace():
            seen += 1
    gap = published[start:end].strip("\n").split("\n")
    return gap if len(gap) == n and all(g.strip() for g in gap) else None


def recover(key: str, published: str, book: LineBook) -> tuple[str | None, str]:
    """(the kernel's code above the harness, "") or (None, why it cannot be rebuilt)."""
    lines = book.lines(key)
    if not lines or all(x is None for x in lines):
        return None, ("newlines collapsed as published, and no diff of the corpus holds its lines: "
                      "its indentation cannot be recovered")
    head = published[:_RUN.search(published).start()] if _RUN.search(published) else published
    sep = next((i for i, x in enumerate(lines) if x is not None and SEPARATOR.match(x)), None)
    if sep is None:
        return None, ("newlines collapsed as published, and the harness separator is in no diff: "
                      "where the kernel ends cannot be recovered")
    lines = _fill_top_level(lines[:sep], head)
    missing = [i + 1 for i, x in enumerate(lines) if x is None]
    if missing:
        return None, (f"newlines collapsed as published; {len(missing)} of its {sep} lines "
                      f"({_spans(missing)}) are in no diff of the corpus, so their indentation "
                      "cannot be recovered")
    code = "\n".join(x or "" for x in lines).rstrip() + "\n"
    if _norm(code) != _norm(head):
        return None, ("newlines collapsed as published, and the lines rebuilt from the diffs "
                      "differ from the published text")
    if not parses(code):
        return None, ("newlines collapsed as published, and the lines rebuilt from the diffs do "
                      "not parse")
    return code, ""


def _spans(numbers: list[int]) -> str:
    """[1, 2, 3, 7] -> "lines 1-3, 7"."""
    spans: list[list[int]] = []
    for n in numbers:
        if spans and n == spans[-1][1] + 1:
            spans[-1][1] = n
        else:
            spans.append([n, n])
    parts = [f"{a}-{b}" if a != b else str(a) for a, b in spans]
    return "lines " + ", ".join(parts[:6]) + (", ..." if len(parts) > 6 else "")
