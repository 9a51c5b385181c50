"""Seed inputs for the fuzz targets, made by the package's own encoders (valid messages the
mutations start from), in each target's input format (see :mod:`fuzz.targets`).

``python -m fuzz.corpus DIR`` writes them as files, one folder per target (what atheris takes
as a corpus); :func:`seeds` gives them to the drivers and the tests.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import struct
import sys
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from fuzz.targets import TARGETS
from kserve_v2.grpc._generated import grpc_service_pb2 as pb
from kserve_v2.grpc.framing import compress_message, message_prefix
from kserve_v2.h2 import hpack
from kserve_v2.h2.frames import (
    CONTINUATION,
    DATA,
    FLAG_ACK,
    FLAG_END_HEADERS,
    FLAG_END_STREAM,
    FLAG_PADDED,
    GOAWAY,
    HEADERS,
    PING,
    RST_STREAM,
    SETTINGS,
    WINDOW_UPDATE,
    frame_header,
)
from kserve_v2.messages import InferRequest, new_infer_result, new_output_tensor
from kserve_v2.rest import codec as rest_codec
from kserve_v2.rest.sse import ServerSentEvent, encode_event
from kserve_v2.tensors import InferInput, RequestedOutput

__all__ = ["seeds", "write"]


def _arrays() -> list[tuple[str, str, np.ndarray[Any, Any]]]:
    """One small tensor of each kind of datatype: (name, datatype, array)."""
    return [
        ("i32", "INT32", np.arange(6, dtype=np.int32).reshape(2, 3)),
        ("f32", "FP32", np.array([1.5, -2.0], dtype=np.float32)),
        ("u8", "UINT8", np.array([0, 255], dtype=np.uint8)),
        ("b", "BOOL", np.array([True, False])),
        ("f64", "FP64", np.array([[0.25]], dtype=np.float64)),
        ("i64", "INT64", np.array([-(2**40)], dtype=np.int64)),
        ("f16", "FP16", np.array([1.0, 2.0], dtype=np.float16)),
        ("s", "BYTES", np.array([b"0.9:2:bird", b"0.1:0"], dtype=np.object_)),
        ("e", "INT8", np.zeros((0, 4), dtype=np.int8)),
    ]


def _result(binary: bool) -> list[bytes]:
    """REST infer responses, ``LENGTH\\nBODY`` (binary) or ``BODY`` (JSON)."""
    out = []
    arrays = _arrays()
    for group in (arrays[:1], arrays[:4], arrays):
        if not binary:  # JSON cannot carry non-UTF-8 BYTES
            group = [a for a in group if a[1] != "BYTES"]
        outputs = tuple(new_output_tensor(n, d, a.shape, a, {}) for n, d, a in group)
        result = new_infer_result("m", "1", "id-7", {"sequence_end": True}, outputs)
        body = rest_codec.encode_infer_response(result, binary=binary)
        header = dict(body.headers).get(rest_codec.HEADER_LENGTH)
        prefix = b"" if header is None else header.encode() + b"\n"
        out.append(prefix + body.join())
    return out


def _rest_infer_response() -> list[bytes]:
    return [
        *_result(True),
        *_result(False),
        b'{"model_name":"m","outputs":[{"name":"shm","datatype":"FP32","shape":[4]}]}',
        b'{"outputs":[{"name":"c","datatype":"BYTES","shape":[1],"data":["0.5:1:x"]}]}',
    ]


def _rest_infer_request() -> list[bytes]:
    out = []
    arrays = _arrays()
    for binary in (True, False):
        group = arrays if binary else [a for a in arrays if a[1] != "BYTES"]
        inputs = tuple(InferInput(n, a, datatype=d) for n, d, a in group)
        outputs = (RequestedOutput("o", binary=binary, class_count=2),)
        request = InferRequest("m", inputs, outputs, id="r", parameters={"priority": 1})
        body = rest_codec.encode_infer_request(request)
        header = dict(body.headers).get(rest_codec.HEADER_LENGTH)
        prefix = b"" if header is None else header.encode() + b"\n"
        out.append(prefix + body.join())
    return out


_REST_BODIES = [
    b'{"name":"triton","version":"2.51.0","extensions":["classification","binary_tensor_data"]}',
    b'{"name":"m","versions":["1"],"platform":"python","inputs":[{"name":"IN","datatype":"INT32",'
    b'"shape":[-1,2]}],"outputs":[{"name":"OUT","datatype":"FP32","shape":[1]}]}',
    b'{"name":"m","max_batch_size":8,"input":[{"name":"IN","data_type":"TYPE_INT32","dims":[2]}]}',
    b'{"model_stats":[{"name":"m","version":"1","inference_count":3}]}',
    b'[{"name":"m","version":"1","state":"READY","reason":""},{"name":"n"}]',
    b'[{"name":"r","key":"/k","offset":0,"byte_size":64}]',
    b'{"trace_level":["TIMESTAMPS"],"trace_rate":"1000"}',
    b'{"log_verbose_level":0,"log_info":true}',
    b'{"text_output":"hi","model_name":"m"}',
    b'{"error":"model m not found"}',
    b'{"detail":[{"loc":["body","inputs",0],"msg":"field required","input":{}}]}',
    b"<html><head><title>502 Bad Gateway</title></head></html>",
    b"# HELP nv_inference_count Number of inferences\n# TYPE nv_inference_count counter\n"
    b'nv_inference_count{model="m",version="1"} 7\nnv_gpu_utilization{gpu_uuid="GPU-0"} 0.5\n',
]


def _rest_json() -> list[bytes]:
    # Bytes 0 and 1 pick the call and the status (see fuzz.targets.rest_json): (call, status
    # index, body index).
    pairs = [
        (0, 0, 0),
        (1, 0, 1),
        (2, 0, 2),
        (3, 0, 3),
        (4, 0, 4),
        (5, 0, 5),
        (6, 0, 5),
        (7, 0, 6),
        (8, 0, 7),
        (9, 0, 8),
        (9, 0, 9),
        (10, 0, 12),
        (11, 0, 9),
        (0, 6, 9),
        (0, 8, 10),
        (0, 10, 11),
    ]
    return [bytes([call, status]) + _REST_BODIES[body] for call, status, body in pairs]


def _rest_decompress() -> list[bytes]:
    text = b'{"outputs":[]}' * 8
    return [
        b"\0" + gzip.compress(text, mtime=0),
        b"\0" + gzip.compress(b"a", mtime=0) + gzip.compress(b"b", mtime=0),
        b"\1" + zlib.compress(text),
        b"\1" + zlib.compress(text)[2:-4],  # raw deflate
        b"\2" + text,
        b"\0" + gzip.compress(b"\0" * 100_000, mtime=0),  # a small bomb
    ]


def _sse() -> list[bytes]:
    events = [
        ServerSentEvent('{"text_output":"a","model_name":"m"}'),
        ServerSentEvent("line 1\nline 2", event="update", id="7", retry=1000),
        ServerSentEvent('{"error":"boom"}', event="error"),
    ]
    joined = b"".join(encode_event(e) for e in events)
    return [
        joined,
        b"\xef\xbb\xbf" + joined.replace(b"\n", b"\r\n"),
        b": keep-alive\r\rdata:x\rid\r\r",
        b'data: {"text_output":"\xff"}\n\n',
    ]


def _http1_response() -> list[bytes]:
    body = b'{"outputs":[]}'
    chunked = b"%x\r\n%s\r\n0\r\nx-trailer: 1\r\n\r\n" % (len(body), body)
    gz = gzip.compress(body, mtime=0)
    heads = [
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
        % (len(body), body),
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked,
        b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: %d\r\n\r\n%s"
        % (len(gz), gz),
        b"HTTP/1.0 400 Bad Request\r\nConnection: close\r\n\r\n" + body,
        b"HTTP/1.1 204 No Content\r\n\r\nHTTP/1.1 200 OK\r\n\r\n",
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked"
        b"\r\n\r\n9\r\ndata: x\n\n\r\n0\r\n\r\n",
    ]
    # Byte 0: whole (0), streamed (2), HEAD (1), in 1-byte and 5-byte pieces (4, 20).
    return [bytes([flags]) + head for head in heads for flags in (0, 2, 1, 4, 22)]


def _hpack_block() -> list[bytes]:
    encoder = hpack.Encoder()
    return [
        encoder.encode([(":status", "200"), ("content-type", "application/grpc")]),
        encoder.encode([("grpc-status", "0"), ("grpc-message", "a b%20c"), ("x-a", "é")]),
        encoder.encode([("authorization", "Bearer t")], sensitive={"authorization"}),
        bytes.fromhex("828684418cf1e3c2e5f23a6ba0ab90f4ff"),  # RFC 7541 C.4.1 (Huffman)
        bytes.fromhex("400a637573746f6d2d6b65790d637573746f6d2d686561646572be"),  # indexed
        bytes.fromhex("3fe11f88"),  # a table size update, then an indexed field
    ]


def _frame(kind: int, flags: int, stream_id: int, payload: bytes = b"") -> bytes:
    return frame_header(len(payload), kind, flags, stream_id) + payload


def _grpc_message(data: bytes, compressed: bool = False) -> bytes:
    body = compress_message(data, "gzip") if compressed else data
    return message_prefix(len(body), compressed) + body


def _infer_response_messages() -> list[bytes]:
    out = []
    for arrays in (_arrays()[:1], _arrays()[:5]):
        response = pb.ModelInferResponse(model_name="m", model_version="1", id="r")
        response.parameters["triton_final_response"].bool_param = True
        for name, datatype, array in arrays:
            tensor = response.outputs.add(name=name, datatype=datatype, shape=array.shape)
            tensor.parameters["binary_data_size"].int64_param = array.nbytes
            response.raw_output_contents.append(array.tobytes())
        out.append(response.SerializeToString())
    typed = pb.ModelInferResponse(model_name="m")
    typed.outputs.add(name="t", datatype="INT32", shape=[3]).contents.int_contents.extend(
        [1, -2, 3]
    )
    typed.outputs.add(name="s", datatype="BYTES", shape=[1]).contents.bytes_contents.append(b"x")
    typed.outputs.add(name="f", datatype="FP32", shape=[1]).contents.fp32_contents.append(0.5)
    out.append(typed.SerializeToString())
    return out


def _stream_messages() -> list[bytes]:
    out = [
        pb.ModelStreamInferResponse(
            infer_response=pb.ModelInferResponse.FromString(message)
        ).SerializeToString()
        for message in _infer_response_messages()
    ]
    out.append(pb.ModelStreamInferResponse(error_message="bad input").SerializeToString())
    return out


def _h2_connection() -> list[bytes]:
    encoder = hpack.Encoder()
    settings = struct.pack(">HLHLHL", 3, 100, 4, 1 << 20, 5, 1 << 16)
    head = encoder.encode([(":status", "200"), ("content-type", "application/grpc")])
    trailers = encoder.encode([("grpc-status", "0"), ("grpc-message", "")])
    message = _grpc_message(_infer_response_messages()[0])
    server = _frame(SETTINGS, 0, 0, settings) + _frame(SETTINGS, FLAG_ACK, 0)
    call = (
        _frame(HEADERS, FLAG_END_HEADERS, 1, head)
        + _frame(DATA, 0, 1, message)
        + _frame(HEADERS, FLAG_END_HEADERS | FLAG_END_STREAM, 1, trailers)
    )
    split = (
        _frame(HEADERS, 0, 3, head[:2])
        + _frame(CONTINUATION, FLAG_END_HEADERS, 3, head[2:])
        + _frame(DATA, FLAG_PADDED, 3, b"\x03" + message[:7] + b"\0\0\0")
        + _frame(DATA, 0, 3, message[7:])
        + _frame(HEADERS, FLAG_END_HEADERS | FLAG_END_STREAM, 3, trailers)
    )
    control = (
        _frame(PING, 0, 0, b"12345678")
        + _frame(WINDOW_UPDATE, 0, 0, struct.pack(">L", 1000))
        + _frame(WINDOW_UPDATE, 0, 1, struct.pack(">L", 1000))
        + _frame(RST_STREAM, 0, 5, struct.pack(">L", 8))
        + _frame(GOAWAY, 0, 0, struct.pack(">LL", 3, 0) + b"bye")
    )
    paced = (
        _frame(HEADERS, FLAG_END_HEADERS, 5, head)
        + _frame(DATA, 0, 5, _grpc_message(b"\x0a\x01m", compressed=True))
        + _frame(HEADERS, FLAG_END_HEADERS | FLAG_END_STREAM, 5, trailers)
    )
    # Byte 0 is the size of the pieces the bytes arrive in (0: at once).
    return [
        b"\0" + server + call,
        b"\0" + server + split + paced,
        b"\x07" + server + call + control,
        b"\0" + server + control,
    ]


def _grpc_framing() -> list[bytes]:
    message = _infer_response_messages()[0]
    plain = _grpc_message(message) + _grpc_message(b"")
    packed = _grpc_message(message, compressed=True)
    deflated = zlib.compress(message)
    return [
        b"\0\0" + plain,
        b"\1\0" + packed,
        b"\1\3" + packed + plain,
        b"\2\0" + message_prefix(len(deflated), True) + deflated,
        b"\4\0" + b"<html>bad gateway</html>",
    ]


def _grpc_protobuf() -> list[bytes]:
    # Byte 0 picks the decoder (see fuzz.targets.grpc_protobuf).
    from kserve_v2.grpc._generated import model_config_pb2 as mc

    config = pb.ModelConfigResponse(
        config=mc.ModelConfig(name="m", max_batch_size=8, input=[mc.ModelInput(name="IN")])
    )
    stats = pb.ModelStatisticsResponse(model_stats=[pb.ModelStatistics(name="m", version="1")])
    index = pb.RepositoryIndexResponse(
        models=[pb.RepositoryIndexResponse.ModelIndex(name="m", version="1", state="READY")]
    )
    system = pb.SystemSharedMemoryStatusResponse()
    system.regions["r"].name = "r"
    system.regions["r"].byte_size = 64
    cuda = pb.CudaSharedMemoryStatusResponse()
    cuda.regions["c"].name = "c"
    trace = pb.TraceSettingResponse()
    trace.settings["trace_rate"].value.append("1000")
    logs = pb.LogSettingsResponse()
    logs.settings["log_info"].bool_param = True
    logs.settings["log_verbose_level"].uint32_param = 1
    messages = [
        pb.ServerLiveResponse(live=True),
        pb.ModelReadyResponse(ready=True),
        pb.ServerMetadataResponse(name="triton", version="2", extensions=["x"]),
        pb.ModelMetadataResponse(
            name="m",
            versions=["1"],
            inputs=[pb.ModelMetadataResponse.TensorMetadata(name="i", datatype="FP32", shape=[-1])],
        ),
        config,
        stats,
        index,
        system,
        cuda,
        trace,
        logs,
    ]
    return [bytes([choice]) + m.SerializeToString() for choice, m in enumerate(messages)]


_MAKERS = {
    "rest_infer_response": _rest_infer_response,
    "rest_infer_request": _rest_infer_request,
    "rest_json": _rest_json,
    "rest_decompress": _rest_decompress,
    "sse": _sse,
    "metrics": lambda: [_REST_BODIES[12], b'x{a="\\n"} 1e400 17\n# EOF\n'],
    "http1_response": _http1_response,
    "hpack_block": _hpack_block,
    "h2_connection": _h2_connection,
    "grpc_framing": _grpc_framing,
    "grpc_wire": lambda: [*_infer_response_messages(), *_stream_messages()],
    "grpc_protobuf": _grpc_protobuf,
}


@functools.cache
def seeds(target: str) -> tuple[bytes, ...]:
    """The seed inputs of ``target`` (a name in :data:`fuzz.targets.TARGETS`)."""
    return (b"", *_MAKERS[target]())


def write(directory: Path, target: str) -> Path:
    """Write ``target``'s seeds into ``directory/target`` (named by content); returns it."""
    folder = directory / target
    folder.mkdir(parents=True, exist_ok=True)
    for seed in seeds(target):
        (folder / f"seed-{hashlib.sha1(seed).hexdigest()[:16]}").write_bytes(seed)
    return folder


if __name__ == "__main__":
    root = Path(sys.argv[1] if len(sys.argv) > 1 else ".work/fuzz/corpus")
    for name in TARGETS:
        print(write(root, name))
