"""Open a report.html in headless Chromium: every figure renders, its text is laid out, the
results browser works; optionally save a screenshot.

    python scripts/bench/check_report_html.py results/<sweep_id>/report/report.html
    python scripts/bench/check_report_html.py results/<sweep_id>          # builds the report first
    python scripts/bench/check_report_html.py results/ --screenshot shot.png [--cell cell-0]

Prints one line per <img> (decoded size or FAILED), each layout problem of a figure (text clipped
or overlapping, from figures/<name>.layout.json) and what the browser's sort, filter and cell link
showed. Exits 0 when all is well, 1 when not, 2 when Chromium is missing or failed (install:
apt-get install -y chromium, or set KBX_CHROMIUM). Logic: kbx_ray/report/browser.py, layout.py.
"""
import argparse
import sys
from pathlib import Path

from kbx_ray.report import build_report, layout
from kbx_ray.report.browser import BrowserError, check_browser, check_images, screenshot


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("target", type=Path, help="a report.html, or results dir(s) to report on")
    ap.add_argument("--chromium", help="browser binary (default: $KBX_CHROMIUM or PATH)")
    ap.add_argument("--screenshot", type=Path, help="save a PNG of the page here")
    ap.add_argument("--cell", default="", help="open this cell's panel for the screenshot")
    args = ap.parse_args(argv)
    page = args.target
    if page.is_dir():
        page = build_report([page], page / "report").html
    try:
        images = check_images(page, args.chromium)
        used = check_browser(page, args.chromium) if "id=\"cells\"" in page.read_text() else None
        if args.screenshot:
            screenshot(page, args.screenshot, args.cell, height=1400, chromium=args.chromium)
    except BrowserError as e:
        print(f"check_report_html: {e}", file=sys.stderr)
        return 2
    for im in images:
        state = (f"{im.width}x{im.height}, {im.ink} px inked" if im.ok
                 else "FAILED (blank or undecoded)")
        print(f"{state:>30}  {im.alt}")
    bad = sum(not im.ok for im in images)
    print(f"{len(images) - bad}/{len(images)} images rendered in {page}")
    problems = [f"{p.stem}: {issue}" for p in sorted((page.parent / "figures").glob("*.png"))
                for issue in (layout.problems(layout.load(layout.sidecar(p)))
                              if layout.sidecar(p).is_file() else ["no layout record"])]
    print("\n".join(problems) or "figure text: nothing clipped or overlapping")
    if used is not None:
        shown = used["shown_after"] == "block" and not used["page_overflows"]
        print(f"results browser: sorted {len(used['verdicts_up'])} rows, a cell's link "
              f"{'opened its rounds' if shown else 'FAILED'}")
        bad += not shown
    return 1 if bad or problems or not images else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
