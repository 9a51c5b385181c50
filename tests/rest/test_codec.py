"""The REST codec without a server: golden bodies, round trips, zero copy, totality of decoding."""

from __future__ import annotations

import contextlib
import json
import math
import struct
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kserve_v2.datatypes import Datatype, numpy_dtype
from kserve_v2.errors import InvalidInputError, ProtocolError, ServerError
from kserve_v2.messages import InferRequest, InferResult, OutputTensor
from kserve_v2.rest import codec
from kserve_v2.rest.codec import (
    BINARY_REFUSED_HINT,
    HEADER_LENGTH,
    EncodedBody,
    decode_infer_request,
    decode_infer_response,
    decode_json_object,
    decode_model_metadata,
    decode_server_metadata,
    encode_infer_request,
    encode_infer_response,
    encode_json,
    encode_raw_binary_request,
    error_from_response,
    header_length_of,
    retry_after_seconds,
)
from kserve_v2.tensors import InferInput, RequestedOutput, SharedMemoryPlacement
from tests.strategies import (
    BINARY_INFER_REQUESTS,
    BINARY_INPUTS,
    INFER_RESULTS,
    JSON_INFER_REQUESTS,
    JSON_INFER_RESULTS,
    MIXED_INFER_REQUESTS,
    NAMES,
    REQUEST_PARAMETERS,
    REQUESTED_OUTPUTS,
    SELF_ROUTED_INPUTS,
    SHARED_MEMORY_INPUTS,
    TENSORS,
    assert_tensor_equal,
)

JSON_HEADERS = (("Content-Type", "application/json"),)


def _binary_headers(json_length: int) -> tuple[tuple[str, str], ...]:
    return (
        ("Content-Type", "application/octet-stream"),
        ("Inference-Header-Content-Length", str(json_length)),
    )


def _header_length(body: EncodedBody) -> str | None:
    return dict(body.headers).get(HEADER_LENGTH)


def _assert_body(body: EncodedBody, headers: Any, parts: list[bytes]) -> None:
    assert body.headers == headers
    assert [bytes(p) for p in body.parts] == parts
    assert body.length == sum(map(len, parts))
    assert body.join() == b"".join(parts)


def _objects(*elements: Any) -> np.ndarray:
    out = np.empty(len(elements), dtype=object)
    out[:] = list(elements)
    return out


# ---------------------------------------------------------------------------------------------
# golden request bodies


def test_golden_pure_json_request() -> None:
    request = InferRequest(
        "m",
        (InferInput("x", np.array([[1, 2], [3, 4]], np.int32)),),
        outputs=(RequestedOutput("y"),),
        id="req-1",
        parameters={"my_custom_parameter": 42},
    )
    head = (
        b'{"id":"req-1","parameters":{"my_custom_parameter":42},'
        b'"inputs":[{"name":"x","shape":[2,2],"datatype":"INT32","data":[1,2,3,4]}],'
        b'"outputs":[{"name":"y"}]}'
    )
    body = encode_infer_request(request, binary_inputs=False, binary_outputs=False)
    _assert_body(body, JSON_HEADERS, [head])
    decoded = decode_infer_request(head, model_name="m")
    assert decoded.id == "req-1"
    assert decoded.parameters == {"my_custom_parameter": 42}
    assert decoded.inputs[0].data is not None
    assert decoded.inputs[0].data.tolist() == [[1, 2], [3, 4]]
    assert [(o.name, o.binary) for o in decoded.outputs] == [("y", None)]


# The binary-data extension's example: a UINT32 [2, 2] and a BOOL [3] input, output0 as binary.
SPEC_REQUEST_HEAD = (
    b'{"inputs":[{"name":"input0","shape":[2,2],"datatype":"UINT32",'
    b'"parameters":{"binary_data_size":16}},'
    b'{"name":"input1","shape":[3],"datatype":"BOOL","parameters":{"binary_data_size":3}}],'
    b'"outputs":[{"name":"output0","parameters":{"binary_data":true}}]}'
)
SPEC_REQUEST_INPUT0 = struct.pack("<4I", 1, 2, 3, 4)
SPEC_REQUEST_INPUT1 = b"\x01\x00\x01"


def test_golden_binary_request_with_two_inputs() -> None:
    request = InferRequest(
        "mymodel",
        (
            InferInput("input0", np.array([[1, 2], [3, 4]], np.uint32)),
            InferInput("input1", [True, False, True]),
        ),
        outputs=(RequestedOutput("output0", binary=True),),
    )
    body = encode_infer_request(request)
    _assert_body(
        body,
        _binary_headers(len(SPEC_REQUEST_HEAD)),
        [SPEC_REQUEST_HEAD, SPEC_REQUEST_INPUT0, SPEC_REQUEST_INPUT1],
    )


def test_golden_binary_request_decodes() -> None:
    body = SPEC_REQUEST_HEAD + SPEC_REQUEST_INPUT0 + SPEC_REQUEST_INPUT1
    request = decode_infer_request(body, str(len(SPEC_REQUEST_HEAD)), model_name="mymodel")
    assert request.model_name == "mymodel"
    input0, input1 = request.inputs
    assert (input0.name, input0.datatype, input0.shape) == ("input0", Datatype.UINT32, (2, 2))
    assert input0.data is not None
    assert input0.data.tolist() == [[1, 2], [3, 4]]
    assert input0.parameters == {}  # binary_data_size is the codec's, not the caller's
    assert input1.data is not None
    assert input1.data.tolist() == [True, False, True]
    assert [(o.name, o.binary) for o in request.outputs] == [("output0", True)]


def test_golden_mixed_json_and_binary_inputs() -> None:
    request = InferRequest(
        "m",
        (
            InferInput("a", np.array([1.5], np.float32), binary=True),
            InferInput("b", ["hi"]),
            InferInput("c", np.array([1.0], np.float16), binary=True),
        ),
    )
    head = (
        b'{"parameters":{"binary_data_output":true},"inputs":['
        b'{"name":"a","shape":[1],"datatype":"FP32","parameters":{"binary_data_size":4}},'
        b'{"name":"b","shape":[1],"datatype":"BYTES","data":["hi"]},'
        b'{"name":"c","shape":[1],"datatype":"FP16","parameters":{"binary_data_size":2}}]}'
    )
    body = encode_infer_request(request, binary_inputs=False)
    _assert_body(body, _binary_headers(len(head)), [head, b"\x00\x00\xc0\x3f", b"\x00\x3c"])
    decoded = decode_infer_request(body.join(), str(len(head)))
    assert [t.data.tolist() for t in decoded.inputs if t.data is not None] == [
        [1.5],
        [b"hi"],
        [1.0],
    ]


def test_golden_requested_outputs_and_shared_memory() -> None:
    request = InferRequest(
        "m",
        (
            InferInput(
                "x",
                None,
                datatype="FP32",
                shape=[4],
                shared_memory=SharedMemoryPlacement("in_region", 16),
            ),
        ),
        outputs=(
            RequestedOutput("raw", binary=True),
            RequestedOutput("as_json", binary=False),
            RequestedOutput("default"),
            RequestedOutput("probs", class_count=3),
            RequestedOutput("in_shm", shared_memory=SharedMemoryPlacement("out_region", 64, 16)),
        ),
    )
    head = (
        b'{"inputs":[{"name":"x","shape":[4],"datatype":"FP32","parameters":'
        b'{"shared_memory_region":"in_region","shared_memory_byte_size":16}}],'
        b'"outputs":['
        b'{"name":"raw","parameters":{"binary_data":true}},'
        b'{"name":"as_json","parameters":{"binary_data":false}},'
        b'{"name":"default","parameters":{"binary_data":true}},'
        b'{"name":"probs","parameters":{"binary_data":true,"classification":3}},'
        b'{"name":"in_shm","parameters":{"shared_memory_region":"out_region",'
        b'"shared_memory_byte_size":64,"shared_memory_offset":16}}]}'
    )
    _assert_body(encode_infer_request(request), JSON_HEADERS, [head])
    decoded = decode_infer_request(head)
    assert decoded.inputs[0].shared_memory == SharedMemoryPlacement("in_region", 16)
    assert decoded.inputs[0].parameters == {}
    outputs = {o.name: o for o in decoded.outputs}
    assert outputs["probs"].class_count == 3
    assert outputs["as_json"].binary is False
    assert outputs["in_shm"].shared_memory == SharedMemoryPlacement("out_region", 64, 16)
    assert outputs["in_shm"].parameters == {}


@pytest.mark.parametrize(
    ("binary_outputs", "head"),
    [
        (
            True,
            b'{"parameters":{"binary_data_output":true},'
            b'"inputs":[{"name":"x","shape":[1],"datatype":"INT8","data":[7]}]}',
        ),
        (False, b'{"inputs":[{"name":"x","shape":[1],"datatype":"INT8","data":[7]}]}'),
    ],
)
def test_golden_binary_data_output_when_no_output_is_named(
    binary_outputs: bool, head: bytes
) -> None:
    request = InferRequest("m", (InferInput("x", np.array([7], np.int8)),))
    body = encode_infer_request(request, binary_inputs=False, binary_outputs=binary_outputs)
    _assert_body(body, JSON_HEADERS, [head])


def test_golden_raw_binary_request_has_header_length_zero() -> None:
    body = encode_raw_binary_request(InferInput("x", np.array([1.0, 2.0], np.float32)))
    _assert_body(body, _binary_headers(0), [b"\x00\x00\x80\x3f\x00\x00\x00\x40"])


def test_raw_binary_request_cannot_be_decoded_without_metadata() -> None:
    with pytest.raises(ProtocolError, match="raw binary"):
        decode_infer_request(b"\x00\x00\x80\x3f", "0")


def test_request_parameters_and_outputs_keep_their_order_in_the_header() -> None:
    request = InferRequest("m", (), parameters={"z": 1, "a": 2})
    assert encode_infer_request(request, binary_outputs=False).join() == (
        b'{"parameters":{"z":1,"a":2},"inputs":[]}'
    )


def test_non_ascii_names_are_sent_as_utf8() -> None:
    request = InferRequest("m", (InferInput("é", ["日本"]),))
    head = encode_infer_request(request, binary_inputs=False, binary_outputs=False).join()
    assert (
        head == '{"inputs":[{"name":"é","shape":[1],"datatype":"BYTES","data":["日本"]}]}'.encode()
    )


@pytest.mark.parametrize(
    ("tensor", "match"),
    [
        (InferInput("x", np.array([np.nan], np.float32), binary=False), "NaN"),
        (InferInput("x", np.array([b"\xff"], object), binary=False), "UTF-8"),
        (InferInput("x", np.array([np.inf], np.float16), binary=False), "infinity"),
        (InferInput("x", np.array([np.nan], np.float32), datatype="BF16", binary=False), "NaN"),
    ],
    ids=["nan", "non-utf8", "fp16-inf", "bf16-nan"],
)
def test_data_json_cannot_carry_is_refused_when_json_is_asked_for(
    tensor: InferInput, match: str
) -> None:
    with pytest.raises(InvalidInputError, match=match) as info:
        encode_infer_request(InferRequest("m", (tensor,)))
    assert info.value.message.startswith("input 'x': ")


def test_data_a_response_cannot_carry_as_json_names_the_tensor() -> None:
    output = OutputTensor("y", "FP32", (1,), np.array([np.nan], np.float32))
    with pytest.raises(InvalidInputError, match=r"^tensor 'y': NaN"):
        encode_infer_response(InferResult("m", outputs=(output,)), binary=False)


def test_encode_json_is_compact_utf8_and_refuses_nan() -> None:
    assert encode_json({"a": [1, "é"]}) == '{"a":[1,"é"]}'.encode()
    with pytest.raises(InvalidInputError):
        encode_json({"a": float("nan")})
    with pytest.raises(InvalidInputError):
        encode_json({"a": "\ud800"})


# ---------------------------------------------------------------------------------------------
# golden response bodies

# The binary-data extension's example response, with a BYTES second output.
BINARY_RESPONSE_HEAD = (
    b'{"model_name":"m","model_version":"1","outputs":['
    b'{"name":"output0","shape":[3,1],"datatype":"FP32","parameters":{"binary_data_size":12}},'
    b'{"name":"output1","shape":[2],"datatype":"BYTES","parameters":{"binary_data_size":10}}]}'
)
BINARY_RESPONSE_TAIL = struct.pack("<3f", 1.0, 2.0, 3.0) + b"\x02\0\0\0ab" + b"\0\0\0\0"
BINARY_RESULT = InferResult(
    model_name="m",
    model_version="1",
    outputs=(
        OutputTensor("output0", "FP32", (3, 1), np.array([[1.0], [2.0], [3.0]], np.float32)),
        OutputTensor("output1", "BYTES", (2,), _objects(b"ab", b"")),
    ),
)


def test_golden_binary_response_with_two_outputs_decodes() -> None:
    body = BINARY_RESPONSE_HEAD + BINARY_RESPONSE_TAIL
    result = decode_infer_response(body, str(len(BINARY_RESPONSE_HEAD)))
    assert (result.model_name, result.model_version, result.id) == ("m", "1", "")
    assert [(t.name, t.datatype, t.shape, t.parameters) for t in result.outputs] == [
        ("output0", "FP32", (3, 1), {}),
        ("output1", "BYTES", (2,), {}),
    ]
    assert result.as_numpy("output0").tolist() == [[1.0], [2.0], [3.0]]
    assert result.as_numpy("output1").tolist() == [b"ab", b""]


def test_golden_binary_response_with_two_outputs_encodes() -> None:
    body = encode_infer_response(BINARY_RESULT)
    assert body.headers == _binary_headers(len(BINARY_RESPONSE_HEAD))
    assert body.join() == BINARY_RESPONSE_HEAD + BINARY_RESPONSE_TAIL
    assert body.length == len(BINARY_RESPONSE_HEAD + BINARY_RESPONSE_TAIL)


def test_pretty_printed_binary_response_from_the_spec_decodes() -> None:
    head = b"""{
  "outputs" : [
    {
      "name" : "output0",
      "shape" : [ 3, 2 ],
      "datatype"  : "FP32",
      "parameters" : {
        "binary_data_size" : 24
      }
    }
  ]
}"""
    body = bytearray(head + struct.pack("<6f", *range(6)))
    result = decode_infer_response(body, len(head))
    assert result.as_numpy("output0").tolist() == [[0, 1], [2, 3], [4, 5]]


JSON_RESPONSE = (
    b'{"model_name":"m","id":"7","parameters":{"triton_final_response":true},"outputs":['
    b'{"name":"y","shape":[2],"datatype":"BYTES","data":["a","\\u00e9"]},'
    b'{"name":"z","shape":[1,2],"datatype":"INT64",'
    b'"data":[-9223372036854775808,9223372036854775807]}]}'
)
JSON_RESULT = InferResult(
    model_name="m",
    id="7",
    parameters={"triton_final_response": True},
    outputs=(
        OutputTensor("y", "BYTES", (2,), _objects(b"a", "é".encode())),
        OutputTensor("z", "INT64", (1, 2), np.array([[-(2**63), 2**63 - 1]], np.int64)),
    ),
)


def test_golden_json_response_decodes() -> None:
    result = decode_infer_response(JSON_RESPONSE)
    assert result.final is True
    assert result.as_str("y").tolist() == ["a", "é"]
    assert result.as_numpy("z").dtype == np.int64
    assert result.as_numpy("z").tolist() == [[-(2**63), 2**63 - 1]]


def test_golden_json_response_encodes() -> None:
    body = encode_infer_response(JSON_RESULT, binary=False)
    assert body.headers == JSON_HEADERS
    assert body.join() == JSON_RESPONSE.replace(b"\\u00e9", "é".encode())


def test_json_response_with_nested_data_decodes() -> None:
    body = (
        b'{"model_name": "m", "outputs": [{"name": "z", "shape": [2, 2], "datatype": "FP64",'
        b' "data": [[1, 2.5], [-0.0, 1e300]]}]}'
    )
    assert decode_infer_response(body).as_numpy("z").tolist() == [[1.0, 2.5], [-0.0, 1e300]]


def test_shared_memory_output_has_no_data_in_the_response() -> None:
    body = (
        b'{"model_name":"m","outputs":[{"name":"y","shape":[4],"datatype":"FP32",'
        b'"parameters":{"shared_memory_region":"out","shared_memory_byte_size":16}}]}'
    )
    result = decode_infer_response(body)
    assert result.outputs[0].data is None
    assert result.outputs[0].parameters == {
        "shared_memory_region": "out",
        "shared_memory_byte_size": 16,
    }
    assert encode_infer_response(result).join() == body


@pytest.mark.parametrize(
    ("body", "header_length"),
    [
        (b"", None),
        (b"[]", None),
        (b'{"outputs": {}}', None),
        (b'{"outputs": [{"name": "y", "shape": [1], "datatype": "FP32"}]}', None),
        (b'{"outputs": [{"name": "y", "shape": [1], "datatype": "FP128", "data": [1]}]}', None),
        (b'{"outputs": [{"name": "y", "shape": [-1], "datatype": "FP32", "data": []}]}', None),
        (b'{"outputs": [{"name": "y", "shape": [true], "datatype": "FP32", "data": [1]}]}', None),
        (b'{"outputs": [{"shape": [1], "datatype": "FP32", "data": [1]}]}', None),
        (b'{"model_name": 5, "outputs": []}', None),
        (b'{"outputs": [], "parameters": {"a": [1]}}', None),
        (b'{"outputs": []}xx', "15"),  # binary data no output accounts for
        (b'{"outputs": []}', "16"),  # header length past the body
        (b'{"outputs": []}', "-1"),
        (b'{"outputs": []}', "fifteen"),
        (b'{"outputs": []}', "1_5"),  # int() would read 15
        (b'{"outputs": []}', "\u0661\u0665"),  # int() would read Arabic-Indic 15
        (
            b'{"outputs":[{"name":"y","shape":[1],"datatype":"FP32",'
            b'"parameters":{"binary_data_size":4}}]}\x00\x00',
            "74",
        ),  # binary data shorter than binary_data_size
        (b'\xff{"outputs": []}', None),
        (b'{"outputs": []', None),
    ],
)
def test_malformed_responses_raise_protocol_error(body: bytes, header_length: str | None) -> None:
    with pytest.raises(ProtocolError):
        decode_infer_response(body, header_length)


def test_header_length_may_be_an_int_or_a_string_with_spaces() -> None:
    body = BINARY_RESPONSE_HEAD + BINARY_RESPONSE_TAIL
    assert decode_infer_response(body, len(BINARY_RESPONSE_HEAD)).model_version == "1"
    assert decode_infer_response(body, f" {len(BINARY_RESPONSE_HEAD)} ").model_version == "1"


def test_header_length_is_read_from_lower_cased_headers() -> None:
    assert header_length_of({"inference-header-content-length": "12"}) == "12"
    assert header_length_of({"content-type": "application/json"}) is None


def test_deeply_nested_json_is_a_protocol_error() -> None:
    with pytest.raises(ProtocolError, match="deeply"):
        decode_infer_response(b"[" * 100_000)
    with pytest.raises(ProtocolError):
        decode_infer_response(
            b'{"outputs":[{"name":"y","shape":[1],"datatype":"INT32","data":'
            + b"[" * 100_000
            + b"1"
            + b"]" * 100_000
            + b"}]}"
        )
    with pytest.raises(ProtocolError):
        decode_json_object(b'{"a":' * 100_000)


# ---------------------------------------------------------------------------------------------
# error bodies


def test_error_body_gives_the_servers_message_and_status() -> None:
    body = b'{"error":"Request for unknown model: \'nope\' is not found"}'
    error = error_from_response(400, body, "Bad Request")
    assert isinstance(error, ServerError)
    assert error.http_status == 400
    assert error.message == "Request for unknown model: 'nope' is not found"
    assert error.body == body
    assert error.grpc_code is None
    assert str(error) == "[HTTP 400] Request for unknown model: 'nope' is not found"


# Error bodies as servers really send them, and the message each gives. The KServe and
# MLServer bodies were captured from kserve 0.21.0 and mlserver 1.7.1 (tests/interop).
ERROR_BODIES = [
    # (status, body, reason, message)
    pytest.param(
        404,
        b'{"error":"Model with name nope does not exist."}',
        "Not Found",
        "Model with name nope does not exist.",
        id="kserve-error",
    ),
    pytest.param(
        400,
        b'{"detail":"There was an error parsing the body"}',
        "Bad Request",
        "There was an error parsing the body",
        id="fastapi-detail",
    ),
    pytest.param(
        422,
        b'{"detail":[{"type":"model_attributes_type","loc":["body"],"msg":"Input should be a '
        b'valid dictionary or object to extract fields from","input":"{\\"inputs\\":[]}'
        b'\\u0000>\\u0000@"}]}',
        "Unprocessable Entity",
        "body: Input should be a valid dictionary or object to extract fields from",
        id="mlserver-binary-request-422",
    ),
    pytest.param(
        422,
        b'{"detail":[{"type":"missing","loc":["body","InferenceRequest","inputs"],"msg":"Field '
        b'required","input":{}},{"type":"bytes_type","loc":["body","bytes"],"msg":"Input should '
        b'be a valid bytes","input":{}}]}',
        "",
        "body.InferenceRequest.inputs: Field required; body.bytes: Input should be a valid bytes",
        id="fastapi-422-two-errors",
    ),
    pytest.param(
        500,
        b"Internal Server Error",
        "Internal Server Error",
        "Internal Server Error",
        id="text-plain",
    ),
    pytest.param(
        502,
        b"<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center>"
        b"<h1>502 Bad Gateway</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n"
        b"</html>\r\n",
        "Bad Gateway",
        "502 Bad Gateway",
        id="nginx-html",
    ),
    pytest.param(
        503,
        b"<!DOCTYPE html><html><body><p>Service &amp; more\n  down</p></body></html>",
        "",
        "Service & more down",
        id="html-without-title",
    ),
    pytest.param(
        404,
        b'{"code": 404, "type": "ModelNotFoundException", "message": "Model not found"}',
        "",
        "Model not found",
        id="torchserve-message",
    ),
    pytest.param(
        500,
        b'{"error": {"message": "upstream failed", "type": "server_error"}}',
        "",
        "upstream failed",
        id="nested-error-message",
    ),
    pytest.param(500, b'"just a string"', "", "just a string", id="json-string"),
    pytest.param(500, b'{"error": 42}', "", '{"error": 42}', id="error-not-a-string"),
    pytest.param(
        500,
        b"\xff\xfe oops",
        "",
        "HTTP status 500 (the 7-byte body is binary, not shown)",
        id="not-utf8",
    ),
    pytest.param(
        500,
        b"\x00\x00\x80?\x00\x00\x00@",
        "Internal Server Error",
        "Internal Server Error (the 8-byte body is binary, not shown)",
        id="tensor-bytes",
    ),
    pytest.param(503, b"", "Service Unavailable", "Service Unavailable", id="empty"),
    pytest.param(503, b"", "", "HTTP status 503 with no error message", id="empty-no-reason"),
    pytest.param(500, b"   ", "Internal Server Error", "Internal Server Error", id="blank"),
    pytest.param(400, b'{"error": ""}', "Bad Request", "Bad Request", id="empty-error"),
    pytest.param(400, b'{"detail": []}', "Bad Request", '{"detail": []}', id="empty-detail"),
    pytest.param(
        422,
        b'{"detail": [{"msg": "", "input": "\\u0000\\u0001"}]}',
        "",
        "the request failed validation (1 error(s))",
        id="detail-without-messages",
    ),
]


@pytest.mark.parametrize(("status", "body", "reason", "message"), ERROR_BODIES)
def test_golden_error_bodies_give_the_servers_message(
    status: int, body: bytes, reason: str, message: str
) -> None:
    error = error_from_response(status, body, reason)
    assert error.http_status == status
    assert error.message == message
    assert error.body == body


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("120", 120.0),
        (" 7 ", 7.0),
        ("0", 0.0),
        ("9" * 12, 999_999_999_999.0),
        ("9" * 13, math.inf),  # longer than any real wait: "a very long time"
        ("Thu, 01 Jan 1970 00:02:00 GMT", 60.0),  # an HTTP date, a minute after `now`
        ("Thu, 01 Jan 1970 00:00:30 GMT", 0.0),  # a date past: retry now
        ("Thursday, 01-Jan-70 00:02:00 GMT", 60.0),  # the obsolete RFC 850 form
        ("1.5", None),
        ("-3", None),
        ("+3", None),
        ("soon", None),
        ("", None),
        ("\u0663", None),  # a digit, but not an ASCII one
        ("Mon, 99 Foo 2020 00:00:00 GMT", None),
        ("Thu, 01 Jan 1970 00:02:00 -0000", None),  # no zone: not an HTTP date
    ],
)
def test_retry_after_values(value: str, seconds: float | None) -> None:
    assert retry_after_seconds(value, now=60.0) == seconds


@given(st.text(max_size=40))
def test_any_retry_after_is_a_wait_or_none(value: str) -> None:
    seconds = retry_after_seconds(value, now=0.0)
    assert seconds is None or seconds >= 0


@given(st.integers(min_value=0, max_value=10**12 - 1))
def test_retry_after_seconds_round_trip(seconds: int) -> None:
    assert retry_after_seconds(str(seconds)) == seconds


def test_an_error_carries_the_servers_retry_after() -> None:
    body = b'{"error":"busy"}'
    assert error_from_response(503, body, headers={"retry-after": "3"}).retry_after == 3.0
    assert error_from_response(503, body, headers={"retry-after": "later"}).retry_after is None
    assert error_from_response(503, body, headers={}).retry_after is None
    assert error_from_response(503, body).retry_after is None


def test_long_error_messages_are_cut_at_a_word_saying_how_much_is_left() -> None:
    body = b"x" * 5000
    error = error_from_response(500, memoryview(body))
    assert error.message == "x" * 500 + " [... 4500 more characters]"
    assert error.body == body
    words = error_from_response(500, b"word " * 1000).message
    assert words == "word " * 99 + "word [... 4500 more characters]"
    long_error = json.dumps({"error": "e" * 3000}).encode()
    assert (
        error_from_response(400, long_error).message == "e" * 2000 + " [... 1000 more characters]"
    )


def test_a_huge_error_body_is_read_only_in_part() -> None:
    body = b"y" * (2 << 20)
    assert error_from_response(500, body).message == (
        "y" * 500 + f" [... {(1 << 20) - 500} more characters and {1 << 20} bytes unread]"
    )


def test_deeply_nested_error_body_falls_back_to_its_text() -> None:
    error = error_from_response(500, b"[" * 100_000)
    assert error.message == "[" * 500 + " [... 99500 more characters]"


def test_many_validation_errors_are_counted_not_listed() -> None:
    detail = [{"loc": ["body", "inputs", i], "msg": "bad", "input": "x"} for i in range(8)]
    message = error_from_response(422, json.dumps({"detail": detail}).encode()).message
    assert message == "; ".join(f"body.inputs.{i}: bad" for i in range(5)) + "; and 3 more"


@pytest.mark.parametrize(
    ("status", "hinted"), [(400, True), (415, True), (422, True), (500, True), (404, False)]
)
def test_a_refused_binary_request_gets_the_hint(status: int, hinted: bool) -> None:
    error = error_from_response(status, b'{"detail":"bad body"}', binary_refused_hint=True)
    assert error.message == (f"bad body ({BINARY_REFUSED_HINT})" if hinted else "bad body")
    assert "binary=False" in BINARY_REFUSED_HINT
    assert error_from_response(status, b'{"detail":"bad body"}').message == "bad body"


# A marker that appears in an error body only inside the request data a server echoes.
_ECHO_MARKER = "TENSOR-DATA-"


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.fixed_dictionaries(
            {
                "loc": st.lists(st.one_of(st.text(max_size=5), st.integers(0, 9)), max_size=3),
                "msg": st.text(max_size=30),
                "type": st.text(max_size=10),
                "input": st.one_of(
                    st.binary(max_size=40).map(lambda b: _ECHO_MARKER + b.decode("latin-1")),
                    st.dictionaries(
                        st.just("data"),
                        st.binary(max_size=20).map(lambda b: _ECHO_MARKER + b.hex()),
                    ),
                ),
            }
        ),
        min_size=1,
        max_size=8,
    ),
    st.sampled_from([400, 422, 500]),
)
def test_validation_errors_never_echo_the_request(detail: list[Any], status: int) -> None:
    """FastAPI's 422 quotes the offending request in ``input``; the message never does."""
    error = error_from_response(status, json.dumps({"detail": detail}).encode())
    assert _ECHO_MARKER not in error.message


@settings(max_examples=300, deadline=None)
@given(
    st.integers(100, 599),
    st.binary(max_size=2000),
    st.sampled_from(["", "Bad Request", "Internal Server Error"]),
)
def test_any_error_body_gives_a_bounded_server_error(status: int, body: bytes, reason: str) -> None:
    error = error_from_response(status, body, reason)
    assert isinstance(error, ServerError)
    assert error.http_status == status
    assert error.message
    assert error.body == body
    assert len(error.message) <= 2100 + len(reason)
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:  # binary: never quoted
        assert "binary, not shown" in error.message
    else:
        if not text.lstrip().startswith(("{", '"')):  # not JSON: plain text, one line
            assert "\n" not in error.message


# ---------------------------------------------------------------------------------------------
# metadata


def test_golden_server_metadata() -> None:
    body = (
        b'{"name":"triton","version":"2.50.0","extensions":["classification","binary_tensor_data"]}'
    )
    metadata = decode_server_metadata(body)
    assert metadata.name == "triton"
    assert metadata.version == "2.50.0"
    assert metadata.supports("binary_tensor_data")


def test_golden_model_metadata() -> None:
    body = (
        b'{"name":"simple","versions":["1"],"platform":"python",'
        b'"inputs":[{"name":"INPUT0","datatype":"INT32","shape":[-1,16]}],'
        b'"outputs":[{"name":"OUTPUT0","datatype":"INT32","shape":[-1,16]}]}'
    )
    metadata = decode_model_metadata(body)
    assert (metadata.name, metadata.platform, metadata.versions) == ("simple", "python", ("1",))
    assert [(t.name, t.datatype, t.shape) for t in metadata.inputs] == [
        ("INPUT0", "INT32", (-1, 16))
    ]
    assert metadata.outputs[0].name == "OUTPUT0"


@pytest.mark.parametrize(
    "body",
    [
        b"{}",
        b'{"name": 1}',
        b'{"name": "t", "extensions": "binary"}',
        b'{"name": "t", "extensions": [1]}',
        b"not json",
    ],
)
def test_malformed_server_metadata_raises_protocol_error(body: bytes) -> None:
    with pytest.raises(ProtocolError):
        decode_server_metadata(body)


@pytest.mark.parametrize(
    "body",
    [
        b'{"versions": ["1"]}',
        b'{"name": "m", "inputs": {}}',
        b'{"name": "m", "inputs": [{"name": "x", "datatype": "FP32", "shape": [-2]}]}',
        b'{"name": "m", "inputs": [{"name": "x", "datatype": "FP32", "shape": [1.5]}]}',
        b'{"name": "m", "outputs": [{"name": "x", "shape": [1]}]}',
        b'{"name": "m", "outputs": [7]}',
    ],
)
def test_malformed_model_metadata_raises_protocol_error(body: bytes) -> None:
    with pytest.raises(ProtocolError):
        decode_model_metadata(body)


# ---------------------------------------------------------------------------------------------
# zero copy


def test_decoded_numeric_outputs_are_views_on_the_received_buffer() -> None:
    received = bytearray(BINARY_RESPONSE_HEAD + BINARY_RESPONSE_TAIL)
    result = decode_infer_response(received, len(BINARY_RESPONSE_HEAD))
    output = result.as_numpy("output0")
    assert np.shares_memory(output, np.frombuffer(received, np.uint8))
    received[len(BINARY_RESPONSE_HEAD) : len(BINARY_RESPONSE_HEAD) + 4] = struct.pack("<f", 9.0)
    assert output[0, 0] == 9.0  # the same memory, not a copy


def test_encoding_a_64_mib_fp32_input_copies_none_of_its_bytes() -> None:
    array = np.zeros((4096, 4096), np.float32)  # 64 MiB
    array[-1, -1] = 1.0
    body = encode_infer_request(InferRequest("m", (InferInput("big", array),)))
    head, tensor_part = body.parts
    view = np.frombuffer(tensor_part, np.uint8)
    assert view.nbytes == array.nbytes == 64 << 20
    assert view.__array_interface__["data"][0] == array.__array_interface__["data"][0]
    assert np.shares_memory(view, array)
    assert body.length == len(head) + (64 << 20)
    assert json.loads(head)["inputs"][0]["parameters"] == {"binary_data_size": 64 << 20}


# ---------------------------------------------------------------------------------------------
# round trips


def _assert_request_round_trip(
    decoded: InferRequest, original: InferRequest, *, binary_outputs: bool
) -> None:
    assert decoded.model_name == original.model_name
    assert decoded.id == original.id
    expected_parameters = dict(original.parameters)
    if not original.outputs and binary_outputs:
        expected_parameters["binary_data_output"] = True
    assert decoded.parameters == expected_parameters
    assert len(decoded.inputs) == len(original.inputs)
    for got, sent in zip(decoded.inputs, original.inputs, strict=True):
        assert (got.name, got.datatype, got.shape) == (sent.name, sent.datatype, sent.shape)
        assert got.parameters == sent.parameters
        assert got.shared_memory == sent.shared_memory
        if sent.data is None:
            assert got.data is None
        else:
            assert got.data is not None
            assert_tensor_equal(got.data, sent.data, sent.datatype)
    assert len(decoded.outputs) == len(original.outputs)
    for got_output, asked in zip(decoded.outputs, original.outputs, strict=True):
        assert got_output.name == asked.name
        assert got_output.class_count == asked.class_count
        assert got_output.parameters == asked.parameters
        assert got_output.shared_memory == asked.shared_memory
        if asked.shared_memory is not None:
            expected_binary = None
        elif asked.binary is not None:
            expected_binary = asked.binary
        else:
            expected_binary = True if binary_outputs else None
        assert got_output.binary is expected_binary


def _round_trip_request(
    request: InferRequest, *, binary_inputs: bool, binary_outputs: bool
) -> tuple[EncodedBody, InferRequest]:
    body = encode_infer_request(request, binary_inputs=binary_inputs, binary_outputs=binary_outputs)
    assert body.length == len(body.join())
    decoded = decode_infer_request(body.join(), _header_length(body), model_name=request.model_name)
    _assert_request_round_trip(decoded, request, binary_outputs=binary_outputs)
    return body, decoded


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(JSON_INFER_REQUESTS, st.booleans())
def test_request_round_trip_in_json_form(request: InferRequest, binary_outputs: bool) -> None:
    body, _ = _round_trip_request(request, binary_inputs=False, binary_outputs=binary_outputs)
    assert body.headers == JSON_HEADERS
    assert len(body.parts) == 1


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(BINARY_INFER_REQUESTS, st.booleans())
def test_request_round_trip_in_binary_form(request: InferRequest, binary_outputs: bool) -> None:
    body, _ = _round_trip_request(request, binary_inputs=True, binary_outputs=binary_outputs)
    head = json.loads(body.parts[0])
    assert all("data" not in entry for entry in head["inputs"])
    with_data = [t for t in request.inputs if t.data is not None]
    assert len(body.parts) == 1 + len(with_data)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(MIXED_INFER_REQUESTS, st.booleans())
def test_request_round_trip_mixing_json_and_binary(
    request: InferRequest, binary_outputs: bool
) -> None:
    _round_trip_request(request, binary_inputs=True, binary_outputs=binary_outputs)


# -- the text-built header of the usual request (codec._plain_binary_request) -----------------

# Names that need JSON escaping or cannot be UTF-8 encoded (a lone surrogate), and plain ones.
ODD_NAMES = st.one_of(
    NAMES, st.sampled_from(['"', "\\", "a\x00\n\x1f", "é", "日本", "\u2028", "\ud800", "x y/z"])
)
# Inputs with nothing but a name and data (the usual case), sent binary or not.
PLAIN_INPUTS = st.builds(
    lambda name, tensor, binary: InferInput(name, tensor[1], datatype=tensor[0], binary=binary),
    ODD_NAMES,
    TENSORS,
    st.sampled_from([None, None, True, False]),
)
# Outputs asked for by name (and binary flag) only.
PLAIN_OUTPUTS = st.builds(
    RequestedOutput, ODD_NAMES, binary=st.sampled_from([None, None, True, False])
)


def _requests(
    inputs: st.SearchStrategy[InferInput],
    outputs: st.SearchStrategy[RequestedOutput],
    parameters: st.SearchStrategy[dict[str, Any]],
) -> st.SearchStrategy[InferRequest]:
    return st.builds(
        InferRequest,
        model_name=NAMES,
        inputs=st.lists(inputs, max_size=3, unique_by=lambda t: t.name).map(tuple),
        outputs=st.lists(outputs, max_size=3, unique_by=lambda o: o.name).map(tuple),
        id=st.one_of(st.just(""), ODD_NAMES),
        parameters=parameters,
    )


# Requests the fast path takes (mostly), and requests with every other kind of tensor mixed in.
PLAIN_REQUESTS = st.one_of(
    _requests(PLAIN_INPUTS, PLAIN_OUTPUTS, st.just({})),
    _requests(
        st.one_of(PLAIN_INPUTS, BINARY_INPUTS, SELF_ROUTED_INPUTS, SHARED_MEMORY_INPUTS),
        st.one_of(PLAIN_OUTPUTS, REQUESTED_OUTPUTS),
        st.one_of(st.just({}), REQUEST_PARAMETERS),
    ),
)


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(PLAIN_REQUESTS, st.sampled_from([True, True, True, False]), st.booleans())
def test_the_plain_request_fast_path_writes_what_the_general_encoder_writes(
    request: InferRequest, binary_inputs: bool, binary_outputs: bool
) -> None:
    plain = codec._plain_binary_request(request, binary_inputs, binary_outputs)
    try:
        general = codec._encode_infer_request(request, binary_inputs, binary_outputs)
    except InvalidInputError:
        assert plain is None  # the fast path leaves refusals to the general encoder
        return
    if plain is not None:
        assert plain.headers == general.headers
        assert [bytes(p) for p in plain.parts] == [bytes(p) for p in general.parts]
        assert plain.length == general.length
    assert (
        encode_infer_request(
            request, binary_inputs=binary_inputs, binary_outputs=binary_outputs
        ).join()
        == general.join()
    )


def test_the_usual_request_takes_the_fast_path() -> None:
    request = InferRequest(
        "simple",
        (
            InferInput("INPUT0", np.arange(16, dtype=np.int32).reshape(1, 16)),
            InferInput("INPUT1", np.ones((1, 16), dtype=np.int32)),
        ),
        (RequestedOutput("OUTPUT0"), RequestedOutput("OUTPUT1")),
    )
    plain = codec._plain_binary_request(request, True, True)
    assert plain is not None
    assert plain.join() == codec._encode_infer_request(request, True, True).join()
    assert codec._plain_binary_request(InferRequest("m", request.inputs), True, True) is not None


# -- decode_json_object's fast path ------------------------------------------------------------

# JSON texts as servers send them (compact, spaced, with a BOM or surrounding whitespace),
# non-objects, broken and truncated ones, deep nesting, and bytes that are not UTF-8.
_JSON_TEXTS = st.one_of(
    st.recursive(
        st.one_of(
            st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=4)
        ),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner),
        max_leaves=6,
    ).flatmap(
        lambda value: st.sampled_from(
            [
                json.dumps(value),
                json.dumps(value, separators=(",", ":"), ensure_ascii=False),
                json.dumps(value, indent=1),
            ]
        )
    ),
    st.text(max_size=12),
)


@settings(max_examples=1000, deadline=None)
@given(
    st.one_of(
        st.tuples(
            st.sampled_from(["", "\ufeff", " ", "\ufeff\ufeff", "\n"]),
            _JSON_TEXTS,
            st.sampled_from(["", " ", "}", "x", "\r\n"]),
        ).map(lambda t: "".join(t).encode("utf-8", "surrogatepass")),
        st.binary(max_size=40),
        st.just(b'{"a":' * 5000 + b"1" + b"}" * 5000),
    ),
    st.sampled_from([bytes, bytearray, memoryview]),
)
def test_the_json_object_fast_path_gives_what_the_general_path_gives(
    data: bytes,
    kind: type,
) -> None:
    def outcome(decode: Any) -> Any:
        try:
            return decode(kind(data), "body")
        except ProtocolError as exc:
            return ("error", exc.message, exc.value)

    assert outcome(decode_json_object) == outcome(codec._decode_json_object)


def _assert_result_round_trip(decoded: InferResult, original: InferResult) -> None:
    assert (decoded.model_name, decoded.model_version, decoded.id) == (
        original.model_name,
        original.model_version,
        original.id,
    )
    assert decoded.parameters == original.parameters
    assert len(decoded.outputs) == len(original.outputs)
    for got, sent in zip(decoded.outputs, original.outputs, strict=True):
        assert (got.name, got.datatype, got.shape) == (sent.name, sent.datatype, sent.shape)
        assert got.parameters == sent.parameters
        if sent.data is None:
            assert got.data is None
        else:
            assert got.data is not None
            assert_tensor_equal(got.data, sent.data, Datatype(sent.datatype))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(INFER_RESULTS)
def test_response_round_trip_in_binary_form(result: InferResult) -> None:
    body = encode_infer_response(result, binary=True)
    received = bytearray(body.join())
    decoded = decode_infer_response(received, _header_length(body))
    _assert_result_round_trip(decoded, result)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(JSON_INFER_RESULTS)
def test_response_round_trip_in_json_form(result: InferResult) -> None:
    body = encode_infer_response(result, binary=False)
    assert body.headers == JSON_HEADERS
    _assert_result_round_trip(decode_infer_response(body.join()), result)


@pytest.mark.parametrize("binary", [False, True])
def test_response_naming_an_output_twice_is_a_protocol_error(binary: bool) -> None:
    """Which of the two would ``output("y")`` mean? A broken server, not a result."""
    entry: dict[str, Any] = {"name": "y", "datatype": "INT32", "shape": [1]}
    if binary:
        entry["parameters"] = {"binary_data_size": 4}
    else:
        entry["data"] = [1]
    head = json.dumps({"outputs": [entry, {**entry, "name": "x"}, entry]}).encode()
    body, length = (head + bytes(12), len(head)) if binary else (head, None)
    with pytest.raises(ProtocolError, match="'y' more than once"):
        decode_infer_response(body, length)


# ---------------------------------------------------------------------------------------------
# totality: any body decodes to what its JSON says, or raises ProtocolError

# JSON scalars that break naive decoders: beyond int64/uint64/float64/float32, -0.0, a lone
# surrogate (valid JSON as "\ud800", not encodable as UTF-8), empty text, and the NaN/Infinity
# literals Python's json module writes and reads.
AWKWARD_SCALARS = st.sampled_from(
    [0, -1, 1, 2**63, 2**64, -(2**63) - 1, 10**400, 1e300, -0.0, "\ud800", "", math.inf, math.nan]
)
# Any JSON scalar, the awkward ones included.
JSON_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=4),
    AWKWARD_SCALARS,
)
# Any JSON value, nested a few levels.
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=6,
)
# Shapes a broken peer might send: ordinary ones, huge dimensions (with or without a zero),
# more dimensions than numpy holds, negative dimensions, non-lists.
PEER_SHAPES = st.one_of(
    st.lists(st.integers(0, 3), max_size=3),
    st.lists(st.sampled_from([0, 1, 2, 2**31, 2**62, 2**63, 2**64]), min_size=1, max_size=3),
    st.lists(st.sampled_from([0, 1]), min_size=60, max_size=70),
    st.lists(st.integers(-2, 3), max_size=3),
    JSON_VALUES,
)
# Tensor elements a broken peer might send: any scalar, or a short list of them.
PEER_ELEMENTS = st.one_of(AWKWARD_SCALARS, JSON_SCALARS, st.lists(JSON_SCALARS, max_size=2))
# Datatype names: every real one, a few that are not.
PEER_DATATYPES = st.one_of(
    st.sampled_from([d.value for d in Datatype]), st.sampled_from(["fp32", "", "STRING"])
)
# Parameters of a tensor entry: binary data sizes and shared-memory regions, valid or not.
PEER_TENSOR_PARAMETERS = st.one_of(
    st.fixed_dictionaries(
        {},
        optional={
            "binary_data_size": st.one_of(st.integers(0, 16), JSON_SCALARS),
            "shared_memory_region": st.one_of(st.text(max_size=3), JSON_SCALARS),
        },
    ),
    JSON_VALUES,
)


def _peer_data(shape: Any) -> st.SearchStrategy[Any]:
    """Tensor data for an entry of ``shape``: often exactly as many elements as it says."""
    any_data = st.one_of(st.lists(PEER_ELEMENTS, max_size=4), JSON_VALUES)
    if not isinstance(shape, list) or not all(type(d) is int and d >= 0 for d in shape):
        return any_data
    count = math.prod(shape)
    if count > 8:
        return any_data
    return st.one_of(st.lists(PEER_ELEMENTS, min_size=count, max_size=count), any_data)


def _peer_entry(shape: Any) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {"name": st.text(max_size=3), "datatype": PEER_DATATYPES, "shape": st.just(shape)},
        optional={"data": _peer_data(shape), "parameters": PEER_TENSOR_PARAMETERS},
    )


# Tensor entries of a broken peer: valid field types, values that may not add up.
PEER_TENSOR_ENTRIES = PEER_SHAPES.flatmap(_peer_entry)
# Response JSON of a broken peer: outputs from PEER_TENSOR_ENTRIES, or anything at all.
PEER_RESPONSES = st.fixed_dictionaries(
    {"outputs": st.one_of(st.lists(PEER_TENSOR_ENTRIES, max_size=3), JSON_VALUES)},
    optional={
        "model_name": st.one_of(st.text(max_size=3), JSON_VALUES),
        "id": JSON_VALUES,
        "parameters": JSON_VALUES,
    },
)
# Header-length header values: absent, numbers in and out of range, junk text.
HEADER_LENGTHS = st.one_of(
    st.none(),
    st.integers(-3, 400),
    st.integers(-3, 400).map(str),
    st.sampled_from(["", " ", "+5", "1_0", "0x10", "1e2", "\u0661", "9" * 5000]),
    st.text(max_size=4),
)


def _assert_decodes_as_its_json_says_or_raises(body: bytes, header_length: Any) -> None:
    """The totality property: a result consistent with the JSON header, or ProtocolError."""
    try:
        result = decode_infer_response(body, header_length)
    except ProtocolError:
        return
    head = body if header_length is None else body[: int(header_length)]
    entries = json.loads(bytes(head)).get("outputs", [])
    assert len(result.outputs) == len(entries)
    for output, entry in zip(result.outputs, entries, strict=True):
        assert output.name == entry["name"]
        assert output.datatype == entry["datatype"]
        assert output.shape == tuple(entry["shape"])
        if output.data is not None:
            assert output.data.shape == output.shape
            assert output.data.dtype == numpy_dtype(Datatype(output.datatype))
            if output.datatype == "BYTES":
                # reshape, not .flat: numpy's iterator stops at 32 dimensions, shapes at 64
                assert all(type(e) is bytes for e in output.data.reshape(-1))


@settings(max_examples=2000, deadline=None)
@given(st.binary(max_size=200), HEADER_LENGTHS)
def test_arbitrary_bytes_decode_or_raise_protocol_error(body: bytes, header_length: Any) -> None:
    _assert_decodes_as_its_json_says_or_raises(body, header_length)


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(PEER_RESPONSES, st.binary(max_size=32), st.booleans(), st.data())
def test_responses_of_a_broken_peer_decode_or_raise_protocol_error(
    header: dict[str, Any], tail: bytes, binary: bool, data: st.DataObject
) -> None:
    head = json.dumps(header).encode()
    if binary:
        header_length = data.draw(st.one_of(st.just(len(head)), HEADER_LENGTHS))
        _assert_decodes_as_its_json_says_or_raises(head + tail, header_length)
    else:
        _assert_decodes_as_its_json_says_or_raises(head, None)


def _rewrite_field(head: bytes, data: st.DataObject) -> bytes | None:
    """The header with one field of one output replaced, deleted or added (None if the header
    is no longer a response object with outputs, after an earlier mutation)."""
    try:
        header = json.loads(head)
    except ValueError:
        return None
    outputs = header.get("outputs") if isinstance(header, dict) else None
    if not isinstance(outputs, list):
        return None
    if not outputs:
        header["outputs"] = data.draw(st.lists(PEER_TENSOR_ENTRIES, max_size=2))
        return json.dumps(header).encode()
    entry = outputs[data.draw(st.integers(0, len(outputs) - 1))]
    if not isinstance(entry, dict):
        return None
    field = data.draw(
        st.sampled_from(["binary_data_size", "name", "datatype", "shape", "data", "parameters"])
    )
    if field == "binary_data_size":
        parameters = entry.get("parameters")
        if not isinstance(parameters, dict):
            parameters = entry["parameters"] = {}
        parameters[field] = data.draw(st.one_of(st.integers(-2, 64), JSON_SCALARS))
    elif field in entry and data.draw(st.booleans()):
        del entry[field]
    else:
        entry[field] = data.draw(
            {
                "name": st.one_of(st.text(max_size=3), JSON_VALUES),
                "datatype": PEER_DATATYPES,
                "shape": PEER_SHAPES,
                "data": _peer_data(entry.get("shape")),
                "parameters": PEER_TENSOR_PARAMETERS,
            }[field]
        )
    return json.dumps(header).encode()


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.one_of(
        st.tuples(INFER_RESULTS, st.just(True)), st.tuples(JSON_INFER_RESULTS, st.booleans())
    ),
    st.data(),
)
def test_mutated_responses_decode_or_raise_protocol_error(
    result_and_form: tuple[InferResult, bool], data: st.DataObject
) -> None:
    result, binary = result_and_form
    encoded = encode_infer_response(result, binary=binary)
    head = bytes(encoded.parts[0])
    tail = b"".join(bytes(p) for p in encoded.parts[1:])
    header_length: Any = len(head) if len(encoded.parts) > 1 else None
    for _ in range(data.draw(st.integers(1, 3))):
        mutation = data.draw(
            st.sampled_from(["field", "field", "truncate", "flip", "header_length", "append"])
        )
        if mutation == "field":
            rewritten = _rewrite_field(head, data)
            if rewritten is not None:
                head = rewritten
                header_length = len(head) if header_length is not None else None
        elif mutation == "truncate":
            whole = head + tail
            cut = data.draw(st.integers(0, max(len(whole) - 1, 0)))
            head, tail = whole[: min(cut, len(head))], whole[len(head) : cut]
        elif mutation == "flip" and head + tail:
            whole = bytearray(head + tail)
            index = data.draw(st.integers(0, len(whole) - 1))
            whole[index] ^= data.draw(st.integers(1, 255))
            head, tail = bytes(whole[: len(head)]), bytes(whole[len(head) :])
        elif mutation == "header_length":
            near = len(head) + data.draw(st.integers(-2, 2))
            header_length = data.draw(st.one_of(HEADER_LENGTHS, st.just(near)))
        elif mutation == "append":
            tail += data.draw(st.binary(min_size=1, max_size=8))
    _assert_decodes_as_its_json_says_or_raises(head + tail, header_length)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(MIXED_INFER_REQUESTS, st.data())
def test_mutated_requests_decode_or_raise_protocol_error(
    request: InferRequest, data: st.DataObject
) -> None:
    encoded = encode_infer_request(request)
    whole = bytearray(encoded.join())
    header_length: Any = _header_length(encoded)
    mutation = data.draw(st.sampled_from(["output-field", "input-field", "flip", "truncate"]))
    if mutation == "flip" and whole:
        whole[data.draw(st.integers(0, len(whole) - 1))] ^= data.draw(st.integers(1, 255))
    elif mutation == "truncate":
        del whole[data.draw(st.integers(0, len(whole))) :]
    elif mutation.endswith("field"):
        length = len(whole) if header_length is None else int(header_length)
        header = json.loads(bytes(whole[:length]))
        key = "outputs" if mutation == "output-field" else "inputs"
        entries = header.setdefault(key, [])
        if entries:
            entry = entries[data.draw(st.integers(0, len(entries) - 1))]
            parameters = entry.setdefault("parameters", {})
            field = data.draw(
                st.sampled_from(
                    [
                        "binary_data",
                        "classification",
                        "shared_memory_region",
                        "shared_memory_byte_size",
                        "shared_memory_offset",
                        "binary_data_size",
                    ]
                )
            )
            parameters[field] = data.draw(JSON_VALUES)
        head = json.dumps(header).encode()
        whole = bytearray(head) + whole[length:]
        header_length = None if header_length is None else len(head)
    with contextlib.suppress(ProtocolError):
        decode_infer_request(bytes(whole), header_length)
