"""kserve_v2.retry: the policy's checks, its backoff schedule and which failures it retries
(the clients' loop is tested in tests/client/test_retry.py)."""

from __future__ import annotations

import math
import random
from typing import Any

import pytest

from kserve_v2 import RetryPolicy
from kserve_v2.errors import (
    DeadlineExceededError,
    InvalidInputError,
    KServeError,
    ProtocolError,
    ServerError,
    TransportError,
)
from kserve_v2.grpc.status import StatusCode
from kserve_v2.retry import GRPC_CODE_NAMES, INFER_RETRY_MODES, check_infer_retry


def test_grpc_code_names_are_the_status_codes_but_ok() -> None:
    assert {code.name for code in StatusCode} - {"OK"} == GRPC_CODE_NAMES


def test_defaults() -> None:
    policy = RetryPolicy()
    assert policy.attempts == 3
    assert policy.http_statuses == frozenset({429, 502, 503, 504})
    assert policy.grpc_codes == frozenset({"UNAVAILABLE"})
    assert policy.infer == "never"


def test_collections_become_frozensets() -> None:
    policy = RetryPolicy(http_statuses=[503], grpc_codes=("UNAVAILABLE", "ABORTED"))
    assert policy.http_statuses == frozenset({503})
    assert policy.grpc_codes == frozenset({"UNAVAILABLE", "ABORTED"})
    assert policy == RetryPolicy(http_statuses={503}, grpc_codes={"ABORTED", "UNAVAILABLE"})


@pytest.mark.parametrize(
    "options",
    [
        {"attempts": 0},
        {"attempts": 2.0},
        {"attempts": True},
        {"initial_backoff": -1},
        {"max_backoff": float("inf")},
        {"initial_backoff": "1"},
        {"multiplier": 0.5},
        {"jitter": 1},
        {"http_statuses": 503},
        {"http_statuses": [600]},
        {"http_statuses": ["503"]},
        {"grpc_codes": "UNAVAILABLE"},
        {"grpc_codes": ["OK"]},
        {"grpc_codes": ["unavailable"]},
        {"infer": True},
        {"infer": "always"},
        {"random": 0.5},
        {"max_retry_after": -1},
        {"max_retry_after": float("inf")},
    ],
)
def test_bad_settings_are_refused(options: dict[str, Any]) -> None:
    with pytest.raises(InvalidInputError, match="RetryPolicy"):
        RetryPolicy(**options)


def test_infer_modes() -> None:
    assert INFER_RETRY_MODES == ("never", "unprocessed", "idempotent")
    for mode in INFER_RETRY_MODES:
        assert check_infer_retry(mode) == mode
    with pytest.raises(InvalidInputError, match="retry must be one of"):
        check_infer_retry(None)


def test_backoff_grows_to_its_cap() -> None:
    policy = RetryPolicy(jitter=False)
    assert [policy.backoff(n) for n in range(1, 8)] == pytest.approx(
        [0.1, 0.2, 0.4, 0.8, 1.6, 2.0, 2.0]
    )
    # A huge retry number does not overflow.
    assert RetryPolicy(jitter=False, multiplier=10).backoff(10_000) == 2.0
    assert RetryPolicy(jitter=False, multiplier=1).backoff(5) == pytest.approx(0.1)


def test_the_servers_wait_replaces_the_backoff_up_to_max_retry_after() -> None:
    policy = RetryPolicy(jitter=False, max_retry_after=10)
    assert policy.delay(3, ServerError("busy", http_status=503)) == pytest.approx(0.4)
    assert policy.delay(3, ServerError("busy", http_status=503, retry_after=7.5)) == 7.5
    assert policy.delay(1, ServerError("busy", http_status=503, retry_after=0.0)) == 0.0
    assert policy.delay(1, ServerError("busy", grpc_code="UNAVAILABLE", retry_after=10)) == 10
    # More than the policy waits for, or a gRPC "do not retry": none (the error is raised).
    assert policy.delay(1, ServerError("busy", http_status=503, retry_after=10.5)) is None
    assert policy.delay(1, ServerError("no", grpc_code="UNAVAILABLE", retry_after=math.inf)) is None
    assert policy.delay(2, TransportError("lost")) == pytest.approx(0.2)


def test_full_jitter_scales_the_backoff_by_the_random_draw() -> None:
    policy = RetryPolicy(random=random.Random(3).random, initial_backoff=1, max_backoff=8)
    draws = random.Random(3)
    assert [policy.backoff(n) for n in (1, 2, 3, 4, 5)] == pytest.approx(
        [
            1 * draws.random(),
            2 * draws.random(),
            4 * draws.random(),
            8 * draws.random(),
            8 * draws.random(),
        ]
    )
    assert RetryPolicy(random=lambda: 0.0).backoff(3) == 0.0


REFUSED = TransportError("cannot connect", unprocessed=True)
LOST = TransportError("connection lost")
CONNECT_TIMEOUT = DeadlineExceededError("connect timed out", unprocessed=True)
TIMED_OUT = DeadlineExceededError("request timed out")

#: (error, retried for an idempotent call, retried for an infer in "unprocessed" mode)
DECISIONS: list[tuple[BaseException, bool, bool]] = [
    (REFUSED, True, True),
    (CONNECT_TIMEOUT, True, True),
    (LOST, True, False),
    (TIMED_OUT, False, False),
    (ServerError("busy", http_status=503), True, False),
    (ServerError("bad gateway", http_status=502), True, False),
    (ServerError("gateway timeout", http_status=504), True, False),
    (ServerError("slow down", http_status=429), True, False),
    (ServerError("boom", http_status=500), False, False),
    (ServerError("missing", http_status=404), False, False),
    (ServerError("busy", grpc_code="UNAVAILABLE"), True, False),
    (ServerError("too big", grpc_code="RESOURCE_EXHAUSTED"), False, False),
    (ServerError("missing", grpc_code="NOT_FOUND"), False, False),
    (ServerError("internal", grpc_code="INTERNAL"), False, False),
    (ProtocolError("cut short"), False, False),
    (InvalidInputError("bad"), False, False),
    (KServeError("other"), False, False),
    (ValueError("not ours"), False, False),
]


@pytest.mark.parametrize(("error", "idempotent", "unprocessed"), DECISIONS)
def test_which_failures_are_retried(
    error: BaseException, idempotent: bool, unprocessed: bool
) -> None:
    policy = RetryPolicy()
    assert policy.retries(error, "idempotent") is idempotent
    assert policy.retries(error, "unprocessed") is unprocessed
    assert policy.retries(error, "never") is False


def test_statuses_and_codes_are_the_policys() -> None:
    policy = RetryPolicy(http_statuses={500}, grpc_codes={"INTERNAL"})
    assert policy.retries(ServerError("boom", http_status=500), "idempotent")
    assert not policy.retries(ServerError("busy", http_status=503), "idempotent")
    assert policy.retries(ServerError("x", grpc_code="INTERNAL"), "idempotent")
    assert not policy.retries(ServerError("x", grpc_code="UNAVAILABLE"), "idempotent")


def test_transport_error_is_processed_unless_said() -> None:
    assert TransportError("x").unprocessed is False
    assert DeadlineExceededError("x", unprocessed=True).unprocessed is True
