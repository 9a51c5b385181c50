"""gRPC: the gRPC backend of the clients, its sans-IO engine, and bidirectional streams.

``Client("grpc://host:8001")`` and ``AsyncClient(...)`` use this package. Its modules, by layer
(see ``tests/test_layers.py``):

* engines, without I/O: ``wire`` (the hand-written protobuf codec of the infer messages),
  ``codec`` (messages <-> value objects), ``extensions`` (Triton's extension messages <->
  REST-shaped dicts), ``framing`` (gRPC over HTTP/2: headers, message framing, trailers),
  ``config`` (channel settings), ``status`` (status codes), and ``_generated`` (the
  grpcio-tools stubs, for grpcio and the protobuf fallback);
* backends: ``backend`` (:class:`~kserve_v2.grpc.backend.GRPCBackend`, every RPC's calls)
  and ``stream`` (``client.stream()``, ``ModelStreamInfer``): ``stream_aio`` is the source of
  the generated ``stream_sync``, and ``routing`` what they share without I/O.

The channels that move the bytes are transports: :mod:`kserve_v2.transport.native` (HTTP/2 of
our own) and :mod:`kserve_v2.transport.grpcio`.

Importing this package imports neither grpcio nor protobuf nor the streams: the stream classes
are loaded when first read, grpcio when a grpcio channel is built.

Example::

    from kserve_v2 import Client
    from kserve_v2.grpc import GRPCKeepAlive

    client = Client("grpc://localhost:8001", grpc_keepalive=GRPCKeepAlive(time_ms=30_000))
"""

from typing import TYPE_CHECKING

from kserve_v2.options import GRPCKeepAlive, GRPCOptions

if TYPE_CHECKING:
    from kserve_v2.grpc.stream import (
        AsyncGRPCStream,
        AsyncStreamRequest,
        GRPCStream,
        StreamRequest,
    )
else:
    from kserve_v2._lazy import lazy_exports

    __getattr__, __dir__ = lazy_exports(
        globals(),
        dict.fromkeys(
            ("AsyncGRPCStream", "AsyncStreamRequest", "GRPCStream", "StreamRequest"),
            "kserve_v2.grpc.stream",
        ),
    )

__all__ = [
    "AsyncGRPCStream",
    "AsyncStreamRequest",
    "GRPCKeepAlive",
    "GRPCOptions",
    "GRPCStream",
    "StreamRequest",
]
