"""The HTML report in a real browser: headless Chromium renders it, runs its script, and the
counts and filters on the page are checked in the DOM it dumps.

Needs Debian's ``chromium`` (``apt-get install chromium``; CI's setup installs it). Without
it the test is skipped with a loud reason, except in CI, where it fails.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from kserve_v2.conformance import Outcome, RunResult, render_html
from kserve_v2.testing.session import in_ci

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    message = (
        "NO BROWSER: the HTML report was not checked in Chromium; install it with "
        "`apt-get install chromium` (CI does)"
    )
    if in_ci():
        pytest.fail(message)
    pytest.skip(message)


def _dom(browser: str, page: Path, fragment: str, profile: Path) -> str:
    proc = subprocess.run(
        [
            browser,
            *FLAGS,
            f"--user-data-dir={profile}",
            "--virtual-time-budget=5000",
            "--dump-dom",
            page.as_uri() + fragment,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def _text(dom: str, element_id: str) -> str:
    match = re.search(rf'id="{element_id}"[^>]*>([^<]*)<', dom)
    assert match, f"#{element_id} not in the rendered page"
    return match.group(1).strip()


def _hidden_cases(dom: str) -> list[str]:
    return re.findall(r'<details class="case" id="case-([^"]+)"[^>]*style="display: none;"', dom)


def test_report_renders_in_chromium(stub_run: RunResult, tmp_path: Path) -> None:
    browser = _chromium()
    page = tmp_path / "report.html"
    page.write_text(render_html(stub_run), encoding="utf-8")
    counts = stub_run.counts()

    dom = _dom(browser, page, "", tmp_path / "profile")
    assert 'data-ready="1"' in dom, "the report's script did not run"
    for outcome in Outcome.ALL:
        assert _text(dom, f"count-{outcome}") == str(counts[outcome])
    assert _text(dom, "count-must-failures") == "2"
    assert _text(dom, "shown-count") == "11"
    assert _hidden_cases(dom) == []

    # The outcome filter, set from the URL fragment, hides everything but the failures.
    dom = _dom(browser, page, "#outcome=failed", tmp_path / "profile")
    assert _text(dom, "shown-count") == str(counts[Outcome.FAILED])
    hidden = _hidden_cases(dom)
    assert len(hidden) == len(stub_run.results) - counts[Outcome.FAILED]
    assert "stub.fail-must" not in hidden
    assert "stub.pass" in hidden

    # Level filter and an expanded case.
    dom = _dom(
        browser, page, "#outcome=failed,error&level=MUST&open=stub.fail-must", tmp_path / "profile"
    )
    assert _text(dom, "shown-count") == "2"
    assert re.search(r'<details class="case" id="case-stub\.fail-must"[^>]* open=""', dom)
