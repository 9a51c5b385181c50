"""Fixtures of the gRPC client tests: clients on the session server, small model repositories
for the extra servers (each model costs a Python-backend process at start-up), REST oracle."""

from __future__ import annotations

import asyncio
import json
import shutil
import threading
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kserve_v2 import AsyncClient, Client
from kserve_v2.testing import TritonServer
from tests.conftest import MODELS_DIR
from tests.loops import loop_factories

#: Name prefix of the stream reader threads (none may outlive its stream).
READER_THREAD = "kserve-v2 stream reader"


def make_repository(root: Path, *models: str) -> Path:
    """A model repository under ``root`` holding copies of the named test models."""
    root.mkdir(parents=True, exist_ok=True)
    for model in models:
        shutil.copytree(MODELS_DIR / model, root / model, dirs_exist_ok=True)
    return root


def rest_json(server: TritonServer, path: str, body: bytes | None = None) -> Any:
    """GET (or POST ``body`` to) a REST endpoint of ``server``: the oracle for REST shapes."""
    request = urllib.request.Request(server.http_url + path, data=body)
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(request, timeout=30) as response:
        return json.loads(response.read() or b"null")


def reader_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith(READER_THREAD)]


@pytest.fixture
def grpc_url(triton: TritonServer) -> str:
    return f"grpc://{triton.grpc_url}"


#: Both gRPC transports run every client test: the native HTTP/2 client and grpcio.
GRPC_TRANSPORTS = ("native", "grpcio")


@pytest.fixture(params=GRPC_TRANSPORTS)
def grpc_transport(request: pytest.FixtureRequest) -> str:
    transport: str = request.param
    return transport


@pytest.fixture
def client(grpc_url: str, grpc_transport: str) -> Iterator[Client]:
    with Client(grpc_url, grpc_transport=grpc_transport) as c:
        yield c
    assert not reader_threads(), "a stream reader thread outlived its client"


@pytest.fixture
async def aclient(grpc_url: str, grpc_transport: str) -> AsyncIterator[AsyncClient]:
    async with AsyncClient(grpc_url, grpc_transport=grpc_transport) as c:
        yield c


@pytest.hookimpl(optionalhook=True)
def pytest_asyncio_loop_factories(
    config: pytest.Config, item: pytest.Item
) -> dict[str, Callable[[], asyncio.AbstractEventLoop]]:
    """``async def`` tests here run on asyncio's loop and on uvloop (see tests/loops.py)."""
    return loop_factories()
