"""What the transports share without doing I/O: origins, deadlines, TLS contexts, errors."""

from __future__ import annotations

import asyncio
import socket
import ssl
from pathlib import Path

import pytest

from kserve_v2.errors import DeadlineExceededError, InvalidInputError, TransportError
from kserve_v2.transport.sockets import (
    CONNECTION_LOST,
    Origin,
    TLSConfig,
    base_origin,
    connect_error,
    connect_timeout,
    deadline_after,
    parse_origin,
    pool_timeout_error,
)

ORIGIN = Origin(True, "example.com", 8443)


def test_deadlines() -> None:
    assert deadline_after(None, 5.0) is None
    assert deadline_after(float("inf"), 5.0) is None
    assert deadline_after(2.0, 5.0) == 7.0


@pytest.mark.parametrize(
    ("limit", "deadline", "expected"),
    [(10.0, None, 10.0), (None, None, None), (10.0, 103.0, 3.0), (2.0, 103.0, 2.0)],
)
def test_connect_timeout_is_cut_to_the_deadline(
    limit: float | None, deadline: float | None, expected: float | None
) -> None:
    assert connect_timeout(limit, deadline, 100.0) == expected


def test_connect_timeout_after_the_deadline() -> None:
    with pytest.raises(DeadlineExceededError, match="gRPC deadline") as info:
        connect_timeout(10.0, 100.0, 100.0, expired="gRPC deadline exceeded", url="grpc://h")
    assert info.value.url == "grpc://h"


def test_origins() -> None:
    origin, target = parse_origin("http://[::1]:8000/v2?x=1")
    assert (origin.host, origin.port, origin.tls, target) == ("::1", 8000, False, "/v2?x=1")
    assert origin.url == "http://[::1]:8000"
    assert base_origin("https://example.com").host_header == "example.com"
    with pytest.raises(InvalidInputError, match="must not have a path"):
        base_origin("http://example.com/base")


def test_pool_timeout_error_names_the_limit_and_url() -> None:
    error = pool_timeout_error(4, "http://h")
    assert isinstance(error, DeadlineExceededError)
    assert "4 pooled connections" in str(error)
    assert error.url == "http://h"


def test_tls_config_builds_verifying_contexts() -> None:
    ctx = TLSConfig().context()
    assert ctx.verify_mode == ssl.CERT_REQUIRED
    assert ctx.check_hostname
    unverified = TLSConfig(verify=False).context(alpn=("h2",))
    assert unverified.verify_mode == ssl.CERT_NONE
    assert not unverified.check_hostname


def test_tls_config_refuses_missing_files(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="cannot set up TLS"):
        TLSConfig(ca_file=tmp_path / "missing.pem").context()
    with pytest.raises(InvalidInputError, match="cannot set up TLS"):
        TLSConfig(cert_file=str(tmp_path / "missing.pem")).context()


def _verification_failure() -> ssl.SSLCertVerificationError:
    error = ssl.SSLCertVerificationError(1, "certificate verify failed")
    error.verify_message = "self-signed certificate"
    return error


# Every failure of a connect, and what the caller sees: (error, handshake, type, message part).
CONNECT_ERRORS = [
    (TimeoutError(), False, DeadlineExceededError, "timed out connecting"),
    (asyncio.TimeoutError(), False, DeadlineExceededError, "timed out connecting"),
    (TimeoutError(), True, DeadlineExceededError, "timed out in the TLS handshake"),
    (_verification_failure(), True, TransportError, "self-signed certificate"),
    (_verification_failure(), False, TransportError, "verification failed"),
    (ssl.SSLError(1, "alert"), False, TransportError, "TLS handshake failed"),
    (ConnectionResetError(104, "reset"), True, TransportError, "TLS handshake failed"),
    (socket.gaierror(-2, "Name or service not known"), False, TransportError, "resolve host"),
    (ConnectionRefusedError(111, "Connection refused"), False, TransportError, "refused"),
]


@pytest.mark.parametrize(("error", "handshake", "kind", "message"), CONNECT_ERRORS)
def test_connect_errors_are_translated(
    error: Exception, handshake: bool, kind: type[Exception], message: str
) -> None:
    translated = connect_error(error, ORIGIN, handshake=handshake)
    assert type(translated) is kind
    assert message in str(translated)
    # Nothing was sent: a retry cannot run the request twice.
    assert isinstance(translated, TransportError)
    assert translated.unprocessed


def test_lost_connections_are_the_socket_and_tls_eofs() -> None:
    assert issubclass(ssl.SSLEOFError, CONNECTION_LOST)
    assert issubclass(BrokenPipeError, CONNECTION_LOST)
    assert not issubclass(TimeoutError, CONNECTION_LOST)
