"""A drawn matplotlib figure -> the boxes of its text, and what is wrong with them.

A figure sized for one sweep clips its title and overlaps its labels when it holds two ("100%100%").
This checks the text as drawn, not by eye: every text the renderer actually drew (a tick label out
of view is not drawn and not counted), measured by `get_window_extent`, must lie inside the figure
and overlap no other. `fit` grows a figure until that holds. The boxes are saved beside each PNG
(`<name>.layout.json`) so that tests and scripts/bench/check_report_html.py check a built report.
"""
from __future__ import annotations

import json
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Iterator

SLACK_PX = 1.0  # anti-aliasing: boxes may touch or overshoot by this much


@dataclass(frozen=True)
class TextBox:
    text: str
    x0: float  # display pixels, origin at the figure's bottom left
    y0: float
    x1: float
    y1: float


@dataclass(frozen=True)
class Layout:
    width: float   # the figure in pixels
    height: float
    texts: list[TextBox]


@contextmanager
def _recording(drawn: list[Any]) -> Iterator[None]:
    """Record every Text artist drawn while inside (tick labels out of view are never drawn)."""
    from matplotlib.text import Text

    original = Text.draw

    def draw(self: Any, renderer: Any) -> None:
        if self.get_visible() and self.get_text().strip():
            drawn.append(self)
        original(self, renderer)

    Text.draw = draw  # type: ignore[method-assign]
    try:
        yield
    finally:
        Text.draw = original  # type: ignore[method-assign]


def measure(fig: Any) -> Layout:
    """Draw the figure (Agg) and return the box of every text it drew."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = fig.canvas if isinstance(fig.canvas, FigureCanvasAgg) else FigureCanvasAgg(fig)
    drawn: list[Any] = []
    with _recording(drawn):
        canvas.draw()
    renderer = canvas.get_renderer()
    boxes = []
    for t in dict.fromkeys(drawn):  # once each, in drawing order
        b = t.get_window_extent(renderer)
        if b.width > 0 and b.height > 0:
            boxes.append(TextBox(t.get_text(), b.x0, b.y0, b.x1, b.y1))
    return Layout(float(fig.bbox.width), float(fig.bbox.height), boxes)


def problems(layout: Layout) -> list[str]:
    """One line per text clipped by the figure's edge and per pair of texts that overlap."""
    out = []
    for t in layout.texts:
        if (t.x0 < -SLACK_PX or t.y0 < -SLACK_PX or t.x1 > layout.width + SLACK_PX
                or t.y1 > layout.height + SLACK_PX):
            out.append(f"{t.text!r} is clipped by the figure's edge")
    for i, a in enumerate(layout.texts):
        for b in layout.texts[i + 1:]:
            if (min(a.x1, b.x1) - max(a.x0, b.x0) > SLACK_PX
                    and min(a.y1, b.y1) - max(a.y0, b.y0) > SLACK_PX):
                out.append(f"{a.text!r} overlaps {b.text!r}")
    return out


def fit(fig: Any, tries: int = 8, grow: float = 1.2) -> Layout:
    """Grow the figure (constrained layout redistributes) until no text is clipped or overlaps.

    Each try widens it, and heightens it too when a clash is vertical (one text above another).
    Returns the last layout, whose `problems` are empty unless the tries ran out.
    """
    layout = measure(fig)
    for _ in range(tries):
        issues = problems(layout)
        if not issues:
            break
        w, h = fig.get_size_inches()
        taller = any("overlaps" in p for p in issues) or any(
            t.y0 < 0 or t.y1 > layout.height for t in layout.texts)
        fig.set_size_inches(w * grow, h * (grow if taller else 1.0))
        layout = measure(fig)
    return layout


def save(layout: Layout, path: Path) -> Path:
    path.write_text(json.dumps(asdict(layout)), encoding="utf-8")
    return path


def load(path: Path) -> Layout:
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    return Layout(data["width"], data["height"], [TextBox(**t) for t in data["texts"]])


def sidecar(png: Path) -> Path:
    """Where a figure's layout is kept: figures/<name>.layout.json beside figures/<name>.png."""
    return png.with_name(png.stem + ".layout.json")


__all__ = ["Layout", "TextBox", "fit", "load", "measure", "problems", "save", "sidecar"]
