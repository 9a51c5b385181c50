"""grpcs:// for real: Triton serving gRPC over TLS and mutual TLS with throw-away certificates
(``tls_certs``); the client trusts the test CA or fails with a :class:`TransportError`."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from kserve_v2 import AsyncClient, Client, ServerError, TLSOptions, TransportError
from kserve_v2.testing import TritonServer
from tests.grpc.conftest import make_repository

grpc = pytest.importorskip("grpc")

DATA = {"INPUT0": np.arange(6, dtype=np.float32).reshape(2, 3)}


@pytest.fixture(scope="module")
def repository(tmp_path_factory: pytest.TempPathFactory) -> Any:
    return make_repository(tmp_path_factory.mktemp("tls-repo"), "identity_fp32")


@pytest.fixture(scope="module")
def tls_server(triton_factory: Any, tls_certs: Any, repository: Any) -> Iterator[TritonServer]:
    server = triton_factory.start(
        repository,
        grpc_use_ssl=True,
        grpc_server_cert=tls_certs.server_cert,
        grpc_server_key=tls_certs.server_key,
    )
    yield server
    server.stop()


@pytest.fixture(scope="module")
def mtls_server(triton_factory: Any, tls_certs: Any, repository: Any) -> Iterator[TritonServer]:
    server = triton_factory.start(
        repository,
        grpc_use_ssl=True,
        grpc_use_ssl_mutual=True,
        grpc_server_cert=tls_certs.server_cert,
        grpc_server_key=tls_certs.server_key,
        grpc_root_cert=tls_certs.ca_cert,
    )
    yield server
    server.stop()


def roundtrip(client: Client) -> None:
    result = client.infer("identity_fp32", DATA)
    assert np.array_equal(result.as_numpy("OUTPUT0"), DATA["INPUT0"])


def test_tls_with_the_ca(grpc_transport: str, tls_server: TritonServer, tls_certs: Any) -> None:
    tls = TLSOptions(ca_file=str(tls_certs.ca_cert))
    with Client(f"grpcs://{tls_server.grpc_url}", grpc_transport=grpc_transport, tls=tls) as client:
        assert client.is_server_live()
        roundtrip(client)
        with client.stream() as stream:
            assert len(stream.send("identity_fp32", DATA).results()) == 1
    with Client(
        f"grpcs://localhost:{tls_server.grpc_port}", grpc_transport=grpc_transport, tls=tls
    ) as client:
        roundtrip(client)


# 4 MiB: sending waits for flow control while the stream's reader reads, both on one TLS socket.
BIG = {"INPUT0": np.arange(1 << 20, dtype=np.float32).reshape(1024, 1024)}


def test_tls_stream_with_large_requests(
    tls_server: TritonServer, tls_certs: Any, grpc_transport: str
) -> None:
    tls = TLSOptions(ca_file=str(tls_certs.ca_cert))
    url = f"grpcs://{tls_server.grpc_url}"
    with Client(url, tls=tls, grpc_transport=grpc_transport) as client, client.stream() as stream:
        requests = [stream.send("identity_fp32", BIG) for _ in range(3)]
        for request in requests:
            (result,) = request.results(timeout=60)
            assert np.array_equal(result.as_numpy("OUTPUT0"), BIG["INPUT0"])


async def test_tls_stream_async(
    tls_server: TritonServer, tls_certs: Any, grpc_transport: str
) -> None:
    tls = TLSOptions(ca_file=str(tls_certs.ca_cert))
    url = f"grpcs://{tls_server.grpc_url}"
    async with (
        AsyncClient(url, tls=tls, grpc_transport=grpc_transport) as client,
        client.stream() as stream,
    ):
        small = await stream.send("identity_fp32", DATA)
        big = await stream.send("identity_fp32", BIG)
        assert len(await small.results(timeout=60)) == 1
        (result,) = await big.results(timeout=60)
        assert np.array_equal(result.as_numpy("OUTPUT0"), BIG["INPUT0"])


def test_tls_without_the_ca_is_refused(grpc_transport: str, tls_server: TritonServer) -> None:
    with Client(
        f"grpcs://{tls_server.grpc_url}", grpc_transport=grpc_transport, timeout=10
    ) as client:  # system roots only
        with pytest.raises(TransportError) as info:
            client.is_server_live()
        assert not isinstance(info.value, ServerError)


def test_plain_text_client_against_a_tls_server_fails(
    grpc_transport: str, tls_server: TritonServer
) -> None:
    with (
        Client(
            f"grpc://{tls_server.grpc_url}", grpc_transport=grpc_transport, timeout=10
        ) as client,
        pytest.raises(TransportError),
    ):
        client.server_metadata()


def test_server_hostname(grpc_transport: str, tls_server: TritonServer, tls_certs: Any) -> None:
    url = f"grpcs://{tls_server.grpc_url}"
    good = TLSOptions(ca_file=str(tls_certs.ca_cert), server_hostname="localhost")
    with Client(url, grpc_transport=grpc_transport, tls=good) as client:
        roundtrip(client)
    bad = TLSOptions(ca_file=str(tls_certs.ca_cert), server_hostname="not-the-server.example")
    with (
        Client(url, grpc_transport=grpc_transport, tls=bad, timeout=10) as client,
        pytest.raises(TransportError),
    ):
        client.is_server_live()


def test_ready_credentials(tls_server: TritonServer, tls_certs: Any) -> None:
    credentials = grpc.ssl_channel_credentials(root_certificates=tls_certs.ca_cert.read_bytes())
    url = f"grpcs://{tls_server.grpc_url}"
    with Client(url, grpc_transport="grpcio", grpc_credentials=credentials) as client:
        roundtrip(client)


async def test_tls_async(grpc_transport: str, tls_server: TritonServer, tls_certs: Any) -> None:
    tls = TLSOptions(ca_file=str(tls_certs.ca_cert))
    async with AsyncClient(
        f"grpcs://{tls_server.grpc_url}", grpc_transport=grpc_transport, tls=tls
    ) as client:
        result = await client.infer("identity_fp32", DATA)
        assert result.as_numpy("OUTPUT0").shape == (2, 3)
    async with AsyncClient(
        f"grpcs://{tls_server.grpc_url}", grpc_transport=grpc_transport, timeout=10
    ) as client:
        with pytest.raises(TransportError):
            await client.is_server_live()


def test_mutual_tls_needs_the_client_certificate(
    grpc_transport: str, mtls_server: TritonServer, tls_certs: Any
) -> None:
    url = f"grpcs://{mtls_server.grpc_url}"
    with_cert = TLSOptions(
        ca_file=str(tls_certs.ca_cert),
        cert_file=str(tls_certs.client_cert),
        key_file=str(tls_certs.client_key),
    )
    with Client(url, grpc_transport=grpc_transport, tls=with_cert) as client:
        roundtrip(client)
    without_cert = TLSOptions(ca_file=str(tls_certs.ca_cert))
    with (
        Client(url, grpc_transport=grpc_transport, tls=without_cert, timeout=10) as client,
        pytest.raises(TransportError),
    ):
        client.is_server_live()


async def test_mutual_tls_async(
    grpc_transport: str, mtls_server: TritonServer, tls_certs: Any
) -> None:
    tls = TLSOptions(
        ca_file=str(tls_certs.ca_cert),
        cert_file=str(tls_certs.client_cert),
        key_file=str(tls_certs.client_key),
    )
    async with AsyncClient(
        f"grpcs://{mtls_server.grpc_url}", grpc_transport=grpc_transport, tls=tls
    ) as client:
        assert await client.is_server_ready()
