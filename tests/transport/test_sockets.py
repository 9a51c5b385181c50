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
from tests.transport.servers import Certs

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


def test_tls_config_names_missing_files(tmp_path: Path) -> None:
    missing = str(tmp_path / "missing.pem")
    for what, config in (
        ("ca_file", TLSConfig(ca_file=missing)),
        ("cert_file", TLSConfig(cert_file=missing)),
        ("key_file", TLSConfig(cert_file=__file__, key_file=missing)),
    ):
        with pytest.raises(InvalidInputError, match=f"cannot read TLS {what} '{missing}'") as info:
            config.context()
        assert info.value.value == missing


# A TLS file that is not PEM: (TLSConfig arguments, the file named, what the error says).
# "certs:NAME" is that file of the test certificates; other names are written below.
NOT_PEM = [
    ({"ca_file": "garbage"}, "garbage", "TLS ca_file '{}' is not a PEM certificate"),
    ({"ca_file": "empty"}, "empty", "TLS ca_file '{}' is not a PEM certificate"),
    ({"ca_file": "der"}, "der", "TLS ca_file '{}' is not a PEM certificate"),
    (
        {"cert_file": "garbage", "key_file": "certs:client_key"},
        "garbage",
        "TLS cert_file '{}' is not a PEM certificate",
    ),
    (
        {"cert_file": "empty", "key_file": "certs:client_key"},
        "empty",
        "TLS cert_file '{}' is not a PEM certificate",
    ),
    (
        {"cert_file": "certs:client_cert", "key_file": "garbage"},
        "garbage",
        "TLS key_file '{}' is not a PEM private key",
    ),
    (
        {"cert_file": "certs:client_cert", "key_file": "certs:client_cert"},
        "certs:client_cert",
        "TLS key_file '{}' is not a PEM private key",
    ),
    (
        {"cert_file": "certs:client_cert", "key_file": "empty", "key_password": "pw"},
        "empty",
        "TLS key_file '{}' is not a PEM private key (or its password is wrong)",
    ),
    (
        {"cert_file": "certs:client_cert"},
        "certs:client_cert",
        "TLS cert_file '{}' has no PEM private key in it; give key_file",
    ),
    (
        {"cert_file": "certs:client_cert", "key_file": "certs:server_key"},
        "certs:server_key",
        "TLS key_file '{}' is not the key of cert_file '",
    ),
]


@pytest.mark.parametrize(("arguments", "culprit", "message"), NOT_PEM)
def test_tls_config_names_a_file_that_is_not_pem(
    certs: Certs, tmp_path: Path, arguments: dict[str, str], culprit: str, message: str
) -> None:
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    (tmp_path / "garbage").write_text("this is not a certificate\n")
    (tmp_path / "empty").write_bytes(b"")
    der = x509.load_pem_x509_certificate(certs.ca_file.read_bytes())
    (tmp_path / "der").write_bytes(der.public_bytes(serialization.Encoding.DER))

    def path(name: str) -> str:
        if name.startswith("certs:"):
            return str(getattr(certs, name.removeprefix("certs:")))
        return str(tmp_path / name)

    given = {k: path(v) if k != "key_password" else v for k, v in arguments.items()}
    with pytest.raises(InvalidInputError) as info:
        TLSConfig(**given).context()  # type: ignore[arg-type]
    assert str(info.value).startswith(message.format(path(culprit)))
    assert info.value.value == path(culprit)  # the offending file
    assert "PEM lib" not in str(info.value)
    assert isinstance(info.value.__cause__, ssl.SSLError)  # OpenSSL's words stay there


def test_tls_config_takes_pem_files(certs: Certs) -> None:
    ctx = TLSConfig(
        ca_file=certs.ca_file, cert_file=certs.client_cert, key_file=certs.client_key
    ).context()
    assert ctx.verify_mode == ssl.CERT_REQUIRED


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
