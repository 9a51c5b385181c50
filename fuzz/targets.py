"""Fuzz targets: one function per decoder of bytes a server controls.

Each target takes arbitrary bytes, turns them into the decoder's input (a few leading bytes
may pick options, documented per target) and runs the decoder the way the client does. The
property every target checks is **totality**: for any input, the decoder returns a value or
raises the package's own error (:class:`~kserve_v2.errors.KServeError`, usually
:class:`~kserve_v2.errors.ProtocolError`), never another exception (``IndexError``,
``struct.error``, ``UnicodeDecodeError``, ``RecursionError``, ...). :func:`run_one` is that
rule; the drivers (:mod:`fuzz.run`, atheris or the plain mutation driver, and
``tests/test_fuzz_targets.py`` under hypothesis) also bound time and memory per input.

Example::

    >>> run_one("rest_infer_response", b'{"outputs":[]}')
    >>> run_one("sse", b"data: x\\n\\n")
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any, Final

from kserve_v2.endpoint import parse_url
from kserve_v2.errors import KServeError
from kserve_v2.extensions import parse_classification
from kserve_v2.grpc import codec as grpc_codec
from kserve_v2.grpc import extensions as grpc_extensions
from kserve_v2.grpc import wire
from kserve_v2.grpc.framing import CallResponse
from kserve_v2.h2 import hpack
from kserve_v2.h2.connection import DataReceived, H2Connection, HeadersReceived, StreamReset
from kserve_v2.http1 import ResponseParser, StreamDecoder, decode_body
from kserve_v2.interfaces import HTTPResponse
from kserve_v2.metrics import parse_metrics
from kserve_v2.rest import codec as rest_codec
from kserve_v2.rest import compression
from kserve_v2.rest.backend import HTTPBackend
from kserve_v2.rest.sse import SSEDecoder
from kserve_v2.tensors import SharedMemoryPlacement

__all__ = ["LIMIT", "TARGETS", "Target", "option", "run_one"]

Target = Callable[[bytes], None]

#: Every target's size limit for what a decoder may build (decompressed bodies, messages,
#: events): 1 MiB, so that memory per input stays bounded whatever sizes the input announces.
LIMIT: Final = 1 << 20

TARGETS: dict[str, Target] = {}


def _target(func: Target) -> Target:
    TARGETS[func.__name__] = func
    return func


def run_one(name: str, data: bytes) -> None:
    """Run target ``name`` on ``data``: the package's errors are an answer, anything else is
    a finding and propagates."""
    with contextlib.suppress(KServeError):
        TARGETS[name](data)


def option(data: bytes, choices: int) -> tuple[int, bytes]:
    """The first byte of ``data`` as a choice in ``range(choices)``, and the rest."""
    if not data:
        return 0, b""
    return data[0] % choices, data[1:]


def _chunks(data: bytes, size: int) -> Iterator[bytes]:
    """``data`` in pieces of ``size`` bytes (0: in one piece), as a socket may deliver it."""
    if size <= 0:
        yield data
        return
    for start in range(0, len(data), size):
        yield data[start : start + size]


def _header_length(data: bytes) -> tuple[str | None, bytes]:
    """``LENGTH\\nBODY`` gives the Inference-Header-Content-Length text and the body; bytes
    without a line feed are a JSON-only body (no header)."""
    head, newline, body = data.partition(b"\n")
    if not newline:
        return None, data
    return head.decode("latin-1"), body


# --------------------------------------------------------------------------------- REST


#: Outputs the request placed in shared memory (they may come back without data).
_PLACEMENTS: Final = {"shm": SharedMemoryPlacement("region", 16, 0)}


@_target
def rest_infer_response(data: bytes) -> None:
    """:func:`kserve_v2.rest.codec.decode_infer_response` on ``LENGTH\\nBODY`` (or ``BODY``);
    BYTES outputs are then read as classification entries, as ``parse_classification`` does."""
    header_length, body = _header_length(data)
    result = rest_codec.decode_infer_response(body, header_length, shared_memory=_PLACEMENTS)
    for output in result.outputs:
        if output.datatype == "BYTES" and output.data is not None:
            parse_classification(output.data)


@_target
def rest_infer_request(data: bytes) -> None:
    """:func:`kserve_v2.rest.codec.decode_infer_request` (captured requests: CLI, test
    servers) on ``LENGTH\\nBODY`` (or ``BODY``)."""
    header_length, body = _header_length(data)
    rest_codec.decode_infer_request(body, header_length, model_name="m")


_BACKEND: Final = HTTPBackend(parse_url("http://localhost:8000"))
#: The HTTP calls whose answers are JSON (or text): the first byte picks one.
_REST_CALLS: Final[tuple[Callable[[HTTPResponse], Any], ...]] = (
    _BACKEND.server_metadata().decode,
    _BACKEND.model_metadata("m").decode,
    _BACKEND.model_config("m").decode,
    _BACKEND.model_statistics().decode,
    _BACKEND.repository_index().decode,
    _BACKEND.system_shared_memory_status().decode,
    _BACKEND.cuda_shared_memory_status().decode,
    _BACKEND.trace_settings().decode,
    _BACKEND.log_settings().decode,
    _BACKEND.generate("m", {"text_input": "x"}).decode,
    _BACKEND.metrics().decode,
    _BACKEND.server_live().decode,
)
#: Statuses of the answer (the second byte picks one): mostly success, some errors.
_STATUSES: Final = (200, 200, 200, 200, 201, 400, 404, 415, 422, 500, 503)


@_target
def rest_json(data: bytes) -> None:
    """The REST backend's decoders of JSON answers (metadata, config, statistics, repository
    index, shared-memory status, trace and log settings, generate, metrics), error bodies
    included: byte 0 picks the call, byte 1 the HTTP status, the rest is the body."""
    call, data = option(data, len(_REST_CALLS))
    status, body = option(data, len(_STATUSES))
    response = HTTPResponse(_STATUSES[status], {"content-type": "application/json"}, body)
    _REST_CALLS[call](response)


_ENCODINGS: Final = ("gzip", "deflate", "identity", "x-gzip", "br")


@_target
def rest_decompress(data: bytes) -> None:
    """:func:`kserve_v2.rest.compression.decompress` and :func:`kserve_v2.http1.decode_body`
    (whole bodies) and :class:`~kserve_v2.http1.StreamDecoder` (streamed ones): byte 0 picks
    the Content-Encoding; the output is bounded by :data:`LIMIT` where the API allows."""
    choice, body = option(data, len(_ENCODINGS))
    encoding = _ENCODINGS[choice]
    with contextlib.suppress(KServeError):
        compression.decompress(body, encoding, max_size=LIMIT)
    with contextlib.suppress(KServeError):
        decode_body(bytearray(body), encoding, LIMIT)
    decoder = StreamDecoder(encoding, max_piece_size=LIMIT)
    for piece in _chunks(body, 7):
        decoder.decode(piece)
    decoder.flush()


_GENERATE_STREAM: Final = _BACKEND.generate_stream("m", {"text_input": "x"})


@_target
def sse(data: bytes) -> None:
    """:class:`~kserve_v2.rest.sse.SSEDecoder` fed the stream in one piece and byte by byte
    (both must give the same events), each event decoded as a ``generate_stream`` answer."""
    whole = SSEDecoder(max_event_size=4096)
    try:
        events = whole.feed(data)
    except KServeError:
        events = None
    split = SSEDecoder(max_event_size=4096)
    try:
        pieces = [event for byte in _chunks(data, 1) for event in split.feed(byte)]
    except KServeError:
        pieces = None
    if events is not None and pieces is not None:
        assert [repr(e) for e in events] == [repr(e) for e in pieces], (events, pieces)
        assert whole.pending == split.pending
    for event in events or ():
        with contextlib.suppress(KServeError):
            _GENERATE_STREAM.decode_event(event, 200)
    whole.end()


@_target
def metrics(data: bytes) -> None:
    """:func:`kserve_v2.metrics.parse_metrics` (Prometheus text from ``/metrics``)."""
    parse_metrics(data)


# --------------------------------------------------------------------------------- HTTP/1.1


@_target
def http1_response(data: bytes) -> None:
    """:class:`~kserve_v2.http1.ResponseParser` fed a server's bytes, then the body decoded
    (:func:`~kserve_v2.http1.decode_body`, or :class:`~kserve_v2.http1.StreamDecoder` when
    streamed). Byte 0: bit 0 a HEAD request, bit 1 a streamed body, bits 2-7 the size of the
    pieces the bytes arrive in (0: all at once)."""
    flags, data = option(data, 256)
    parser = ResponseParser(max_header_size=4096, max_body_size=LIMIT)
    parser.start(head_request=bool(flags & 1), stream=bool(flags & 2))
    pending = memoryview(data)
    piece = flags >> 2 or len(data) or 1
    while pending:  # bytes after the end of the response too, as a socket would read them
        buffer = parser.get_buffer()
        size = min(len(buffer), piece, len(pending))
        buffer[:size] = pending[:size]
        pending = pending[size:]
        parser.buffer_updated(size)
    if not parser.done:
        parser.eof_received()
    encoding = parser.headers.get("content-encoding", "")
    if parser.stream:
        decoder = StreamDecoder(encoding, max_piece_size=LIMIT)
        for body_piece in parser.take_pieces():
            decoder.decode(body_piece)
        decoder.flush()
    else:
        decode_body(parser.body, encoding, LIMIT)
    if parser.has_unread_data:
        parser.start()  # bytes after the response: refused, never read as the next one


# --------------------------------------------------------------------------------- HPACK, HTTP/2


@_target
def hpack_block(data: bytes) -> None:
    """:class:`~kserve_v2.h2.hpack.Decoder` on the block, twice (the second time with the
    dynamic table the first left), and :func:`~kserve_v2.h2.hpack.huffman_decode`."""
    with contextlib.suppress(KServeError):
        hpack.huffman_decode(data)
    decoder = hpack.Decoder(max_header_list_size=16384)
    decoder.decode(data)
    decoder.decode(data)


def _h2_client() -> tuple[H2Connection, dict[int, CallResponse]]:
    """A connection as the native gRPC transport has it: preface sent, three calls open
    (one whose request is complete, one that still sends, one consumer-paced)."""
    conn = H2Connection(max_header_list_size=16384)
    conn.initiate()
    block = hpack.Encoder().encode(
        [(":method", "POST"), (":scheme", "http"), (":path", "/p/M"), (":authority", "h")]
    )
    calls = {
        conn.open_stream(block, end_stream=True): CallResponse(limit=LIMIT),
        conn.open_stream(block): CallResponse(limit=LIMIT),
        conn.open_stream(block, acknowledge_on_receipt=False): CallResponse(limit=LIMIT),
    }
    conn.data_to_send()
    return conn, calls


@_target
def h2_connection(data: bytes) -> None:
    """:class:`~kserve_v2.h2.connection.H2Connection` fed a server's bytes (frames, HPACK,
    flow control, SETTINGS, PING, GOAWAY, ...), its events fed to each call's gRPC
    :class:`~kserve_v2.grpc.framing.CallResponse`, finished calls' status and messages
    decoded as infer responses. Byte 0 is the size of the pieces the bytes arrive in
    (0: all at once)."""
    size, data = option(data, 256)
    conn, calls = _h2_client()
    for piece in _chunks(data, size):
        for event in conn.receive(piece):
            stream_id = getattr(event, "stream_id", 0)
            call = calls.get(stream_id)
            if call is None:
                continue
            try:
                if isinstance(event, HeadersReceived):
                    call.headers(event.headers, event.end_stream)
                elif isinstance(event, DataReceived):
                    call.data(event.data, event.end_stream)
                    if event.stream_id == 5:  # the consumer-paced stream
                        conn.acknowledge_received_data(5, len(event.data))
                elif isinstance(event, StreamReset):
                    del calls[event.stream_id]
            except KServeError:
                del calls[stream_id]
        conn.data_to_send()
    for call in calls.values():
        if call.done:
            call.status()
            call.metadata()
            for message in call.messages:
                with contextlib.suppress(KServeError):
                    grpc_codec.decode_infer_response(message)


# --------------------------------------------------------------------------------- gRPC


_GRPC_HEADERS: Final = (
    [(":status", "200"), ("content-type", "application/grpc")],
    [(":status", "200"), ("content-type", "application/grpc"), ("grpc-encoding", "gzip")],
    [(":status", "200"), ("content-type", "application/grpc"), ("grpc-encoding", "deflate")],
    [(":status", "200"), ("content-type", "application/grpc"), ("grpc-encoding", "zstd")],
    [(":status", "503"), ("content-type", "text/html")],
)


@_target
def grpc_framing(data: bytes) -> None:
    """A gRPC call's response body: length-prefixed (maybe compressed) messages read by
    :class:`~kserve_v2.grpc.framing.CallResponse` and its ``MessageReader``, then the call's
    status. Byte 0 picks the response headers (compression), byte 1 the size of the DATA
    pieces (0: all at once)."""
    choice, data = option(data, len(_GRPC_HEADERS))
    size, data = option(data, 256)
    call = CallResponse(limit=LIMIT)
    call.headers(list(_GRPC_HEADERS[choice]), False)
    for piece in _chunks(data, size):
        call.data(memoryview(piece), False)
    call.headers([("grpc-status", "0"), ("grpc-message", "ok%20")], True)
    call.status()


@_target
def grpc_wire(data: bytes) -> None:
    """The hand-written protobuf decoders of :mod:`kserve_v2.grpc.wire` (both paths: the
    shortcut for bytes, the general decoder for a memoryview) and the codec on top."""
    for decode in (
        lambda data: wire.decode_infer_response_fields(memoryview(data)),
        wire.decode_infer_response_fields,
        wire.decode_stream_infer_response_fields,
        wire.decode_stream_message_fields,
        grpc_codec.decode_infer_response,
        grpc_codec.decode_stream_response,
    ):
        with contextlib.suppress(KServeError):
            decode(data)


_PROTOBUF_DECODERS: Final[tuple[Callable[[bytes], object], ...]] = (
    grpc_codec.decode_server_live,
    grpc_codec.decode_model_ready,
    grpc_codec.decode_server_metadata,
    grpc_codec.decode_model_metadata,
    grpc_extensions.decode_model_config,
    grpc_extensions.decode_model_statistics,
    grpc_extensions.decode_repository_index,
    grpc_extensions.decode_system_shm_status,
    grpc_extensions.decode_cuda_shm_status,
    grpc_extensions.decode_trace_settings,
    grpc_extensions.decode_log_settings,
)


@_target
def grpc_protobuf(data: bytes) -> None:
    """The gRPC answers decoded with protobuf (health, metadata, the Triton extensions):
    byte 0 picks the decoder."""
    choice, message = option(data, len(_PROTOBUF_DECODERS))
    _PROTOBUF_DECODERS[choice](message)
