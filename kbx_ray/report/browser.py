"""report.html -> what a real browser made of it: do its figures decode, does its browser work?
More: kbx_ray/report/README.md, `browser.py`.
"""
from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
PROBE_ID = "kbx-image-probe"
PROBE = f"""<script>
window.addEventListener("load", () => {{
  const images = Array.from(document.images).map((im) => {{
    let ink = 0;  // dark pixels painted: 0 for an image that decoded as a blank or not at all
    try {{
      const c = document.createElement("canvas");
      c.width = im.naturalWidth; c.height = im.naturalHeight;
      const ctx = c.getContext("2d");
      ctx.drawImage(im, 0, 0);
      const d = ctx.getImageData(0, 0, c.width, c.height).data;
      for (let i = 0; i < d.length; i += 4) {{
        if (d[i + 3] > 0 && d[i] + d[i + 1] + d[i + 2] < 384) ink++;
      }}
    }} catch (e) {{ ink = 0; }}
    return {{alt: im.alt, complete: im.complete, width: im.naturalWidth,
             height: im.naturalHeight, ink: ink}};
  }});
  const out = document.createElement("pre");
  out.id = "{PROBE_ID}";
  out.textContent = JSON.stringify(images);
  document.body.appendChild(out);
}});
</script>
"""


class BrowserError(RuntimeError):
    """Chromium is missing, failed, or the page never reported its images."""


@dataclass(frozen=True)
class ImageCheck:
    alt: str        # the figure's title
    complete: bool  # the browser finished loading it
    width: int      # naturalWidth in pixels: 0 when the image did not decode
    height: int
    ink: int        # dark pixels it painted on a canvas: 0 when blank or undecodable

    @property
    def ok(self) -> bool:
        return self.complete and self.width > 0 and self.height > 0 and self.ink > 0


def find_chromium() -> str | None:
    """$KBX_CHROMIUM, else the first Chromium or Chrome on PATH."""
    explicit = os.environ.get("KBX_CHROMIUM")
    if explicit:
        return shutil.which(explicit)  # None when it is not an executable
    return next((p for p in map(shutil.which, BROWSERS) if p), None)


def _flags(tmp: str) -> list[str]:
    return ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--no-first-run", "--disable-dev-shm-usage",
            "--hide-scrollbars", f"--user-data-dir={tmp}/profile"]


def _chromium(chromium: str | None) -> str:
    found = chromium or find_chromium()
    if found is None:
        raise BrowserError("no Chromium found; install it (apt-get install -y chromium) "
                           "or set KBX_CHROMIUM to a Chrome/Chromium binary")
    return found


def run_probe(html_path: Path, probe: str, chromium: str | None = None,
              timeout_s: float = 120) -> Any:
    """Load a copy of the page with `probe` (a <script> that puts JSON in <pre id=PROBE_ID>)
    added before </body>, and return that JSON as the browser left it."""
    chromium = _chromium(chromium)
    page = Path(html_path).read_text(encoding="utf-8")
    if "</body>" not in page:
        raise BrowserError(f"{html_path} has no </body>; is it a report.html?")
    with tempfile.TemporaryDirectory(prefix="kbx-chromium-") as tmp:
        copy = Path(tmp) / "page.html"
        copy.write_text(page.replace("</body>", probe + "</body>", 1), encoding="utf-8")
        cmd = [chromium, *_flags(tmp), "--virtual-time-budget=10000", "--dump-dom",
               copy.as_uri()]
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise BrowserError(f"Chromium did not finish within {timeout_s:.0f} s") from None
    found = re.search(f'<pre id="{PROBE_ID}">(.*?)</pre>', done.stdout, re.S)
    if found is None:
        tail = done.stderr.strip().splitlines()[-3:]
        raise BrowserError(f"Chromium (exit {done.returncode}) did not report back: "
                           + " | ".join(tail))
    return json.loads(html.unescape(found.group(1)))


def check_images(html_path: Path, chromium: str | None = None,
                 timeout_s: float = 120) -> list[ImageCheck]:
    """Each <img> of the page as the browser loaded it, in document order."""
    found = run_probe(html_path, PROBE, chromium, timeout_s)
    return [ImageCheck(str(i["alt"]), bool(i["complete"]), int(i["width"]), int(i["height"]),
                       int(i["ink"])) for i in found]


def screenshot(html_path: Path, png: Path, fragment: str = "", width: int = 1280,
               height: int = 1600, chromium: str | None = None, timeout_s: float = 120) -> Path:
    """A PNG of the page as Chromium paints it at width x height, opened at #fragment if given."""
    chromium = _chromium(chromium)
    with tempfile.TemporaryDirectory(prefix="kbx-chromium-") as tmp:
        url = Path(html_path).resolve().as_uri() + (f"#{fragment}" if fragment else "")
        cmd = [chromium, *_flags(tmp), f"--window-size={width},{height}",
               f"--screenshot={Path(png).resolve()}", url]
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise BrowserError(f"Chromium did not finish within {timeout_s:.0f} s") from None
    if not Path(png).is_file():
        raise BrowserError(f"Chromium (exit {done.returncode}) wrote no screenshot: "
                           + " | ".join(done.stderr.strip().splitlines()[-3:]))
    return Path(png)


BROWSE_PROBE = f"""<script>
window.addEventListener("load", () => {{
  const t = document.getElementById("cells"), out = {{}};
  const col = (name) => Array.from(t.tHead.rows[0].cells).findIndex((h) => h.textContent === name);
  const column = (i) => Array.from(t.tBodies[0].rows).filter((r) => !r.hidden)
    .map((r) => r.cells[i].textContent);
  const v = col("verdict");
  t.tHead.rows[0].cells[v].click();
  out.verdicts_up = column(v);
  t.tHead.rows[0].cells[v].click();
  out.verdicts_down = column(v);
  const f = document.getElementById("cell-filter");
  f.value = "no_code_block";
  f.dispatchEvent(new Event("input"));
  out.filtered = column(v);
  f.value = ""; f.dispatchEvent(new Event("input"));
  const link = t.tBodies[0].rows[0].querySelector("a");
  const panel = document.getElementById(link.getAttribute("href").slice(1));
  out.hidden_before = getComputedStyle(panel).display;
  location.hash = link.getAttribute("href");
  out.shown_after = getComputedStyle(panel).display;
  out.panel_text = panel.textContent;
  out.page_overflows = document.documentElement.scrollWidth > window.innerWidth;
  const pre = document.createElement("pre");
  pre.id = "{PROBE_ID}";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
}});
</script>
"""


def check_browser(html_path: Path, chromium: str | None = None) -> dict[str, Any]:
    """Use the results browser as a reader would: sort by verdict both ways, filter, follow a
    cell's link; report what the page then showed, and whether the page scrolls sideways."""
    return run_probe(html_path, BROWSE_PROBE, chromium)
