"""kserve-v2: a client for the KServe v2 / Open Inference Protocol (HTTP/REST and gRPC),
with Triton's protocol extensions.

Example::

    import numpy as np
    import kserve_v2

    with kserve_v2.Client("http://localhost:8000") as client:     # or "grpc://localhost:8001"
        result = client.infer("simple", {
            "INPUT0": np.arange(16, dtype=np.int32).reshape(1, 16),
            "INPUT1": np.ones((1, 16), dtype=np.int32),
        })
        print(result.as_numpy("OUTPUT0"))

Importing the package loads the error classes and the version only. Every other name is
imported when first read: the value objects (and with them numpy), and the clients (and with
them asyncio, ssl, the transports and the protocol engines). A program pays for what it uses,
and ``except kserve_v2.ServerError`` costs nothing to set up.
"""

from typing import TYPE_CHECKING

from kserve_v2.errors import (
    DeadlineExceededError,
    InvalidInputError,
    KServeError,
    MissingDependencyError,
    ProtocolError,
    ServerError,
    TransportError,
)
from kserve_v2.version import __version__

if TYPE_CHECKING:
    from kserve_v2.client.aio import AsyncClient
    from kserve_v2.client.sync import Client
    from kserve_v2.datatypes import (
        Datatype,
        datatype_of,
        deserialize_bytes_elements,
        numpy_dtype,
        serialize_bytes_elements,
    )
    from kserve_v2.hooks import WireMessage
    from kserve_v2.messages import (
        InferRequest,
        InferResult,
        ModelMetadata,
        OutputTensor,
        RepositoryModel,
        ServerMetadata,
        TensorMetadata,
    )
    from kserve_v2.options import GRPCOptions, TLSOptions
    from kserve_v2.retry import RetryPolicy
    from kserve_v2.tensors import InferInput, RequestedOutput, SharedMemoryPlacement
else:
    from kserve_v2._lazy import lazy_exports

    __getattr__, __dir__ = lazy_exports(
        globals(),
        {
            "AsyncClient": "kserve_v2.client.aio",
            "Client": "kserve_v2.client.sync",
            **dict.fromkeys(
                (
                    "Datatype",
                    "datatype_of",
                    "deserialize_bytes_elements",
                    "numpy_dtype",
                    "serialize_bytes_elements",
                ),
                "kserve_v2.datatypes",
            ),
            "WireMessage": "kserve_v2.hooks",
            **dict.fromkeys(
                (
                    "InferRequest",
                    "InferResult",
                    "ModelMetadata",
                    "OutputTensor",
                    "RepositoryModel",
                    "ServerMetadata",
                    "TensorMetadata",
                ),
                "kserve_v2.messages",
            ),
            "GRPCOptions": "kserve_v2.options",
            "TLSOptions": "kserve_v2.options",
            "RetryPolicy": "kserve_v2.retry",
            **dict.fromkeys(
                ("InferInput", "RequestedOutput", "SharedMemoryPlacement"), "kserve_v2.tensors"
            ),
        },
    )

__all__ = [
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
]
