"""Parquet evaluations of one or more sweeps -> the study's tables and figures, as Markdown + HTML.

    from kbx_ray.report import build_report
    paths = build_report([Path("results/<sweep_id>")], Path("results/<sweep_id>/report"))

More: kbx_ray/report/README.md, `__init__.py`.
"""
from __future__ import annotations

from kbx_ray.report.load import (
    ReportError, SweepSource, final_rows, find_sweep_dirs, load_evaluations, state_after_k,
)
from kbx_ray.report.render import ReportPaths, build_report
from kbx_ray.report.tables import (
    Tables, ablation_table, case_sums, compute_tables, gpu_spread_table, rate_table,
    speedup_table,
)

__all__ = [
    "ReportError", "ReportPaths", "SweepSource", "Tables", "ablation_table", "build_report",
    "case_sums", "compute_tables", "final_rows", "find_sweep_dirs", "gpu_spread_table",
    "load_evaluations", "rate_table", "speedup_table", "state_after_k",
]
