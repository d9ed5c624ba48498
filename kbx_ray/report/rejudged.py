"""Evaluations of a study's corpus kernels -> our verdicts beside the study's, round by round.
More: kbx_ray/report/README.md, `rejudged.py`.
"""
from __future__ import annotations

import fnmatch
import math
import re
from pathlib import Path

import pandas as pd
from omegaconf import OmegaConf

from kbx_ray.records.metrics import geomean
from kbx_ray.report.load import SweepSource
from kbx_ray.types import ErrorKind

VERDICTS = ("fails to run", "runs, wrong", "correct")
# ours only: failed by a policy of ours (it agrees with a failure)
DISQUALIFIED = ErrorKind.DISQUALIFIED
ROUND_COLUMNS = ("sweep_id", "round", "kernels", "call_ours", "call_theirs", "exec_ours",
                 "exec_theirs", "speedup_ours", "speedup_theirs", "agree")
CURVE_COLUMNS = ("sweep_id", "k", "cells", "call_ours", "call_theirs", "exec_ours", "exec_theirs",
                 "speedup_ours", "speedup_theirs")
DISAGREEMENT_COLUMNS = ("task_id", "round", "ours", "theirs", "our_reason", "their_verdict",
                        "their_error")
SKIPPED_COLUMNS = ("task_id", "rounds", "sources", "reason")
PERCENT = frozenset({"call_ours", "call_theirs", "exec_ours", "exec_theirs", "agree"})
TIMES = frozenset({"speedup_ours", "speedup_theirs"})
_RAISED = re.compile(r"^[\w.]*(Error|Exception|Exit|Interrupt)\b")


def has_corpus(df: pd.DataFrame) -> bool:
    return "peer_round" in df and bool(df["peer_round"].notna().any())


def judged(df: pd.DataFrame) -> pd.DataFrame:
    """Kernels judged on both sides, each with `ours` and `theirs` verdict classes."""
    rows = df[df["peer_round"].notna() & df["peer_skip"].isna()].copy()
    rows["ours"] = [DISQUALIFIED if k == DISQUALIFIED else _verdict(c, e)
                    for c, e, k in zip(rows["call_ok"], rows["exec_ok"], rows["error_kind"])]
    rows["theirs"] = [_verdict(c, e) for c, e in zip(rows["peer_call_ok"], rows["peer_exec_ok"])]
    rows["agree"] = rows["ours"].replace(DISQUALIFIED, VERDICTS[0]) == rows["theirs"]
    return rows


def per_round(df: pd.DataFrame) -> pd.DataFrame:
    out = []
    for (sweep, rnd), g in judged(df).groupby(["sweep_id", "round"], sort=True):
        out.append({"sweep_id": sweep, "round": int(rnd), "kernels": len(g),
                    "call_ours": _rate(g["call_ok"]), "call_theirs": _rate(g["peer_call_ok"]),
                    "exec_ours": _rate(g["exec_ok"]), "exec_theirs": _rate(g["peer_exec_ok"]),
                    "speedup_ours": _geomean(g, "exec_ok", "speedup"),
                    "speedup_theirs": _geomean(g, "peer_exec_ok", "peer_speedup"),
                    "agree": float(g["agree"].mean())})
    return pd.DataFrame(out, columns=list(ROUND_COLUMNS))


def agreement(df: pd.DataFrame) -> pd.DataFrame:
    """Counts of (our verdict, theirs): one row per our verdict, one column per theirs."""
    rows = judged(df)
    out = []
    for sweep, g in rows.groupby("sweep_id", sort=True):
        for ours in (DISQUALIFIED, *VERDICTS):
            mine = g[g["ours"] == ours]
            out.append({"sweep_id": sweep, "ours \\ theirs": ours,
                        **{t: int((mine["theirs"] == t).sum()) for t in VERDICTS},
                        "total": len(mine)})
    return pd.DataFrame(out, columns=["sweep_id", "ours \\ theirs", *VERDICTS, "total"])


def disagreements(df: pd.DataFrame) -> pd.DataFrame:
    rows = judged(df)
    rows = rows[~rows["agree"]].sort_values(["task_id", "round"])
    out = [{"task_id": r["task_id"], "round": int(r["round"]), "ours": r["ours"],
            "theirs": r["theirs"], "our_reason": _our_reason(r), "their_verdict": _theirs(r),
            "their_error": _text(r.get("peer_error"))} for r in rows.to_dict("records")]
    return pd.DataFrame(out, columns=list(DISAGREEMENT_COLUMNS))


def curve(df: pd.DataFrame) -> pd.DataFrame:
    """The state after k rounds by the ablation's rule, with our verdicts and with theirs, over the
    cells holding at least one kernel judged on both sides."""
    from kbx_ray.records.ablation import rounds_state

    cells = df[df["cell_id"].isin(judged(df)["cell_id"])].copy()
    absent = cells["peer_round"].isna() | cells["peer_skip"].notna()
    ours = cells.assign(call_ok=cells["call_ok"] & ~absent, exec_ok=cells["exec_ok"] & ~absent)
    theirs = cells.assign(call_ok=cells["peer_call_ok"].fillna(False).astype(bool) & ~absent,
                          exec_ok=cells["peer_exec_ok"].fillna(False).astype(bool) & ~absent,
                          speedup=pd.to_numeric(cells["peer_speedup"], errors="coerce"), stage="")
    out = []
    for sweep in sorted(cells["sweep_id"].unique()):
        a = rounds_state(ours[ours["sweep_id"] == sweep])
        b = rounds_state(theirs[theirs["sweep_id"] == sweep])
        for k in sorted(set(a["k"]) & set(b["k"])):
            x, y = a[a["k"] == k], b[b["k"] == k]
            out.append({"sweep_id": sweep, "k": int(k), "cells": len(x),
                        "call_ours": _rate(x["call_ok"]), "call_theirs": _rate(y["call_ok"]),
                        "exec_ours": _rate(x["exec_ok"]), "exec_theirs": _rate(y["exec_ok"]),
                        "speedup_ours": _geomean(x, "exec_ok", "speedup"),
                        "speedup_theirs": _geomean(y, "exec_ok", "speedup")})
    return pd.DataFrame(out, columns=list(CURVE_COLUMNS))


def skipped(df: pd.DataFrame, sources: list[SweepSource]) -> tuple[pd.DataFrame, str]:
    """(each corpus kernel not judged here, a row per task and reason; the corpus's accounting)."""
    rows = df[df["peer_skip"].notna()]
    out = [(r["task_id"], int(r["peer_round"]), r["peer_source"], r["peer_skip"])
           for r in rows.to_dict("records")]
    lines = []
    for source in sources:
        corpus, include = _corpus_of(source.path)
        if isinstance(corpus, str):
            lines.append(corpus)
            continue
        lines.append(corpus.summary() + ".")
        ran = set(df.loc[df["sweep_id"] == source.sweep_id, "task_id"])
        for k in corpus.kernels.values():
            if k.task_id in ran:
                continue
            reason = k.reason if k.status == "skipped" else (
                "suite.include left its task out" if include and not _selected(k.task_id, include)
                else "no row: the suite did not load its task (the sweep's log says why, e.g. "
                "`needs cuda` on a CPU)")
            out.append((k.task_id, k.round, k.source, reason))
    groups: dict[tuple[str, str], list[tuple[int, str]]] = {}
    for task, rnd, where, reason in out:
        groups.setdefault((task, reason), []).append((rnd, where))
    table = [{"task_id": t, "rounds": ", ".join(str(r) for r, _ in sorted(set(v))),
              "sources": "; ".join(dict.fromkeys(w for _, w in sorted(v))), "reason": reason}
             for (t, reason), v in sorted(groups.items())]
    return pd.DataFrame(table, columns=list(SKIPPED_COLUMNS)), " ".join(lines)


def _corpus_of(sweep_dir: Path) -> tuple[object, list[str]]:
    """(the corpus a sweep replayed, from its config.yaml, or a sentence saying why there is none;
    the sweep's suite.include)."""
    from kbx_ray.llm import replay_corpus

    try:
        config = OmegaConf.to_container(OmegaConf.load(Path(sweep_dir) / "config.yaml"))
    except (OSError, ValueError) as e:
        return f"{sweep_dir}: no readable config.yaml ({type(e).__name__}), so no corpus " \
               "accounting.", []
    include = [str(i) for i in ((config.get("suite") or {}).get("include") or [])]
    models = (config.get("variants") or {}).get("models") or [config.get("model") or {}]
    paths = [str(((m or {}).get("options") or {}).get("path") or "") for m in models]
    for p in filter(None, paths):
        path = Path(p)
        if path.is_dir() and replay_corpus.corpus_files(path) or path.is_file():
            return replay_corpus.read_corpus(path), include
    return (f"The corpus this sweep replayed ({', '.join(filter(None, paths)) or 'unnamed'}) is "
            "not readable here, so only the kernels that have rows are accounted for."), include


def _selected(task_id: str, include: list[str]) -> bool:
    pats = [p.strip().rstrip("/") for p in include]
    return any(task_id == p or task_id.split("/")[0] == p or fnmatch.fnmatch(task_id, p)
               for p in pats)


# ---- helpers -----------------------------------------------------------------------------------
def _verdict(call_ok: object, exec_ok: object) -> str:
    return VERDICTS[2] if _true(exec_ok) else VERDICTS[1] if _true(call_ok) else VERDICTS[0]


def _true(v: object) -> bool:
    return v is not None and v is not pd.NA and not (isinstance(v, float) and math.isnan(v)) \
        and bool(v)


def _rate(s: pd.Series) -> float:
    return float(s.map(_true).mean()) if len(s) else math.nan


def _geomean(g: pd.DataFrame, ok: str, speedup: str) -> float:
    values = [float(v) for o, v in zip(g[ok], pd.to_numeric(g[speedup], errors="coerce"))
              if _true(o) and v is not None and math.isfinite(v) and v > 0]
    return geomean(values) if values else math.nan


def _text(v: object) -> str:
    return "" if v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v)) else str(v)


def _our_reason(r: dict) -> str:
    if _true(r.get("exec_ok")):
        return "correct on every case and seed"
    msg = [ln.strip() for ln in _text(r.get("error_msg")).splitlines() if ln.strip()] or [""]
    raised = [ln for ln in msg if _RAISED.match(ln)]
    first = raised[-1] if raised else msg[0]
    reason = f"{_text(r.get('error_kind'))}: {first[:200]}"
    stricter = _text(r.get("stricter_reason"))
    return f"{reason} (stricter on purpose: {stricter})" if stricter else reason


def _theirs(r: dict) -> str:
    speedup = pd.to_numeric(r.get("peer_speedup"), errors="coerce")
    parts = [f"call_ok={_true(r.get('peer_call_ok'))}", f"exe_ok={_true(r.get('peer_exec_ok'))}",
             f"perf_ok={_true(r.get('peer_perf_ok'))}"]
    return ", ".join(parts + ([f"speedup={speedup:.2f}"] if speedup == speedup else []))
