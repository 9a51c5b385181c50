"""``import kserve_v2`` is cheap: what costs import time loads when first used (PEP 562).

Each check runs in a fresh interpreter (``sys.modules`` of this one holds everything the other
tests imported). ``benchmarks/import_time.py`` measures the time itself.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

#: Modules that ``import kserve_v2`` must leave unimported, each with why it is costly.
NOT_ON_IMPORT = {
    "asyncio": "the event loop machinery: only AsyncClient and the async transports need it",
    "ssl": "OpenSSL bindings: only https/grpcs connections need them",
    "kserve_v2.shm.cuda": "the CUDA bindings: only CUDA shared-memory regions need them",
    "grpc": "grpcio, an optional extra",
    "google.protobuf": "protobuf, an optional extra",
    "httpx": "an optional extra",
    "kserve_v2.client": "the clients pull in the transports and the protocol engines",
}


def run(code: str) -> str:
    return subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()


def test_import_leaves_the_costly_modules_out() -> None:
    loaded = run(
        "import sys, kserve_v2\n"
        f"print(','.join(m for m in {sorted(NOT_ON_IMPORT)!r} if m in sys.modules))"
    )
    assert loaded == "", {name: NOT_ON_IMPORT[name] for name in loaded.split(",")}


def test_importing_a_subpackage_leaves_them_out_too() -> None:
    loaded = run(
        "import sys, kserve_v2.grpc, kserve_v2.shm, kserve_v2.transport, kserve_v2.h2.frames\n"
        "print(','.join(m for m in ('asyncio', 'ssl', 'kserve_v2.shm.cuda', 'grpc', "
        "'kserve_v2.grpc.stream', 'kserve_v2.transport.aio') if m in sys.modules))"
    )
    assert loaded == ""


@pytest.mark.parametrize(
    "statement",
    [
        "import kserve_v2; kserve_v2.Client; kserve_v2.AsyncClient",
        "from kserve_v2 import AsyncClient, Client, InferInput, ServerError, WireMessage",
        "from kserve_v2.grpc import AsyncGRPCStream, GRPCKeepAlive, GRPCStream, StreamRequest",
        "from kserve_v2.grpc import codec, framing",  # submodules, not lazy names
        "from kserve_v2.transport import AsyncHTTPTransport, HTTPRequest, HTTPTransport",
        "from kserve_v2.shm import CudaSharedMemoryRegion, SystemSharedMemoryRegion",
        "from kserve_v2.shm import SharedMemoryRegion, is_cuda_available",
    ],
)
def test_lazy_names_still_import(statement: str) -> None:
    run(statement)


def test_lazy_names_are_the_defining_modules_objects() -> None:
    import kserve_v2
    import kserve_v2.grpc
    import kserve_v2.shm
    import kserve_v2.transport
    from kserve_v2.client.aio import AsyncClient
    from kserve_v2.client.sync import Client
    from kserve_v2.grpc.stream import GRPCStream
    from kserve_v2.interfaces import Transport
    from kserve_v2.shm.cuda import CudaSharedMemoryRegion
    from kserve_v2.transport.stdlib import HTTPTransport

    assert kserve_v2.Client is Client
    assert kserve_v2.AsyncClient is AsyncClient
    assert kserve_v2.grpc.GRPCStream is GRPCStream
    assert kserve_v2.transport.HTTPTransport is HTTPTransport
    assert kserve_v2.transport.Transport is Transport
    assert kserve_v2.shm.CudaSharedMemoryRegion is CudaSharedMemoryRegion


@pytest.mark.parametrize(
    "package", ["kserve_v2", "kserve_v2.grpc", "kserve_v2.shm", "kserve_v2.transport"]
)
def test_all_and_dir_list_the_lazy_names(package: str) -> None:
    module = __import__(package, fromlist=["__all__"])
    assert set(module.__all__) <= set(dir(module))
    for name in module.__all__:
        assert getattr(module, name) is not None, name
    with pytest.raises(AttributeError, match="has no attribute 'Missing'"):
        _ = module.Missing
