"""Tables and rows -> the report's PNG figures, each laid out from its text's extents.

matplotlib is imported inside `_figure` only, and through `matplotlib.figure.Figure` (Agg canvas,
no pyplot global state), so importing the report costs nothing and works with no display. A figure
with no data (a CPU sweep times nothing) is not drawn: its function returns None, and the report
says why in its place. Every drawn figure is grown until no text is clipped or overlaps
(report/layout.py), whatever the number of sweeps, and its text boxes are saved beside it.
"""
from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import Any, Iterable

import pandas as pd

from kbx_ray.report import layout
from kbx_ray.report.load import ReportError, final_rows, variant_labels
from kbx_ray.report.tables import per_group, tally, timed_correct

DPI = 110
logger = logging.getLogger(__name__)
FIGURES = ("pass_heatmap", "repair_rounds", "speedup_cdf", "gpu_spread", "sol_fraction")


def _figure(width: float = 7.0, height: float = 4.5) -> Any:
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise ReportError("matplotlib is not installed; the report draws its figures with it: "
                          "pip install matplotlib (a kbx_ray dependency)") from None

    return Figure(figsize=(width, height), layout="constrained")


def _save(fig: Any, path: Path) -> Path:
    """Fit the figure to its text, then write the PNG and its text boxes (layout.sidecar)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.set_dpi(DPI)
    fitted = layout.fit(fig)
    for problem in layout.problems(fitted):
        logger.warning("figure %s: %s", path.name, problem)
    fig.savefig(path, dpi=DPI, format="png")
    layout.save(fitted, layout.sidecar(path))
    return path


def _wrap(label: str) -> str:
    """A variant label ("sweep / model / method") one part a line, so it needs no rotation."""
    return label.replace(" / ", "\n")


def _with_variant(df: pd.DataFrame) -> pd.DataFrame:
    """Rows from `load_evaluations` already carry `variant`; tables (the ablation) get it here."""
    return df if "variant" in df.columns else df.assign(variant=variant_labels(df))


def palette(variants: Iterable[str]) -> dict[str, str]:
    """One colour per variant, the same in every figure (matplotlib's C0..C9 cycle)."""
    return {v: f"C{i % 10}" for i, v in enumerate(sorted(set(variants)))}


def _times(ax: Any) -> None:
    """Log-scale speedup axis labelled 0.5x, 1x, 2x instead of 5 x 10^-1."""
    from matplotlib.ticker import FuncFormatter, LogLocator

    ax.set_xscale("log")
    ax.xaxis.set_major_locator(LogLocator(base=2))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}x"))
    ax.xaxis.set_minor_formatter(FuncFormatter(lambda v, _: ""))


def pass_heatmap(df: pd.DataFrame, path: Path) -> Path | None:
    """Exec rate of final kernels, category x method (x model, x sweep where several)."""
    rows = _with_variant(final_rows(df))
    table = per_group(rows, ("category", "variant"), tally, ("cells", "exec_rate"))
    if table.empty:
        return None
    rate = table.pivot(index="category", columns="variant", values="exec_rate")
    cells = table.pivot(index="category", columns="variant", values="cells")
    if rate.shape[1] > rate.shape[0]:  # the longer side down: many sweeps grow the page, not wider
        rate, cells = rate.T, cells.T
    fig = _figure(2.5 + 1.4 * rate.shape[1], 1.6 + 0.5 * rate.shape[0])
    ax = fig.subplots()
    image = ax.imshow(rate.to_numpy(dtype=float), cmap="viridis", vmin=0, vmax=1, aspect="auto")
    for i, j in zip(*rate.notna().to_numpy().nonzero()):  # empty combinations stay blank
        v = rate.iat[i, j]
        ax.text(j, i, f"{v:.0%}\nn={int(cells.iat[i, j])}", ha="center", va="center",
                fontsize=8, color="white" if v < 0.6 else "black")
    ax.set_xticks(range(rate.shape[1]), [_wrap(str(c)) for c in rate.columns], fontsize=8)
    ax.set_yticks(range(rate.shape[0]), rate.index, fontsize=8)
    ax.set_title("Exec (pass) rate by category and method")
    fig.colorbar(image, ax=ax, label="exec rate", format=lambda v, _: f"{v:.0%}")
    return _save(fig, path)


def repair_rounds(ablation: pd.DataFrame, path: Path, colors: dict[str, str]) -> Path | None:
    """Call rate, exec rate and (when timed) geomean speedup after k repair rounds, per variant."""
    data = _with_variant(ablation)
    if data.empty:
        return None
    panels = [("call_rate", "compile/call rate"), ("exec_rate", "exec rate")]
    if data["geomean_speedup"].notna().any():
        panels.append(("geomean_speedup", "geomean speedup (correct)"))
    fig = _figure(4.0 * len(panels), 4.0)
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    for ax, (col, title) in zip(axes, panels):
        ax.set_title(title)
        for variant, g in data.groupby("variant", sort=True):
            ax.plot(g["k"], g[col], marker="o", label=variant, color=colors.get(variant))
        ax.set_xlabel("repair rounds k")
        ax.set_xticks(sorted(data["k"].unique()))
        if col != "geomean_speedup":
            ax.set_ylim(0, 1.05)
        else:
            ax.axhline(1.0, color="0.5", lw=0.8, ls="--")
    # one legend for all panels, below them: it never covers a line or another panel's labels
    fig.legend(*axes[0].get_legend_handles_labels(), loc="outside lower center", fontsize=8,
               ncols=min(3, data["variant"].nunique()))
    fig.suptitle("After k repair rounds: each cell's answer from its first k rounds (primary pool)")
    return _save(fig, path)


def speedup_cdf(df: pd.DataFrame, path: Path, colors: dict[str, str]) -> Path | None:
    """CDF of the speedup of correct kernels; the legend gives each variant's share below 1."""
    rows = _with_variant(timed_correct(df))
    if rows.empty:
        return None
    fig = _figure()
    ax = fig.subplots()
    for variant, g in rows.groupby("variant", sort=True):
        v = g["speedup"].to_numpy(dtype=float)
        ax.ecdf(v, color=colors.get(variant),
                label=f"{variant}: n={len(v)}, {(v < 1).mean():.0%} slower than eager")
    ax.axvline(1.0, color="black", lw=1, ls="--", label="eager (1x)")
    _times(ax)
    ax.set_xlabel("speedup over eager (log scale)")
    ax.set_ylabel("share of correct kernels")
    ax.set_ylim(0, 1.02)
    share = (rows["speedup"] < 1).mean()
    ax.set_title(f"Speedup CDF: {share:.1%} of {len(rows)} correct kernels are slower than eager")
    fig.legend(loc="outside lower center", fontsize=8)
    return _save(fig, path)


def gpu_spread(spread: pd.DataFrame, path: Path, top: int = 30) -> Path | None:
    """Per task, max/min speedup of one kernel across GPU pools (the widest `top` tasks)."""
    shown = spread.head(top)
    if shown.empty:
        return None
    fig = _figure(8.0, max(3.0, 1.2 + 0.28 * len(shown)))
    ax = fig.subplots()
    ax.set_title("Speedup spread of the same kernel across GPUs (max / min)")
    labels = shown["task_id"] if shown["sweep_id"].nunique() == 1 else (
        shown["sweep_id"] + ": " + shown["task_id"])
    ax.barh(range(len(shown)), shown["spread"] - 1, left=1, color="tab:orange")  # 1 = no spread
    ax.set_yticks(range(len(shown)), labels, fontsize=8)
    ax.invert_yaxis()
    ax.axvline(1.0, color="black", lw=0.8)
    ax.set_xlabel("max speedup / min speedup across pools")
    if shown["spread"].max() > 20:
        _times(ax)
    return _save(fig, path)


def sol_fraction(df: pd.DataFrame, path: Path, colors: dict[str, str]) -> Path | None:
    """Histogram of the SOL (speed-of-light) fraction of correct timed kernels, per variant."""
    rows = _with_variant(final_rows(df))
    rows = rows[rows["exec_ok"] & rows["sol_fraction"].map(math.isfinite).astype(bool)]
    if rows.empty:
        return None
    fig = _figure()
    ax = fig.subplots()
    ax.set_title("SOL fraction of correct kernels (share of the GPU's peak)")
    bins = [i / 20 for i in range(21)]
    for variant, g in rows.groupby("variant", sort=True):
        ax.hist(g["sol_fraction"].clip(0, 1), bins=bins, alpha=0.55, color=colors.get(variant),
                label=f"{variant} (n={len(g)}, mean {g['sol_fraction'].mean():.0%})")
    ax.set_xlabel("SOL fraction: max(GB/s / peak, TFLOP/s / peak)")
    ax.set_ylabel("kernels")
    fig.legend(loc="outside lower center", fontsize=8)
    return _save(fig, path)


def study_rounds(curve: pd.DataFrame, path: Path, columns: tuple[str, ...] = (
        "call", "exec"), title: str = "The study re-judged: after k rounds") -> Path:
    """Per k, `<column>_ours` (solid) beside `<column>_theirs` (dashed), one panel per column."""
    fig = _figure(4.5 * len(columns), 4.0)
    axes = fig.subplots(1, len(columns), squeeze=False)[0]
    names = {"call": "call rate", "exec": "exec rate", "speedup": "geomean speedup (correct)"}
    for ax, col in zip(axes, columns):
        ax.set_title(names.get(col, col))
        for i, (sweep, g) in enumerate(curve.groupby("sweep_id", sort=True)):
            x = g["k"] if "k" in g else g["round"]
            label = "" if curve["sweep_id"].nunique() == 1 else f"{sweep}: "
            ax.plot(x, g[f"{col}_ours"], marker="o", color=f"C{i}", label=f"{label}ours")
            ax.plot(x, g[f"{col}_theirs"], marker="s", ls="--", color=f"C{i}",
                    label=f"{label}the study's")
            ax.set_xticks(sorted(x.unique()))
        ax.set_xlabel("k" if "k" in curve else "round")
        if col == "speedup":
            ax.axhline(1.0, color="0.5", lw=0.8, ls=":")
        else:
            ax.set_ylim(0, 1.05)
        ax.legend(fontsize=8)
    fig.suptitle(title)
    return _save(fig, path)


__all__ = ["FIGURES", "gpu_spread", "palette", "pass_heatmap", "repair_rounds",
           "sol_fraction", "speedup_cdf", "study_rounds"]
