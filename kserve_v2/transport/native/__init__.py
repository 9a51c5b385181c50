"""The native gRPC transport: gRPC over the library's own HTTP/2 client, no grpcio.

grpcio's Python call path costs more client CPU than everything else in a small infer
(about 240 µs per call on the benchmark machine, where tritonclient's whole request costs
about 320 µs). These channels speak gRPC over HTTP/2 directly on sockets, with the sans-IO
pieces doing the work: :mod:`kserve_v2.h2.connection` (HTTP/2), :mod:`kserve_v2.h2.hpack`
and :mod:`kserve_v2.grpc.framing` (the gRPC framing). They move bytes exactly like
:class:`~kserve_v2.transport.grpcio.GRPCChannel` (``call_unary``, ``open_stream``), so the
protocol layer and the codecs do not know which transport runs them.

* :class:`NativeGRPCChannel` (sync) keeps a pool of connections and runs one call at a time
  on each (no reader thread: the calling thread reads its own answer). Threads calling
  at once get connections of their own.
* :class:`AsyncNativeGRPCChannel` (asyncio) multiplexes concurrent calls as HTTP/2 streams
  over one connection per event loop, opening another only when the server's
  ``MAX_CONCURRENT_STREAMS`` is reached.

Both send large requests as frames that point into the caller's buffer (no copy), receive
into one buffer per message, honour the server's flow-control windows, answer PINGs and
SETTINGS, follow GOAWAY, and map statuses to the same errors as the grpcio channel. A call
is sent again (once, on a new connection) only when HTTP/2 says the server did not process
it: RST_STREAM REFUSED_STREAM, or a stream above GOAWAY's last-stream-id; a pooled connection
is checked before a request is written on it, and a call whose connection is lost after
that fails (the server may have run it). A client-side deadline is also sent as
``grpc-timeout``; when it expires the stream is reset (``RST_STREAM CANCEL``).

TLS uses the standard ``ssl`` module with ALPN ``h2`` (gRPC servers require it).

The modules, each importing only those before it:

* :mod:`~kserve_v2.transport.native.connection`: the sync and async connections, message
  framing, the channel settings calls share, the retry signal, the TLS context;
* :mod:`~kserve_v2.transport.native.stream`: bidirectional-streaming calls;
* :mod:`~kserve_v2.transport.native.channel`: the channels (unary calls, ``open_stream``).
"""

from kserve_v2.transport.native.channel import AsyncNativeGRPCChannel, NativeGRPCChannel
from kserve_v2.transport.native.connection import native_ssl_context
from kserve_v2.transport.native.stream import AsyncNativeStreamCall, NativeStreamCall

__all__ = [
    "AsyncNativeGRPCChannel",
    "AsyncNativeStreamCall",
    "NativeGRPCChannel",
    "NativeStreamCall",
    "native_ssl_context",
]
