"""Transports: move one HTTP exchange. See :mod:`kserve_v2.interfaces` for the contract.

The modules: ``stdlib`` (:class:`HTTPTransport`, HTTP/1.1 on blocking sockets), ``aio``
(:class:`AsyncHTTPTransport`, HTTP/1.1 on asyncio), ``httpx`` (both over httpx), ``native`` and
``native_stream`` (gRPC over our own HTTP/2), ``grpcio`` (gRPC over grpcio), and ``sockets``
(the socket, TLS and deadline helpers they share).

The names below are loaded when first read, so importing one transport module (which runs this
``__init__`` first) does not import the others, nor asyncio or ssl for a transport that needs
neither.

Example::

    from kserve_v2 import Client
    from kserve_v2.transport import HTTPTransport

    client = Client("http://localhost:8000", transport=HTTPTransport(max_connections=4))
"""

from typing import TYPE_CHECKING

from kserve_v2.datatypes import BytesLike

if TYPE_CHECKING:
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
else:
    from kserve_v2._lazy import lazy_exports

    __getattr__, __dir__ = lazy_exports(
        globals(),
        {
            "AsyncHTTPTransport": "kserve_v2.transport.aio",
            "AsyncStreamingResponse": "kserve_v2.interfaces",
            "AsyncTransport": "kserve_v2.interfaces",
            "HTTPRequest": "kserve_v2.interfaces",
            "HTTPResponse": "kserve_v2.interfaces",
            "HTTPTransport": "kserve_v2.transport.stdlib",
            "StreamingResponse": "kserve_v2.interfaces",
            "Transport": "kserve_v2.interfaces",
        },
    )

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
