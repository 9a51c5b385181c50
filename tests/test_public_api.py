"""The public API is pinned: a change to it must be deliberate (and show up in this diff)."""

from __future__ import annotations

import subprocess
import sys

import kserve_v2

PUBLIC_API = {
    "AsyncClient",
    "Client",
    "Datatype",
    "DeadlineExceededError",
    "GRPCOptions",
    "InferInput",
    "InferRequest",
    "InferResult",
    "InvalidInputError",
    "KServeError",
    "MissingDependencyError",
    "ModelMetadata",
    "OutputTensor",
    "ProtocolError",
    "RepositoryModel",
    "RequestedOutput",
    "RetryPolicy",
    "ServerError",
    "ServerMetadata",
    "SharedMemoryPlacement",
    "TLSOptions",
    "TensorMetadata",
    "TransportError",
    "WireMessage",
    "__version__",
    "datatype_of",
    "deserialize_bytes_elements",
    "numpy_dtype",
    "serialize_bytes_elements",
}


def test_all_is_pinned() -> None:
    assert set(kserve_v2.__all__) == PUBLIC_API


def test_every_exported_name_exists() -> None:
    for name in kserve_v2.__all__:
        assert hasattr(kserve_v2, name), name


def test_exported_errors_form_one_tree() -> None:
    errors = [getattr(kserve_v2, n) for n in kserve_v2.__all__ if n.endswith("Error")]
    assert errors
    for error in errors:
        assert issubclass(error, kserve_v2.KServeError)


def test_import_pulls_in_no_optional_dependency() -> None:
    """numpy is the only runtime dependency: gRPC, httpx, ml_dtypes, CUDA libraries and the
    incumbent client are imported only when a feature needs them."""
    code = (
        "import sys, kserve_v2, kserve_v2.shm, kserve_v2.testing\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in "
        "{'grpc', 'google', 'httpx', 'ml_dtypes', 'cupy', 'torch', 'tritonclient'})\n"
        "print(','.join(bad))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out == ""
