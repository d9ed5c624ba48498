"""The results browser -> HTML: a sortable, filterable table of cells, each linked to its rounds.
More: kbx_ray/report/README.md, `browse.py`.
"""
from __future__ import annotations

import html
import math

import pandas as pd

from kbx_ray.report import cells

CSS = """.scroll{overflow-x:auto;max-width:100%}
table.sortable th{cursor:pointer;user-select:none}
table.sortable th[data-dir=asc]::after{content:" ▲"}table.sortable th[data-dir=desc]::after{content:" ▼"}
td.msg{text-align:left;max-width:34em;overflow-wrap:anywhere}
.v-correct{color:#116611;font-weight:600}.v-bad{color:#a40000;font-weight:600}
.cell{display:none}.cell:target{display:block;position:fixed;top:3vh;left:4vw;right:4vw;
max-height:92vh;overflow:auto;background:#fff;border:1px solid #888;padding:0 1.2em 1em;
box-shadow:0 4px 24px rgba(0,0,0,.35);text-align:left}
pre{background:#f6f6f6;padding:.6em;overflow-x:auto;font-size:12px}
#cell-filter{width:28em;padding:3px 6px;margin:.3em 0}"""

SORT_JS = """<script>
document.querySelectorAll("table.sortable").forEach((t) => {
  t.querySelectorAll("thead th").forEach((th, i) => th.addEventListener("click", () => {
    const dir = th.dataset.dir === "asc" ? "desc" : "asc";
    t.querySelectorAll("thead th").forEach((h) => delete h.dataset.dir);
    th.dataset.dir = dir;
    const key = (r) => {
      const c = r.cells[i];
      if (c.dataset.v === undefined) return c.textContent;
      const n = parseFloat(c.dataset.v);
      return isNaN(n) ? -Infinity : n;  // not measured sorts below every number
    };
    const rows = Array.from(t.tBodies[0].rows);
    rows.sort((a, b) => {
      const x = key(a), y = key(b);
      const c = typeof x === "number" ? x - y : String(x).localeCompare(String(y));
      return dir === "asc" ? c : -c;
    });
    rows.forEach((r) => t.tBodies[0].appendChild(r));
  }));
});
const filter = document.getElementById("cell-filter");
if (filter) filter.addEventListener("input", () => {
  const terms = filter.value.toLowerCase().split(/\\s+/).filter(Boolean);
  document.querySelectorAll("#cells tbody tr").forEach((r) => {
    const text = r.textContent.toLowerCase();
    r.hidden = !terms.every((w) => text.includes(w));
  });
});
</script>"""

HEADERS = ("sweep", "task", "category", "method", "model", "sample", "pool", "verdict",
           "message", "speedup", "SOL", "rounds")


def _verdict(v: str) -> str:
    return f'<span class="{"v-correct" if v == "correct" else "v-bad"}">{html.escape(v)}</span>'


def _num(v: object, text: str) -> str:
    ok = isinstance(v, (int, float)) and math.isfinite(v)
    return f'<td data-v="{v if ok else ""}">{text if ok else "–"}</td>'


def _row(r: dict) -> str:
    e = html.escape
    speed = r["speedup"]
    sol = r["sol_fraction"]
    cols = [e(str(r[c])) for c in ("sweep_id", "task_id", "category", "method", "model")]
    return ("<tr>" + "".join(f"<td>{c}</td>" for c in cols)
            + f'<td data-v="{e(str(r["sample"]))}">{e(str(r["sample"]))}</td>'
            + f"<td>{e(str(r['hardware']))}</td><td>{_verdict(r['verdict'])}</td>"
            + f'<td class="msg">{e(r["message"])}</td>'
            + _num(speed, f"{speed:.2f}×" if isinstance(speed, float) else "")
            + _num(sol, f"{sol:.0%}" if isinstance(sol, float) else "")
            + f'<td data-v="{r["rounds"]}"><a href="#{r["anchor"]}">{r["rounds"]} '
            + f'round{"s" if r["rounds"] != 1 else ""}</a></td></tr>')


def _detail(table: pd.DataFrame, df: pd.DataFrame, texts: cells.KernelTexts) -> list[str]:
    """One hidden panel per cell (shown when linked): its rounds, each with its kernel text."""
    e = html.escape
    out = []
    for (anchor, sweep, cell), g in table.groupby(["anchor", "sweep_id", "cell_id"], sort=False):
        first = g.iloc[0]
        out.append(f'<div class="cell" id="{anchor}"><h3>{e(first["task_id"])}: '
                   f'{e(first["method"])}, {e(first["model"])}, sample {first["sample"]} '
                   f'({e(sweep)})</h3><p><a href="#cells">close</a></p>')
        for r in cells.rounds(df, sweep, cell, texts):
            speed = "" if r["speedup"] is None else f', {r["speedup"]:.2f}×'
            tags = ", final" if r["final"] else ""
            tags += f", stopped: {e(r['stop_reason'])}" if r["stop_reason"] else ""
            out.append(f"<h4>round {r['round']} on {e(r['hardware'])}: {_verdict(r['verdict'])}"
                       f"{speed}{tags}</h4><p>{e(r['message'])}</p>")
            kernel = r["kernel"]
            out.append("<p><i>no kernel text recorded</i></p>" if kernel is None else
                       f'<details{" open" if r["final"] else ""}><summary>kernel text</summary>'
                       f"<pre>{e(kernel)}</pre></details>")
        out.append("</div>")
    return out


def browser_html(df: pd.DataFrame, texts: cells.KernelTexts) -> str:
    """The cells table (with its filter box) and every cell's rounds, as an HTML fragment."""
    table = cells.cell_table(df)
    if table.empty:
        return "<p><i>no cells</i></p>"
    head = "".join(f"<th>{h}</th>" for h in HEADERS)
    body = "".join(_row(r) for r in table.to_dict("records"))
    return "\n".join([
        '<input id="cell-filter" type="search" placeholder="filter: words that must all appear, '
        'e.g. mismatch Reduce">',
        f'<div class="scroll"><table id="cells" class="sortable"><thead><tr>{head}</tr></thead>'
        f"<tbody>{body}</tbody></table></div>", *_detail(table, df, texts)])


__all__ = ["CSS", "SORT_JS", "browser_html"]
