"""Open a report.html in headless Chromium and check that every embedded figure renders.

    python scripts/bench/check_report_html.py results/<sweep_id>/report/report.html
    python scripts/bench/check_report_html.py results/<sweep_id>          # builds the report first

Prints one line per <img> (decoded size or FAILED) and exits 0 when all decoded, 1 when one did
not, 2 when Chromium is missing or failed (install: apt-get install -y chromium, or set
KBX_CHROMIUM). The same check runs in tests/integration/test_report_html.py when Chromium exists.
Logic: kbx_ray/report/browser.py.
"""
import argparse
import sys
from pathlib import Path

from kbx_ray.report import build_report
from kbx_ray.report.browser import BrowserError, check_images


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("target", type=Path, help="a report.html, or results dir(s) to report on")
    ap.add_argument("--chromium", help="browser binary (default: $KBX_CHROMIUM or PATH)")
    args = ap.parse_args(argv)
    page = args.target
    if page.is_dir():
        page = build_report([page], page / "report").html
    try:
        images = check_images(page, args.chromium)
    except BrowserError as e:
        print(f"check_report_html: {e}", file=sys.stderr)
        return 2
    for im in images:
        state = (f"{im.width}x{im.height}, {im.ink} px inked" if im.ok
                 else "FAILED (blank or undecoded)")
        print(f"{state:>30}  {im.alt}")
    bad = sum(not im.ok for im in images)
    print(f"{len(images) - bad}/{len(images)} images rendered in {page}")
    return 1 if bad or not images else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
