"""kserve_v2.testing.session: the CI switch and the restart record both suites share."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kserve_v2.testing.session import RestartLog, in_ci


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, False),
        ("", False),
        ("0", False),
        ("false", False),
        (" No ", False),
        ("FALSE", False),
        ("true", True),
        ("1", True),
        ("yes", True),
    ],
)
def test_in_ci(monkeypatch: pytest.MonkeyPatch, value: str | None, expected: bool) -> None:
    if value is None:
        monkeypatch.delenv("CI", raising=False)
    else:
        monkeypatch.setenv("CI", value)
    assert in_ci() is expected


class _Terminal:
    """What pytest's terminal reporter is asked for: sections and lines, kept in order."""

    def __init__(self) -> None:
        self.written: list[tuple[str, str]] = []

    def section(self, title: str, **_: Any) -> None:
        self.written.append(("section", title))

    def write_line(self, line: str, **_: Any) -> None:
        self.written.append(("line", line))


def test_restart_log_lists_each_restart_under_one_section(tmp_path: Path) -> None:
    server_log = tmp_path / "tritonserver.log"
    log = RestartLog()
    quiet = _Terminal()
    log.summary(quiet)
    assert quiet.written == []  # no restart: no section at all
    log.record("tests/a.py::test_x", "it died", server_log)
    log.record("rest.infer.case", "it stopped answering", server_log)
    terminal = _Terminal()
    log.summary(terminal)
    assert terminal.written == [
        ("section", RestartLog.TITLE),
        ("line", f"tests/a.py::test_x: it died; restarted it (log: {server_log})"),
        ("line", f"rest.infer.case: it stopped answering; restarted it (log: {server_log})"),
    ]
