"""The report as a user makes it: `scripts/report.py` / `kbx report` on real Parquet sweeps.

Always: report.md and a self-contained report.html whose >= 5 embedded images are real PNGs
(decoded with Pillow). With Chromium installed: a headless browser decodes every <img> too (the
same check as scripts/bench/check_report_html.py); without it that test is skipped, saying why.
The slow test runs a real CPU sweep first, the path the README promises.
"""
from __future__ import annotations

import base64
import io
import re
import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image

from kbx_ray.report.browser import check_images, find_chromium
from kbx_ray.sinks import ParquetSink
from tests.unit.test_report_tables import ONE_SHOT, REPAIR, row

ROOT = Path(__file__).resolve().parents[2]
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
needs_chromium = pytest.mark.skipif(
    find_chromium() is None, reason="Chromium is not installed (apt-get install -y chromium, or "
    "set KBX_CHROMIUM); scripts/bench/check_report_html.py runs the same check by hand")


def run(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT)


def embedded_pngs(page: str) -> list[bytes]:
    return [base64.b64decode(b) for b in re.findall(r'src="data:image/png;base64,([^"]+)"', page)]


def assert_self_contained_with_figures(report_dir: Path) -> str:
    md = (report_dir / "report.md").read_text()
    page = (report_dir / "report.html").read_text()
    figures = sorted((report_dir / "figures").glob("*.png"))
    assert len(figures) >= 5
    for f in figures:
        assert f"](figures/{f.name})" in md
    pngs = embedded_pngs(page)
    assert len(pngs) >= 5 and len(pngs) == page.count("<img ")
    for data in pngs:
        assert data.startswith(PNG_SIGNATURE)
        image = Image.open(io.BytesIO(data))
        image.load()  # a full decode: a truncated stream raises here
        assert image.width > 100 and image.height > 100
    assert not re.search(r'(src|href)="(?!data:)', page)  # nothing loaded from anywhere
    return md


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("results")
    ParquetSink(root / "sw").write_evaluations(ONE_SHOT + REPAIR)
    ParquetSink(root / "sw2").write_evaluations(
        [row("one_shot", "Activation", "h100", 0, call=True, ok=True, speedup=4.0,
             cases=[(4, 1)], sweep="sw2")])
    return root


@pytest.fixture(scope="module")
def report_dir(results: Path) -> Path:
    r = run("scripts/report.py", str(results))
    assert r.returncode == 0, r.stderr
    return results / "report"  # the default: <first dir>/report


def test_report_script_writes_tables_and_figures(report_dir: Path) -> None:
    md = assert_self_contained_with_figures(report_dir)
    # rates per GPU pool: the H100 row of repair is the ablation's state after its last round
    assert "| sw | org/coder | repair | h100 | 3 | 100.0% | 100.0% | 66.7% | 33.3% | 33.3% | 1.53× |" in md
    assert "| sw | org/coder | repair | a100 | 3 | 66.7% | 33.3% | 33.3% | 0.0% | 0.0% | 1.20× |" in md
    assert "| sw | org/coder | repair | 2 | 3 | 100.0% | 100.0% | 1.53× |" in md
    assert "| sw2 | org/coder | one_shot | h100 | 1 | 100.0% | 100.0% | 100.0% | 100.0% | 100.0% |" in md
    assert "| sw | org/coder | repair | h100 | 3 | 3 | 1.97× | 1.93× | 1.53× | 33.3% | – |" in md
    assert "28.6% of 7 correct timed kernels are slower than eager." in md


def test_kbx_report_out_dir_and_user_errors(results: Path, tmp_path: Path) -> None:
    r = run("-m", "kbx_ray.cli", "report", str(results / "sw2"), "--out", str(tmp_path / "o"))
    assert r.returncode == 0, r.stderr
    assert "| sw2 | Activation | h100 | 1 |" in (tmp_path / "o" / "report.md").read_text()
    bad = run("-m", "kbx_ray.cli", "report", str(tmp_path / "missing"))
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert bad.stderr.strip().splitlines() == [
        f"kbx: error: results dir {tmp_path / 'missing'} does not exist; pass "
        "results/<sweep_id> or the results/ dir that holds the sweeps"]


@needs_chromium
def test_every_figure_renders_in_headless_chromium(report_dir: Path, tmp_path: Path) -> None:
    images = check_images(report_dir / "report.html")
    assert len(images) >= 5 and all(im.ok for im in images), images
    assert {im.alt for im in images} >= {"Repair rounds", "Speedup distribution", "SOL fraction"}
    # The check can fail: an image that is not a PNG, and one cut after its header (Chromium
    # still reports the header's size for it, but paints nothing), are both reported.
    page = (report_dir / "report.html").read_text()
    first, second, rest = page.split("data:image/png;base64,", 2)
    end = second.index('"')
    broken = tmp_path / "broken.html"
    broken.write_text(first + "data:image/png;base64,AAAAAAAA" + second[end:] +
                      "data:image/png;base64," + rest[:200] + rest[rest.index('"'):])
    checked = check_images(broken)
    assert [im.ok for im in checked] == [False, False] + [True] * (len(checked) - 2)
    assert checked[0].width == 0 and checked[1].width > 0 and checked[1].ink == 0


@pytest.mark.slow
def test_cpu_sweep_then_report(tmp_path: Path) -> None:
    """README steps 2 and 4 on this machine: no GPU, so every timed figure says why it is empty."""
    sweep = run("scripts/sweep.py", f"output_dir={tmp_path}", "suite.include=[math/exp]",
                "wandb.mode=disabled", timeout=600)
    assert sweep.returncode == 0, sweep.stderr[-2000:]
    report = run("scripts/report.py", str(tmp_path))
    assert report.returncode == 0, report.stderr
    md = assert_self_contained_with_figures(tmp_path / "report")
    assert "| Math | cpu | 1 | 100.0% | 100.0% | – | – | – | – |" in md  # fast_p unknown, not 0
    assert "No timed results" in md
    if find_chromium() is not None:
        assert all(im.ok for im in check_images(tmp_path / "report" / "report.html"))
