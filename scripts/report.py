"""Build the report: `python scripts/report.py <results dir> [more dirs] [--out DIR]`.

A dir is `results/<sweep_id>` or a dir holding several sweeps; several dirs are compared side by
side. Writes report.md, report.html (self-contained) and figures/*.png, by default under
`<first dir>/report/`. Thin on purpose: the logic is in kbx_ray/report/ (same as `kbx report`).
"""
import sys

from kbx_ray.cli.commands import main

if __name__ == "__main__":
    sys.exit(main(["report", *sys.argv[1:]]))
