"""Transports: move one HTTP exchange. See :mod:`kserve_v2.interfaces` for the contract."""

from kserve_v2.datatypes import BytesLike
from kserve_v2.interfaces import (
    AsyncStreamingResponse,
    AsyncTransport,
    HTTPRequest,
    HTTPResponse,
    StreamingResponse,
    Transport,
)
from kserve_v2.transport.aio import AsyncHTTPTransport
from kserve_v2.transport.stdlib import HTTPTransport

__all__ = [
    "AsyncHTTPTransport",
    "AsyncStreamingResponse",
    "AsyncTransport",
    "BytesLike",
    "HTTPRequest",
    "HTTPResponse",
    "HTTPTransport",
    "StreamingResponse",
    "Transport",
]
