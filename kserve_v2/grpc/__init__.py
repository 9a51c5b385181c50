"""gRPC support: channels, the gRPC backend of the clients, and bidirectional streams.

``Client("grpc://host:8001")`` and ``AsyncClient(...)`` use this package; the modules are

* ``channel``: grpcio channels (TLS, keepalive, options, compression) and error translation;
* ``protocol``: the calls of every RPC, without I/O (the twin of ``client/http.py``);
* ``codec`` and ``extensions``: messages <-> value objects and REST-shaped dicts;
* ``stream``: ``client.stream()`` (``ModelStreamInfer``): ``stream_aio``, the source of the
  generated ``stream_sync``, and ``routing``, what they share without I/O;
* ``wire``: the hand-written infer message codec; ``_generated``: grpcio-tools stubs.

Importing this package imports neither grpcio nor protobuf; they are loaded when a gRPC
client is built.

Example::

    from kserve_v2 import Client
    from kserve_v2.grpc import GRPCKeepAlive

    client = Client("grpc://localhost:8001", grpc_keepalive=GRPCKeepAlive(time_ms=30_000))
"""

from kserve_v2.grpc.stream import AsyncGRPCStream, AsyncStreamRequest, GRPCStream, StreamRequest
from kserve_v2.options import GRPCKeepAlive

__all__ = ["AsyncGRPCStream", "AsyncStreamRequest", "GRPCKeepAlive", "GRPCStream", "StreamRequest"]
