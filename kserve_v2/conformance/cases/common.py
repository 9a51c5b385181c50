"""What many cases share: sample tensors per datatype, response checks, decoders."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from kserve_v2.conformance.context import CaseFailed, Context, RestResponse, RpcError
from kserve_v2.datatypes import Datatype, float32_to_bf16_bits, serialize
from kserve_v2.errors import ProtocolError
from kserve_v2.messages import InferResult

__all__ = [
    "DATATYPES",
    "GRPC_CONTENTS",
    "JSON_DATATYPES",
    "Sample",
    "decode_grpc",
    "decode_rest",
    "expect_client_error_status",
    "expect_error_object",
    "expect_grpc_error",
    "expect_json",
    "identity_model",
    "same_array",
]


@dataclass(frozen=True)
class Sample:
    """A tensor for the identity model of one datatype, with its edge values."""

    datatype: str
    array: npt.NDArray[Any]
    #: the JSON form of ``array`` (flat), or None for FP16/BF16 (no JSON form)
    json_data: list[Any] | None

    @property
    def model(self) -> str:
        return identity_model(self.datatype)

    def wire(self) -> bytes:
        """The binary form (binary-data extension, gRPC raw contents)."""
        if self.datatype == "BF16":
            return float32_to_bf16_bits(self.array).tobytes()
        return bytes(serialize(self.array, Datatype(self.datatype)))

    @property
    def shape(self) -> list[int]:
        return list(self.array.shape)


def identity_model(datatype: str) -> str:
    return f"identity_{datatype.lower()}"


def _sample(datatype: str, values: list[Any], dtype: Any, json_ok: bool = True) -> Sample:
    array = np.array([values], dtype=dtype)
    return Sample(datatype, array, list(values) if json_ok else None)


#: One sample per datatype, shape [1, 3], with each type's extreme values.
DATATYPES: Final[dict[str, Sample]] = {
    s.datatype: s
    for s in (
        _sample("BOOL", [True, False, True], np.bool_),
        _sample("UINT8", [0, 1, 255], np.uint8),
        _sample("UINT16", [0, 1, 65535], np.uint16),
        _sample("UINT32", [0, 1, 4294967295], np.uint32),
        _sample("UINT64", [0, 1, 18446744073709551615], np.uint64),
        _sample("INT8", [-128, 0, 127], np.int8),
        _sample("INT16", [-32768, 0, 32767], np.int16),
        _sample("INT32", [-2147483648, 0, 2147483647], np.int32),
        _sample("INT64", [-9223372036854775808, 0, 9223372036854775807], np.int64),
        _sample("FP16", [-1.5, 0.0, 65504.0], np.float16, json_ok=False),
        _sample("FP32", [-1.5, 0.25, 3.4028234663852886e38], np.float32),
        _sample("FP64", [-1.5, 0.1, 1.7976931348623157e308], np.float64),
        _sample("BF16", [-1.5, 0.25, 2.0], np.float32, json_ok=False),
        Sample(
            "BYTES",
            np.array([[b"conformance", b"", b"\xc3\xa9t\xc3\xa9"]], dtype=object),
            ["conformance", "", "\u00e9t\u00e9"],
        ),
    )
}

#: The datatypes that have a JSON form.
JSON_DATATYPES: Final = tuple(d for d, s in DATATYPES.items() if s.json_data is not None)

#: The typed ``InferTensorContents`` field of each datatype (FP16 and BF16 have none).
GRPC_CONTENTS: Final[dict[str, str]] = {
    "BOOL": "bool_contents",
    "INT8": "int_contents",
    "INT16": "int_contents",
    "INT32": "int_contents",
    "INT64": "int64_contents",
    "UINT8": "uint_contents",
    "UINT16": "uint_contents",
    "UINT32": "uint_contents",
    "UINT64": "uint64_contents",
    "FP32": "fp32_contents",
    "FP64": "fp64_contents",
    "BYTES": "bytes_contents",
}


def same_array(actual: Any, expected: npt.NDArray[Any]) -> bool:
    """Equal shape and values (BYTES compared as bytes, floats exactly)."""
    actual = np.asarray(actual)
    if actual.shape != expected.shape:
        return False
    if expected.dtype == object:
        return [bytes(x) for x in actual.reshape(-1)] == [bytes(x) for x in expected.reshape(-1)]
    return bool(np.array_equal(actual.astype(expected.dtype), expected))


def expect_json(ctx: Context, response: RestResponse, status: int = 200) -> Any:
    """The JSON body of a response that must have ``status``."""
    if response.status != status:
        ctx.fail(f"expected HTTP {status}, got {response.status}: {response.body[:300]!r}")
    return response.json()


def expect_error_object(ctx: Context, response: RestResponse, what: str = "the request") -> str:
    """An HTTP error status with ``{"error": <string>}`` as the body; returns the message."""
    if response.status < 400:
        ctx.fail(f"{what} should fail, but the server answered HTTP {response.status}")
    try:
        obj = response.json()
    except CaseFailed:
        ctx.fail(
            f"HTTP {response.status}, but the body is not the JSON error object: "
            f"{response.body[:300]!r}"
        )
    if not isinstance(obj, dict) or not isinstance(obj.get("error"), str):
        ctx.fail(f'HTTP {response.status}, but the body is not {{"error": <string>}}: {obj!r:.300}')
    return str(obj["error"])


def expect_client_error_status(ctx: Context, response: RestResponse, what: str) -> None:
    """A 4xx status for a request the client got wrong."""
    if not 400 <= response.status < 500:
        ctx.fail(
            f"{what} is the client's error, so a 4xx status is expected; "
            f"the server answered HTTP {response.status}"
        )


def expect_grpc_error(ctx: Context, response: Any, what: str = "the call") -> RpcError:
    """A gRPC status other than OK."""
    if not isinstance(response, RpcError):
        ctx.fail(f"{what} should fail with an error status, but the server answered OK")
    return response


def decode_rest(ctx: Context, response: RestResponse) -> InferResult:
    """A 200 inference response decoded by the project's REST codec."""
    from kserve_v2.rest.codec import decode_infer_response

    if response.status != 200:
        ctx.fail(f"inference failed: HTTP {response.status}: {response.body[:300]!r}")
    try:
        return decode_infer_response(
            response.body, response.headers.get("inference-header-content-length")
        )
    except ProtocolError as exc:
        raise CaseFailed(f"the inference response is malformed: {exc}") from None


def decode_grpc(ctx: Context, response: Any) -> InferResult:
    """A ``ModelInferResponse`` (parsed) decoded by the project's gRPC codec (raw or typed
    contents)."""
    from kserve_v2.grpc.codec import decode_infer_response

    if isinstance(response, RpcError):
        ctx.fail(f"inference failed: {response.code}: {response.message}")
    try:
        return decode_infer_response(response.SerializeToString())
    except ProtocolError as exc:
        raise CaseFailed(f"the inference response is malformed: {exc}") from None


def output_array(ctx: Context, result: InferResult, name: str) -> npt.NDArray[Any]:
    names = [o.name for o in result.outputs]
    if name not in names:
        ctx.fail(f"output {name!r} missing from the response (outputs: {names})")
    return result.as_numpy(name)


def params_of(obj: Mapping[str, Any] | None) -> dict[str, Any]:
    return dict(obj) if isinstance(obj, Mapping) else {}
