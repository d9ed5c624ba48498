"""The report as a user makes it: `scripts/report.py` / `kbx report` on real Parquet sweeps.

Always: report.md and a self-contained report.html whose embedded images are real PNGs (decoded
with Pillow), and, on two real CPU sweeps (a replayed repair run whose rounds fail, then pass, and
the reference), the results browser's verdicts, messages, rounds and kernel texts, and the figures'
text layout. With Chromium installed: a headless browser decodes every <img>, sorts, filters and
follows a cell's link (the same checks as scripts/bench/check_report_html.py); without it those
tests are skipped, saying why.
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

from kbx_ray.report import layout
from kbx_ray.report.browser import check_browser, check_images, find_chromium, screenshot
from kbx_ray.sinks import ParquetSink
from tests.unit.test_report_tables import ONE_SHOT, REPAIR, row

ROOT = Path(__file__).resolve().parents[2]
REPLAY = ROOT / "tests/fixtures/replay/relu_repair.jsonl"  # relu: syntax error, wrong, right x2
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
needs_chromium = pytest.mark.skipif(
    find_chromium() is None, reason="Chromium is not installed (apt-get install -y chromium, or "
    "set KBX_CHROMIUM); scripts/bench/check_report_html.py runs the same check by hand")


def cpu_sweep(out: Path, *overrides: str) -> Path:
    r = run("scripts/sweep.py", f"output_dir={out}", "sink.wandb.mode=disabled", "evaluation.seeds=1",
            "suite.include=[activation/relu,math/exp]", *overrides, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    return Path(r.stdout.splitlines()[-1].removeprefix("results: "))


def run(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT)


def embedded_pngs(page: str) -> list[bytes]:
    return [base64.b64decode(b) for b in re.findall(r'src="data:image/png;base64,([^"]+)"', page)]


def assert_self_contained_with_figures(report_dir: Path, n_figures: int = 5) -> str:
    md = (report_dir / "report.md").read_text()
    page = (report_dir / "report.html").read_text()
    figures = sorted((report_dir / "figures").glob("*.png"))
    assert len(figures) == n_figures
    for f in figures:
        assert f"](figures/{f.name})" in md
    pngs = embedded_pngs(page)
    assert len(pngs) == n_figures and len(pngs) == page.count("<img ")
    for data in pngs:
        assert data.startswith(PNG_SIGNATURE)
        image = Image.open(io.BytesIO(data))
        image.load()  # a full decode: a truncated stream raises here
        assert image.width > 100 and image.height > 100
    assert not re.search(r'(src|href)="(?!data:|#)', page)  # nothing loaded from anywhere
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


@pytest.fixture(scope="module")
def two_sweeps(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two real CPU sweeps of relu and exp: repair replayed (relu fails twice, then passes; exp
    has no completion, so no code) and the reference; then their report, side by side."""
    root = tmp_path_factory.mktemp("two")
    cpu_sweep(root, "model=replay", "method=repair", "method.rounds=3", "method.stop_when=never",
              f"model.options.path={REPLAY}", "model.options.on_missing=skip")
    cpu_sweep(root)
    r = run("scripts/report.py", str(root))
    assert r.returncode == 0, r.stderr
    return root / "report"


def cell_panel(page: str, heading: str) -> str:
    start = page.index(f"<h3>{heading}")
    return page[start:page.index("</div>", start)]


def test_results_browser_on_two_real_sweeps(two_sweeps: Path) -> None:
    md = assert_self_contained_with_figures(two_sweeps, n_figures=2)  # CPU: no timing figures
    assert re.search(r"\| repair-replay-kbx-\w+ \| no_code_block \| 0 \| 1 \| 1 \|", md)
    assert re.search(r"\| one_shot-reference-kbx-\w+ \| correct \| 1 \| 1 \| 2 \|", md)
    # 1 of 2 cells correct: Wilson 95% [9.5%, 90.5%]; one sample per task, so pass@1 only
    assert re.search(r"\| replay \| repair \| cpu \| 2 \| 2 \| 50.0% \| 9%–91% \| 50.0% \| "
                     r"9%–91% \| 50.0% \|\n", md)
    assert "| math/exp | Math | repair | replay | 0 | cpu | no_code_block | no Python code block " \
           "defining exp() in the completion | – | – | 4 |" in md
    page = (two_sweeps / "report.html").read_text()
    relu = cell_panel(page, "activation/relu: repair")
    heads = re.findall(r"<h4>round (\d) on cpu: <span[^>]*>(\w+)</span>", relu)
    assert heads == [("0", "syntax_error"), ("1", "mismatch"), ("2", "correct"), ("3", "correct")]
    assert "line 14: expected &#x27;:&#x27;" in relu and "values outside rtol" in relu
    assert relu.count("<pre>") == 4 and "forgot the max(x, 0)" in relu  # round 1's kernel text
    anchor = re.search(r'<div class="cell" id="(cell-\d+)"><h3>activation/relu: repair', page)
    assert f'href="#{anchor.group(1)}">4 rounds</a>' in page
    for png in (two_sweeps / "figures").glob("*.png"):  # the layout check, on the real report
        assert layout.problems(layout.load(layout.sidecar(png))) == [], png.name


@needs_chromium
def test_results_browser_works_in_headless_chromium(two_sweeps: Path, tmp_path: Path) -> None:
    page = two_sweeps / "report.html"
    used = check_browser(page)
    verdicts = ["correct"] * 3 + ["no_code_block"]
    assert used["verdicts_up"] == verdicts and used["verdicts_down"] == verdicts[::-1]
    assert used["filtered"] == ["no_code_block"]
    assert (used["hidden_before"], used["shown_after"]) == ("none", "block")
    assert "round 0 on cpu" in used["panel_text"] and not used["page_overflows"]
    assert all(im.ok for im in check_images(page))
    shot = screenshot(page, tmp_path / "shot.png", fragment="cell-0", width=1000, height=700)
    with Image.open(shot) as im:  # painted: the panel's text is dark on white
        assert im.size == (1000, 700) and im.convert("L").getextrema()[0] < 100


@pytest.mark.slow
def test_cpu_sweep_then_report(tmp_path: Path) -> None:
    """README steps 2 and 4 on this machine: no GPU, so every timed figure says why it is empty."""
    sweep = run("scripts/sweep.py", f"output_dir={tmp_path}", "suite.include=[math/exp]",
                "sink.wandb.mode=disabled", timeout=600)
    assert sweep.returncode == 0, sweep.stderr[-2000:]
    report = run("scripts/report.py", str(tmp_path))
    assert report.returncode == 0, report.stderr
    md = assert_self_contained_with_figures(tmp_path / "report", n_figures=2)
    assert "| Math | cpu | 1 | 100.0% | 100.0% | – | – | – | – |" in md  # fast_p unknown, not 0
    assert md.count("Left out: timing was skipped for every correct kernel (no GPU") == 3
    if find_chromium() is not None:
        assert all(im.ok for im in check_images(tmp_path / "report" / "report.html"))
