"""Every conformance case as a test (the cases live in kserve_v2/conformance/cases)."""

from __future__ import annotations

import pytest

from kserve_v2.conformance import Case, Outcome, run_case
from kserve_v2.conformance.cases.management import LOAD_UNLOAD_REFUSED
from kserve_v2.testing.session import CRASH_LOG_WAIT, RESTART_ATTEMPTS

from .conftest import SuiteRun


def _explain(case: Case, message: str, evidence: str) -> str:
    lines = [
        f"{case.id} [{case.level.value}] {case.title}",
        f"{case.spec.document} § {case.spec.section}:",
        f"  > {case.spec.quote}",
        message,
    ]
    if evidence:
        lines += ["", evidence]
    return "\n".join(lines)


def test_case(conformance_case: Case, conformance_run: SuiteRun) -> None:
    run = conformance_run
    while run.restart_if_crashed(conformance_case.id):  # it died after an earlier case passed
        pass
    result = run_case(run.session, conformance_case, run.expected)
    for _ in range(RESTART_ATTEMPTS - 1):
        if not result.counts_as_failure:
            break
        if not run.restart_if_crashed(conformance_case.id, wait=CRASH_LOG_WAIT):
            break  # failed for another reason: that is the case's result
        result = run_case(run.session, conformance_case, run.expected)
    conformance_run.results.append(result)
    if result.outcome == Outcome.SKIPPED:
        if conformance_run.server is not None and result.message.startswith(LOAD_UNLOAD_REFUSED):
            # The local Triton is started in explicit model-control mode: the repository
            # cases must run there, so this skip means the server was not started as meant.
            pytest.fail(
                f"the local Triton should allow model load / unload: {result.message}",
                pytrace=False,
            )
        pytest.skip(result.message)
    if result.outcome == Outcome.DEVIATION:
        pytest.xfail(f"known deviation: {result.expected_deviation}")
    if result.outcome in (Outcome.FAILED, Outcome.ERROR):
        pytest.fail(_explain(conformance_case, result.message, result.evidence()), pytrace=False)
    if result.expected_deviation is not None:
        pytest.fail(
            f"{conformance_case.id} is listed as a known deviation "
            f"({conformance_run.expected.source}) but passed: remove it from the list",
            pytrace=False,
        )
