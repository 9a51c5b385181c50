"""Body previews: JSON pretty-printed, binary sections decoded, gRPC messages described."""

from __future__ import annotations

import json

import numpy as np
import pytest

from kserve_v2.conformance.evidence import (
    Exchange,
    Message,
    format_json,
    grpc_message_preview,
    headers_of,
    http_body_preview,
)

pytest.importorskip("google.protobuf")


def _binary_body(
    *tensors: tuple[str, str, list[int], bytes], extra: bytes = b""
) -> tuple[dict[str, str], list[bytes]]:
    header = {
        "outputs": [
            {"name": n, "datatype": d, "shape": s, "parameters": {"binary_data_size": len(b)}}
            for n, d, s, b in tensors
        ]
    }
    head = json.dumps(header).encode()
    return (
        {"inference-header-content-length": str(len(head))},
        [head, *(b for *_, b in tensors), extra],
    )


def test_binary_sections_are_decoded() -> None:
    headers, parts = _binary_body(
        ("A", "INT32", [2], np.array([1, -2], "<i4").tobytes()),
        ("B", "BYTES", [2], b"\x02\x00\x00\x00hi\x01\x00\x00\x00\x00"),
        ("C", "BOOL", [3], b"\x01\x00\x01"),
    )
    text = http_body_preview(headers, parts)
    assert '"name": "A"' in text
    assert "[binary section 1: output 'A', INT32 [2], 8 bytes] [1, -2]" in text
    assert "[binary section 2: output 'B', BYTES [2], 11 bytes] [b'hi', b'\\x00']" in text
    assert "[binary section 3: output 'C', BOOL [3], 3 bytes] [True, False, True]" in text


def test_inconsistent_binary_sizes_are_shown_not_raised() -> None:
    headers, parts = _binary_body(("A", "INT32", [3], b"\x01\x00\x00\x00"), extra=b"\xff" * 2)
    text = http_body_preview(headers, parts)
    assert "(cannot decode as INT32" in text
    headers, parts = _binary_body(("A", "INT32", [1], b"\x01\x00\x00\x00"), extra=b"\xff" * 3)
    assert "[3 bytes after the last binary section]" in http_body_preview(headers, parts)
    head = (
        b'{"outputs":[{"name":"A","datatype":"FP32","shape":[4],'
        b'"parameters":{"binary_data_size":16}}]}'
    )
    text = http_body_preview(
        {"inference-header-content-length": str(len(head))}, [head, b"\x00" * 4]
    )
    assert "only 4 bytes left in the body" in text


def test_raw_binary_and_plain_bodies() -> None:
    assert http_body_preview({"inference-header-content-length": "0"}, [b"\x00" * 8]).startswith(
        "[raw binary body, 8 bytes]"
    )
    assert (
        http_body_preview({}, [b'{"a":[1,2],"b":{"c":null}}'])
        == '{\n  "a": [1, 2],\n  "b": {\n    "c": null\n  }\n}'
    )
    assert http_body_preview({}, [b"not json \xff"]) == "not json \\xff"
    assert http_body_preview({}, []) == ""


def test_format_json_keeps_plain_arrays_inline() -> None:
    assert format_json({"shape": [1, 2], "inputs": [{"x": 1}]}) == (
        '{\n  "shape": [1, 2],\n  "inputs": [\n    {\n      "x": 1\n    }\n  ]\n}'
    )


def test_grpc_messages_are_described() -> None:
    from kserve_v2.grpc.codec import generated

    pb = generated()
    request = pb.ModelInferRequest(model_name="m", id="7")
    request.inputs.add(name="X", datatype="INT64", shape=[2])
    request.raw_input_contents.append(np.array([5, 6], "<i8").tobytes())
    text = grpc_message_preview(
        "/inference.GRPCInferenceService/ModelInfer", request.SerializeToString(), response=False
    )
    assert 'model_name: "m"' in text
    assert "[raw_input_contents[0]: 'X', INT64 [2], 16 bytes] [5, 6]" in text
    stream = pb.ModelStreamInferResponse(error_message="boom")
    text = grpc_message_preview("ModelStreamInfer", stream.SerializeToString(), response=True)
    assert text == "error_message: 'boom'"
    assert grpc_message_preview("ModelInfer", b"\xff\xff", response=True).startswith(
        "[undecodable ModelInferResponse"
    )
    assert grpc_message_preview("NoSuchRpc", b"\x01", response=True) == "[1 bytes] b'\\x01'"


def test_exchange_render_and_redaction() -> None:
    exchange = Exchange(
        "http",
        Message("GET /v2", headers_of([("Authorization", "Bearer secret")]), ""),
        Message("200 OK", headers_of({"content-type": "application/json"}), "{}"),
    )
    assert exchange.render() == (
        ">> HTTP GET /v2\n   Authorization: <redacted>\n<< 200 OK\n"
        "   content-type: application/json\n   {}"
    )
    assert exchange.to_json()["request"]["headers"] == [["Authorization", "<redacted>"]]
