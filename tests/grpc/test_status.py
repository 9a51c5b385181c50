"""kserve_v2.grpc.status: the gRPC status codes and the status behind an error."""

from __future__ import annotations

import math

import grpc
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kserve_v2.errors import DeadlineExceededError, ServerError, TransportError
from kserve_v2.grpc.framing import STATUS_NAMES, status_error
from kserve_v2.grpc.status import StatusCode, code_name, retry_pushback, status_of
from tests.enum_docs import undocumented_members


def test_the_17_codes_by_wire_number() -> None:
    assert [int(code) for code in StatusCode] == list(range(17))
    assert StatusCode.OK == 0
    assert StatusCode.NOT_FOUND == 5
    assert StatusCode.UNAVAILABLE == 14
    assert StatusCode.UNAUTHENTICATED == 16
    assert tuple(code.name for code in StatusCode) == STATUS_NAMES


def test_codes_match_grpcio() -> None:
    # grpcio's StatusCode values are (number, lower-case name) pairs.
    assert {code.name: code.value[0] for code in grpc.StatusCode} == {
        code.name: int(code) for code in StatusCode
    }


def test_every_code_is_documented() -> None:
    assert undocumented_members(StatusCode) == []


def test_error_codes_stay_names_that_convert_to_the_enum() -> None:
    error = status_error(StatusCode.UNAVAILABLE.name, "down")
    assert isinstance(error, ServerError)
    assert error.grpc_code == "UNAVAILABLE"  # existing comparisons keep working
    assert error.grpc_code is not None
    assert StatusCode[error.grpc_code] is StatusCode.UNAVAILABLE
    assert str(error) == "[gRPC UNAVAILABLE] down"
    late = status_error("DEADLINE_EXCEEDED", "slow", "grpc://h:1")
    assert isinstance(late, DeadlineExceededError)


class _GrpcioError(Exception):
    def __init__(self, code: object) -> None:
        self._code = code

    def code(self) -> object:
        return self._code


@pytest.mark.parametrize(
    ("exc", "status"),
    [
        (ServerError("x", grpc_code="NOT_FOUND"), "NOT_FOUND"),
        (DeadlineExceededError("late"), "DEADLINE_EXCEEDED"),
        (TransportError("refused"), "UNKNOWN"),
        (ValueError("?"), "UNKNOWN"),
    ],
)
def test_status_of(exc: BaseException, status: str) -> None:
    assert status_of(exc) == status


def test_status_of_reads_a_grpcio_cause() -> None:
    error = TransportError("down")
    error.__cause__ = _GrpcioError(grpc.StatusCode.UNAVAILABLE)
    assert status_of(error) == "UNAVAILABLE"
    assert code_name(_GrpcioError(None)) == "UNKNOWN"
    assert code_name(ValueError()) == "UNKNOWN"


@pytest.mark.parametrize(
    ("metadata", "seconds"),
    [
        ([], None),
        ([("grpc-status", "14")], None),
        ([("grpc-retry-pushback-ms", "1500")], 1.5),
        ([("x", "y"), ("grpc-retry-pushback-ms", b"250")], 0.25),  # grpcio's binary values
        ([("grpc-retry-pushback-ms", "0")], 0.0),
        ([("grpc-retry-pushback-ms", "-1")], math.inf),  # gRFC A6: do not retry
        ([("grpc-retry-pushback-ms", "soon")], math.inf),
        ([("grpc-retry-pushback-ms", "")], math.inf),
        ([("grpc-retry-pushback-ms", "1" * 13)], math.inf),
    ],
)
def test_retry_pushback(metadata: list[tuple[str, str | bytes]], seconds: float | None) -> None:
    assert retry_pushback(metadata) == seconds


@given(st.text(max_size=20))
def test_any_pushback_is_a_wait(value: str) -> None:
    seconds = retry_pushback([("grpc-retry-pushback-ms", value)])
    assert seconds is not None
    assert seconds >= 0


def test_status_error_carries_the_pushback() -> None:
    error = status_error("UNAVAILABLE", "busy", retry_after=2.0)
    assert isinstance(error, ServerError)
    assert error.retry_after == 2.0
    plain = status_error("UNAVAILABLE", "busy")
    assert isinstance(plain, ServerError)
    assert plain.retry_after is None
