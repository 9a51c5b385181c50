"""kserve-v2: a client for the KServe v2 / Open Inference Protocol (HTTP/REST and gRPC)."""

from kserve_v2.errors import (
    DeadlineExceededError,
    InvalidInputError,
    KServeError,
    MissingDependencyError,
    ProtocolError,
    ServerError,
    TransportError,
)

__version__ = "0.1.0"

__all__ = [
    "DeadlineExceededError",
    "InvalidInputError",
    "KServeError",
    "MissingDependencyError",
    "ProtocolError",
    "ServerError",
    "TransportError",
    "__version__",
]
