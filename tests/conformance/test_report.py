"""The report writers: JSON schema, Markdown, self-contained HTML."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from kserve_v2.conformance import Outcome, RunResult, render_html, render_markdown, to_json
from kserve_v2.conformance.report import SCHEMA, write_report

CASE_KEYS = {
    "id",
    "title",
    "outcome",
    "level",
    "document",
    "section",
    "quote",
    "url",
    "protocols",
    "extension",
    "models",
    "note",
    "message",
    "known_deviation",
    "duration_s",
    "exchanges",
}


def test_json_schema(stub_run: RunResult) -> None:
    data = json.loads(json.dumps(to_json(stub_run)))
    assert data["schema"] == SCHEMA
    assert set(data) == {
        "schema",
        "generator",
        "started",
        "duration_s",
        "target",
        "server",
        "expected_deviations",
        "summary",
        "by_level",
        "sections",
        "cases",
    }
    assert data["summary"] == {
        "total": 11,
        "passed": 2,
        "failed": 3,
        "deviation": 1,
        "error": 1,
        "skipped": 4,
        "must_failures": 2,
        "stale_deviations": ["stub.stale"],
        "unchecked": [],
        "exit_status": 1,
    }
    assert data["server"]["http"]["name"] == "stub"
    assert data["expected_deviations"] == {"source": "stub-list", "server": "stub server"}
    assert set(data["by_level"]) == {"MUST", "SHOULD", "MAY", "expected practice"}
    assert data["by_level"]["MUST"][Outcome.FAILED] == 2
    for case in data["cases"]:
        assert set(case) == CASE_KEYS
    fail = next(c for c in data["cases"] if c["id"] == "stub.fail-must")
    exchange = fail["exchanges"][0]
    assert set(exchange) == {"protocol", "request", "response", "error"}
    assert exchange["request"]["line"] == "POST /v2/models/present/infer"
    assert exchange["response"]["line"] == "400 Bad Request"
    assert ["content-type", "application/json"] in exchange["response"]["headers"]
    section = data["sections"][0]
    assert set(section) == {"document", "section", "url", "outcomes", "levels", "must_failures"}


def test_markdown(stub_run: RunResult) -> None:
    text = render_markdown(stub_run)
    assert text.startswith("# Conformance report\n")
    assert "| 11 | 2 | 3 | 1 | 1 | 4 | 2 |" in text
    assert "## Failures (3)" in text
    assert "## Known deviations (1)" in text
    assert "### `stub.fail-must` (MUST)" in text
    assert "> The server metadata endpoint provides information about the server." in text
    assert "<< 400 Bad Request" in text  # the evidence
    assert "| `stub.skip-grpc` | needs gRPC (--grpc not given) |" in text
    assert "- `stub.stale`" in text
    # Failures come MUST first.
    assert text.index("`stub.fail-must`") < text.index("`stub.fail-should`")


class _Collector(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.external: list[str] = []
        self.ids: dict[str, str] = {}
        self.cases: list[dict[str, str | None]] = []
        self._id: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag in ("script", "img", "iframe") and found.get("src"):
            self.external.append(str(found["src"]))
        if tag == "link":
            self.external.append(str(found.get("href")))
        if tag == "details" and found.get("class") == "case":
            self.cases.append(found)
        self._id = found.get("id")

    def handle_data(self, data: str) -> None:
        if self._id and self._id.startswith("count-") and data.strip():
            self.ids[self._id] = data.strip()
        self._id = None


def test_html_is_self_contained_and_counts(stub_run: RunResult) -> None:
    page = render_html(stub_run)
    parser = _Collector()
    parser.feed(page)
    assert parser.external == []
    assert not re.search(r"""(src|href)=["']?(https?:)?//(?!github\.com)""", page)
    assert parser.ids == {
        "count-total": "11",
        "count-passed": "2",
        "count-failed": "3",
        "count-deviation": "1",
        "count-error": "1",
        "count-skipped": "4",
        "count-must-failures": "2",
    }
    assert len(parser.cases) == 11
    outcomes = [c["data-outcome"] for c in parser.cases]
    assert outcomes[:2] == [Outcome.FAILED] * 2  # failures first
    assert "<script>" in page
    assert "shown-count" in page
    assert "&lt;&lt; 400 Bad Request" in page  # evidence, escaped


def test_write_report_by_suffix(stub_run: RunResult, tmp_path: Path) -> None:
    for suffix in (".json", ".md", ".html"):
        path = write_report(stub_run, tmp_path / f"report{suffix}")
        assert path.stat().st_size > 500
    json.loads((tmp_path / "report.json").read_text())
    with pytest.raises(ValueError, match=r"use \.json, \.md or \.html"):
        write_report(stub_run, tmp_path / "report.txt")
