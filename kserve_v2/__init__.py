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
"""

from kserve_v2.client import AsyncClient, Client, WireMessage
from kserve_v2.datatypes import Datatype
from kserve_v2.errors import (
    DeadlineExceededError,
    InvalidInputError,
    KServeError,
    MissingDependencyError,
    ProtocolError,
    ServerError,
    TransportError,
)
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
from kserve_v2.tensors import InferInput, RequestedOutput, SharedMemoryPlacement
from kserve_v2.version import __version__

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
    "ServerError",
    "ServerMetadata",
    "SharedMemoryPlacement",
    "TLSOptions",
    "TensorMetadata",
    "TransportError",
    "WireMessage",
    "__version__",
]
