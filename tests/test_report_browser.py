"""The HTML report in a real browser: headless Chromium lays the page out and the
plots render (skipped where no Chromium is installed)."""
import shutil
import subprocess

import pytest

from kcontract.report import render_calibration_html, render_html

from test_report_render import CALS, make_run

BROWSER = next((shutil.which(b) for b in ("chromium", "chromium-browser", "google-chrome",
                                          "google-chrome-stable") if shutil.which(b)), None)
pytestmark = pytest.mark.skipif(BROWSER is None, reason="headless Chromium is not installed")


def rendered(path) -> str:
    """The DOM after the page's load handlers ran."""
    cmd = [BROWSER, "--headless", "--no-sandbox", "--disable-gpu", "--disable-extensions",
           "--virtual-time-budget=5000", "--dump-dom", path.as_uri()]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=90)
    assert res.returncode == 0, res.stderr[-2000:]
    return res.stdout


@pytest.mark.parametrize("violations", [True, False], ids=["violations", "clean"])
def test_plots_render_in_headless_chromium(tmp_path, violations):
    html = render_html(make_run(violations))
    n = html.count('<figure class="plot"')
    assert n >= 2
    page = tmp_path / "report.html"
    page.write_text(html, encoding="utf-8")
    dom = rendered(page)
    assert f'data-plots-rendered="{n}/{n}"' in dom


def test_calibration_matrix_renders_in_headless_chromium(tmp_path):
    page = tmp_path / "cal.html"
    page.write_text(render_calibration_html(CALS), encoding="utf-8")
    assert 'data-plots-rendered="1/1"' in rendered(page)
