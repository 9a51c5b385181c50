"""Fixtures of the interoperability tests: the same client tests against three servers.

* ``peer`` (session, parametrised): Triton (the ``triton`` fixture of ``tests/conftest.py``),
  KServe's Python model server (``kserve_server``) or MLServer (``mlserver_server``), each
  with the project's models (``tests/models``, ``tests/peers/kserve_models``,
  ``tests/peers/mlserver_models``), described by a :class:`Peer`: its addresses and what it
  supports, so a test skips what a server lacks and says why.
* ``protocol`` (``http``/``grpc``) and ``mode`` (``sync``/``async``): ``client`` is a
  :class:`Client` or :class:`AsyncClient` of that kind, with synchronous methods either way.

Each server's tests carry its marker (``-m kserve``, ``-m mlserver``; all are
``integration``). KServe and MLServer come from ``.venv-kserve`` and ``.venv-mlserver``
(``bash scripts/setup.sh``); without them their tests skip, or fail when ``CI`` is set.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from kserve_v2 import AsyncClient, Client
from kserve_v2.testing import KServeServer, MLServerServer, PeerEnvNotFoundError, PeerServer
from kserve_v2.testing.session import in_ci

PEERS_DIR = Path(__file__).resolve().parent.parent / "peers"
KSERVE_SCRIPT = PEERS_DIR / "kserve_models" / "server.py"
MLSERVER_MODELS = PEERS_DIR / "mlserver_models"

# The datatypes of the protocol every server has an identity model for; Triton also has BF16.
COMMON_DATATYPES = (
    "BOOL",
    "UINT8",
    "UINT16",
    "UINT32",
    "UINT64",
    "INT8",
    "INT16",
    "INT32",
    "INT64",
    "FP16",
    "FP32",
    "FP64",
    "BYTES",
)


@dataclass(frozen=True)
class Peer:
    """A server under test: where it listens and what it supports.

    Each ``False`` feature comes with the reason a test skips it for, in ``lacks``.
    """

    name: str
    """``"triton"``, ``"kserve"`` or ``"mlserver"``: the name its server metadata gives."""
    version: str
    http_url: str
    grpc_url: str
    datatypes: tuple[str, ...]
    binary_extension: bool
    """Implements Triton's binary tensor data extension over HTTP."""
    advertises_binary: bool
    """Lists ``binary_tensor_data`` in its server metadata."""
    json_half_precision: bool
    """Takes FP16 as JSON numbers."""
    gzip_requests: bool
    """Decompresses gzip request bodies over HTTP (``Content-Encoding: gzip``)."""
    streaming: bool
    """Serves gRPC ``ModelStreamInfer``."""
    response_parameters: bool
    """Its ``params_echo`` model returns the request's parameters as response parameters."""
    lacks: dict[str, str]
    """Why a feature is missing, by feature name."""

    def url(self, protocol: str) -> str:
        return self.http_url if protocol == "http" else self.grpc_url

    def skip_unless(self, feature: str) -> None:
        """Skip the test when the server lacks ``feature`` (a field name above)."""
        if not getattr(self, feature):
            pytest.skip(f"{self.name}: {self.lacks[feature]}")


def _start(server: PeerServer) -> PeerServer:
    try:
        server.find_env()
    except PeerEnvNotFoundError as exc:
        message = f"needs the {server.name} server environment: {exc}"
        if in_ci():
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    return server.start()


@pytest.fixture(scope="session")
def kserve_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KServeServer]:
    """KServe's model server with the models of ``tests/peers/kserve_models/server.py``."""
    log_file = tmp_path_factory.mktemp("kserve") / "server.log"
    server = KServeServer(KSERVE_SCRIPT, log_file=log_file)
    _start(server)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def mlserver_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MLServerServer]:
    """MLServer with the models of ``tests/peers/mlserver_models``."""
    log_file = tmp_path_factory.mktemp("mlserver") / "server.log"
    server = MLServerServer(MLSERVER_MODELS, log_file=log_file)
    _start(server)
    try:
        yield server
    finally:
        server.stop()


def _triton(request: pytest.FixtureRequest) -> Peer:
    server = request.getfixturevalue("triton")
    return Peer(
        name="triton",
        version="2.51.0",
        http_url=server.http_url,
        grpc_url=f"grpc://{server.grpc_url}",
        datatypes=(*COMMON_DATATYPES, "BF16"),
        binary_extension=True,
        advertises_binary=True,
        json_half_precision=False,
        gzip_requests=True,
        streaming=True,
        response_parameters=False,
        lacks={
            "json_half_precision": "Triton refuses FP16/BF16 as JSON ('receiving FP16 data "
            "via JSON is not supported')",
            "response_parameters": "a Python-backend model cannot set response parameters",
        },
    )


def _kserve(request: pytest.FixtureRequest) -> Peer:
    server = request.getfixturevalue("kserve_server")
    return Peer(
        name="kserve",
        version="0.21.0",
        http_url=server.http_url,
        grpc_url=f"grpc://{server.grpc_url}",
        datatypes=COMMON_DATATYPES,
        binary_extension=True,
        advertises_binary=False,
        json_half_precision=False,
        gzip_requests=False,
        streaming=False,
        response_parameters=True,
        lacks={
            "advertises_binary": "KServe implements the binary extension but lists only "
            "'model_repository_extension' in its metadata",
            "json_half_precision": "KServe refuses FP16 as JSON ('Sending FP16 data via JSON "
            "is not supported')",
            "gzip_requests": "KServe's FastAPI app does not decompress request bodies (400 'There "
            "was an error parsing the body')",
            "streaming": "KServe's model server has no ModelStreamInfer (UNIMPLEMENTED)",
        },
    )


def _mlserver(request: pytest.FixtureRequest) -> Peer:
    server = request.getfixturevalue("mlserver_server")
    return Peer(
        name="mlserver",
        version="1.7.1",
        http_url=server.http_url,
        grpc_url=f"grpc://{server.grpc_url}",
        datatypes=COMMON_DATATYPES,
        binary_extension=False,
        advertises_binary=False,
        json_half_precision=True,
        gzip_requests=True,
        streaming=True,
        response_parameters=True,
        lacks={
            "binary_extension": "MLServer does not implement Triton's binary tensor data "
            "extension over HTTP (and lists no extensions)",
            "advertises_binary": "MLServer lists no extensions",
        },
    )


_PEERS: dict[str, Callable[[pytest.FixtureRequest], Peer]] = {
    "triton": _triton,
    "kserve": _kserve,
    "mlserver": _mlserver,
}


@pytest.fixture(
    scope="session",
    params=[
        pytest.param("triton", marks=pytest.mark.integration),
        pytest.param("kserve", marks=[pytest.mark.integration, pytest.mark.kserve]),
        pytest.param("mlserver", marks=[pytest.mark.integration, pytest.mark.mlserver]),
    ],
)
def peer(request: pytest.FixtureRequest) -> Peer:
    """Each server in turn (started once per session, on first use)."""
    return _PEERS[request.param](request)


@pytest.fixture(params=["http", "grpc"])
def protocol(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(params=["sync", "async"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


class ClientUnderTest:
    """A :class:`Client` or :class:`AsyncClient` with synchronous methods: an async client's
    coroutines run to completion on an event loop the wrapper owns (made before the client, so
    the client belongs to it)."""

    def __init__(self, mode: str, url: str, **options: Any) -> None:
        self.mode = mode
        self.url = url
        self._loop = asyncio.new_event_loop() if mode == "async" else None
        try:
            if self._loop is None:
                self.client: Any = Client(url, **options)
            else:
                self.client = self._loop.run_until_complete(self._open_async(url, options))
        except BaseException:
            if self._loop is not None:
                self._loop.close()
            raise

    @staticmethod
    async def _open_async(url: str, options: dict[str, Any]) -> AsyncClient:
        return AsyncClient(url, **options)

    def run(self, value: Any) -> Any:
        if inspect.isawaitable(value):
            assert self._loop is not None
            return self._loop.run_until_complete(value)
        return value

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or name == "client":
            raise AttributeError(name)
        attribute = getattr(self.client, name)
        if not callable(attribute):
            return attribute
        return lambda *args, **kwargs: self.run(attribute(*args, **kwargs))

    def concurrently(self, calls: Sequence[Callable[[], Any]]) -> list[Any]:
        """Run ``calls`` at once: as asyncio tasks for an async client, in threads (one each)
        for a sync one; the results in order, or the first exception raised."""
        if self._loop is not None:

            async def run_all() -> list[Any]:
                return list(await asyncio.gather(*(_awaited(call()) for call in calls)))

            return list(self._loop.run_until_complete(run_all()))
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=len(calls)) as pool:
            return [f.result() for f in [pool.submit(call) for call in calls]]

    def close(self) -> None:
        if self._loop is None:
            self.client.close()
            return
        try:
            self._loop.run_until_complete(self.client.aclose())
            self._loop.run_until_complete(self._loop.shutdown_asyncgens())
        finally:
            self._loop.close()


async def _awaited(value: Awaitable[Any] | Any) -> Any:
    return await value if inspect.isawaitable(value) else value


@pytest.fixture
def connect(peer: Peer, protocol: str, mode: str) -> Iterator[Callable[..., ClientUnderTest]]:
    """``connect(**client_options)``: a client of the test's kind to the test's server; all are
    closed at the end of the test."""
    made: list[ClientUnderTest] = []

    def connect(**options: Any) -> ClientUnderTest:
        options.setdefault("timeout", 60)
        client = ClientUnderTest(mode, peer.url(protocol), **options)
        made.append(client)
        return client

    yield connect
    for client in reversed(made):
        client.close()


@pytest.fixture
def client(connect: Callable[..., ClientUnderTest]) -> ClientUnderTest:
    return connect()
