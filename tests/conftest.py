"""Shared fixtures: the live Triton server(s) the integration tests talk to.

* ``triton`` (session): one :class:`TritonServer` on ``tests/models``, every model loaded.
* ``triton_factory`` (session): starts further servers with other options (explicit model
  control, restricted APIs, gRPC TLS, ...) and stops them all at the end of the session.
* ``tls_certs`` (session): a throw-away CA plus server and client certificates.

Tests that use ``triton``/``triton_factory``/``triton_env`` are marked ``integration``
automatically (``pytest -m "not integration"`` runs the rest). Without the server environment
(``.venv-triton``) they are skipped with a hint, unless ``CI`` is set: then they fail, so CI
cannot go green by skipping them.
"""

from __future__ import annotations

import datetime
import functools
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from kserve_v2.testing import (
    TritonEnvironment,
    TritonEnvNotFoundError,
    TritonServer,
    find_triton_env,
)
from kserve_v2.testing.session import CRASH_LOG_WAIT, RESTART_ATTEMPTS, RestartLog, in_ci

MODELS_DIR = Path(__file__).resolve().parent / "models"
"""The test model repository."""

_INTEGRATION_FIXTURES = frozenset({"triton", "triton_factory", "triton_env"})


@functools.lru_cache(maxsize=1)
def _env_problem() -> str | None:
    """Why the server environment is unusable, or None; looked up once per session."""
    try:
        find_triton_env()
    except TritonEnvNotFoundError as exc:
        return str(exc)
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        if fixtures & _INTEGRATION_FIXTURES:
            item.add_marker(pytest.mark.integration)
    # KServe and MLServer tests need their own environments, which their fixtures check.
    needs_server = [
        item
        for item in items
        if item.get_closest_marker("integration")
        and not item.get_closest_marker("kserve")
        and not item.get_closest_marker("mlserver")
    ]
    if not needs_server or in_ci():
        return  # in CI the fixture fails instead, with the same message
    problem = _env_problem()
    if problem is not None:
        skip = pytest.mark.skip(reason=f"needs the Triton server environment: {problem}")
        for item in needs_server:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def triton_env() -> TritonEnvironment:
    """The server environment; fails in CI and skips elsewhere when it is missing."""
    try:
        return find_triton_env()
    except TritonEnvNotFoundError as exc:
        message = f"needs the Triton server environment: {exc}"
        if in_ci():
            pytest.fail(message, pytrace=False)
        pytest.skip(message)


@pytest.fixture(scope="session")
def triton(
    triton_env: TritonEnvironment, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[TritonServer]:
    """One server with every model of ``tests/models`` loaded, shared by the whole session.

    Its log goes to pytest's temporary directory (kept for the last few runs) so a failing
    run can be inspected afterwards.
    """
    log_file = tmp_path_factory.mktemp("triton") / "tritonserver.log"
    server = TritonServer(MODELS_DIR, env=triton_env.root, log_file=log_file)
    with server:
        _SESSION_SERVER.append(server)
        try:
            yield server
        finally:
            _SESSION_SERVER.clear()


# -- Triton 2.51's stream race ---------------------------------------------------------------
# Triton 2.51 has a race in its gRPC stream response writer (see TritonServer.known_crash), hit
# now and then by streams with requests for several models in flight, with either client: it
# aborts or segfaults, or, more rarely, the decoupled model's next send never returns and the
# model answers no stream again. That is no failure of the test that happened to run, but it
# would take the session's server, and every test after it, down. (Its third form, a response
# lost while the server runs on, leaves no trace to rerun by: a test that reads a decoupled
# model's responses and another model's from one stream sends the one request once the other
# is answered; see `answered` in tests/grpc/test_stream.py.) So a test that fails while
# the session server died *of this race*, or no longer answers a fresh decoupled stream
# request, is run once more on a restarted server. A server that died of anything else is not
# restarted, and a test that fails again fails. (conformance/conftest.py does the same for the
# conformance suite's own server; what both share is in kserve_v2.testing.session.)

_SESSION_SERVER: list[TritonServer] = []
#: Other servers whose death of the known race also earns the test that failed a rerun (the
#: ``triton_grpc_error`` tests' own server): their fixtures register them with :func:`watch`.
_WATCHED_SERVERS: list[TritonServer] = []


def watch(server: TritonServer) -> None:
    """Restart ``server`` and rerun the failed test when it died of Triton 2.51's known race."""
    _WATCHED_SERVERS.append(server)


def unwatch(server: TritonServer) -> None:
    _WATCHED_SERVERS.remove(server)


def _crashed_server(wait: float = 0.0) -> tuple[TritonServer, str] | None:
    """The session server or a watched one, with why, if it died (or is dying) of the race."""
    deadline = time.monotonic() + wait
    while True:
        for server in (*_SESSION_SERVER, *_WATCHED_SERVERS):
            if (why := server.known_crash()) is not None:
                return server, why  # _restart stops what is left of it
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.1)


def _wedged_server() -> TritonServer | None:
    """The session server if it runs but no longer completes a decoupled stream request."""
    if not _SESSION_SERVER or not _SESSION_SERVER[0].is_running():
        return None
    server = _SESSION_SERVER[0]
    import numpy as np

    from kserve_v2 import Client, KServeError

    probe = {"IN": np.zeros(1, np.int32), "REPEAT": np.ones(1, np.int32)}
    try:
        with (
            Client(f"grpc://{server.grpc_url}", timeout=10) as client,
            client.stream() as stream,
        ):
            stream.send("repeat_decoupled", probe).results(timeout=10)
    except KServeError:
        return server
    return None


_RESTARTS = RestartLog()


def _restart(server: TritonServer, why: str, item: pytest.Item) -> None:
    _RESTARTS.record(item.nodeid, why, server.log_path)
    server.stop()
    server.start()


def pytest_terminal_summary(terminalreporter: Any) -> None:
    _RESTARTS.summary(terminalreporter)


def _uses_triton(item: pytest.Item) -> bool:
    """Whether ``item`` may talk to the session Triton: through its fixtures, or through
    ``request.getfixturevalue`` (the compat programs), which only its marker shows."""
    names = set(getattr(item, "fixturenames", ()))
    return bool({"triton", "triton_factory"} & names) or (
        item.get_closest_marker("integration") is not None
    )


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> bool | None:
    if not _uses_triton(item):
        return None  # pytest's own protocol
    from _pytest.runner import runtestprotocol

    item.ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
    while (crashed := _crashed_server()) is not None:  # it died after an earlier test passed
        _restart(*crashed, item)
    reports = runtestprotocol(item, nextitem=nextitem, log=False)
    for _ in range(RESTART_ATTEMPTS - 1):
        if not any(report.failed for report in reports):
            break
        crashed = _crashed_server(wait=CRASH_LOG_WAIT)
        if crashed is None and (server := _wedged_server()) is not None:
            crashed = server, "Triton 2.51 stopped answering decoupled stream requests"
        if crashed is None:
            break  # failed for another reason: that is the test's result
        _restart(*crashed, item)
        item._initrequest()  # type: ignore[attr-defined]  # fresh fixtures for the rerun
        reports = runtestprotocol(item, nextitem=nextitem, log=False)
    for report in reports:
        item.ihook.pytest_runtest_logreport(report=report)
    item.ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
    return True


class TritonFactory:
    """Starts extra servers for a test session; :meth:`stop_all` ends them all."""

    def __init__(self, env: TritonEnvironment, log_dir: Path) -> None:
        self._env = env
        self._log_dir = log_dir
        self._servers: list[TritonServer] = []

    def start(
        self, model_repository: str | os.PathLike[str] = MODELS_DIR, **options: Any
    ) -> TritonServer:
        """Start a server (see :class:`TritonServer` for ``options``); stopping it early with
        ``server.stop()`` is allowed."""
        options.setdefault("env", self._env.root)
        options.setdefault("log_file", self._log_dir / f"tritonserver-{len(self._servers)}.log")
        server = TritonServer(model_repository, **options)
        self._servers.append(server)
        return server.start()

    def stop_all(self) -> None:
        servers, self._servers = self._servers, []
        for server in servers:
            server.stop()


@pytest.fixture(scope="session")
def triton_factory(
    triton_env: TritonEnvironment, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[TritonFactory]:
    """Start servers with other options: ``triton_factory.start(model_control_mode=...)``."""
    factory = TritonFactory(triton_env, tmp_path_factory.mktemp("triton-extra"))
    try:
        yield factory
    finally:
        factory.stop_all()


@dataclass(frozen=True)
class TLSCerts:
    """PEM files of a throw-away CA and the certificates it signed (valid for localhost and
    127.0.0.1)."""

    ca_cert: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path


@pytest.fixture(scope="session")
def tls_certs(tmp_path_factory: pytest.TempPathFactory) -> TLSCerts:
    """A CA plus a server and a client certificate, made with ``cryptography``."""
    pytest.importorskip("cryptography")
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    directory = tmp_path_factory.mktemp("tls")
    now = datetime.datetime.now(datetime.timezone.utc)

    def name(common_name: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])

    def write_key(key: ec.EllipticCurvePrivateKey, path: Path) -> Path:
        path.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
        return path

    def write_cert(cert: x509.Certificate, path: Path) -> Path:
        path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        return path

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(name("kserve-v2 test CA"))
        .issuer_name(name("kserve-v2 test CA"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )

    def leaf(
        common_name: str, usage: x509.ObjectIdentifier
    ) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
        key = ec.generate_private_key(ec.SECP256R1())
        alt_names = x509.SubjectAlternativeName(
            [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
        )
        cert = (
            x509.CertificateBuilder()
            .subject_name(name(common_name))
            .issuer_name(ca_cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(alt_names, critical=False)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
            .sign(ca_key, hashes.SHA256())
        )
        return cert, key

    server_cert, server_key = leaf("localhost", ExtendedKeyUsageOID.SERVER_AUTH)
    client_cert, client_key = leaf("kserve-v2 test client", ExtendedKeyUsageOID.CLIENT_AUTH)
    return TLSCerts(
        ca_cert=write_cert(ca_cert, directory / "ca.pem"),
        server_cert=write_cert(server_cert, directory / "server.pem"),
        server_key=write_key(server_key, directory / "server.key"),
        client_cert=write_cert(client_cert, directory / "client.pem"),
        client_key=write_key(client_key, directory / "client.key"),
    )
