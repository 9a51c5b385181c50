"""What the project's test sessions share: whether CI runs them, and the record of the local
Triton's restarts after its known gRPC stream race (see :meth:`TritonServer.known_crash
<kserve_v2.testing.triton.TritonServer.known_crash>`).

Both pytest suites (``tests/`` and ``conformance/``) rerun a case that failed because the
server died of that race, on a restarted server, and list each restart in their summary::

    RESTARTS = RestartLog()

    def pytest_terminal_summary(terminalreporter):
        RESTARTS.summary(terminalreporter)
"""

from __future__ import annotations

import os
from typing import Any

__all__ = ["CRASH_LOG_WAIT", "RESTART_ATTEMPTS", "RestartLog", "in_ci"]

#: Attempts of one case while the race keeps striking (each on a restarted server): it hits
#: the error-mode streams often enough on a busy machine that one rerun is not enough to keep
#: CI green, and a case failing for another reason fails at its first attempt.
RESTART_ATTEMPTS = 3
#: Seconds a failed case waits for the crash to show in the server's log.
CRASH_LOG_WAIT = 3.0


def in_ci() -> bool:
    """Whether the ``CI`` environment variable says CI runs the tests (set, and not ``0``,
    ``false`` or ``no``): then a server environment that is missing fails the tests that
    need it, so that CI cannot go green by skipping them."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


class RestartLog:
    """A session's server restarts, one line each, printed in its summary.

    Not warnings: a test module that turns warnings into errors (``filterwarnings("error")``)
    made such a notice fail the session (an INTERNALERROR) while its server was restarting.
    """

    TITLE = "Triton restarts (Triton 2.51's known gRPC stream race)"

    def __init__(self) -> None:
        self.lines: list[str] = []

    def record(self, case: str, why: str, log_path: str | os.PathLike[str]) -> None:
        """``case`` (a test's or a conformance case's id) failed as the server whose log is
        ``log_path`` died, ``why``; the server is being restarted."""
        self.lines.append(f"{case}: {why}; restarted it (log: {log_path})")

    def summary(self, terminalreporter: Any) -> None:
        """Write the restarts, if any, as a section of pytest's terminal summary."""
        if self.lines:
            terminalreporter.section(self.TITLE)
            for line in self.lines:
                terminalreporter.write_line(line)
