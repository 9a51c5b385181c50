"""What the sync and asyncio HTTP compat clients share: tensors, results, result shapes."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kserve_v2.arguments import build_infer_request
from kserve_v2.compat._base import (
    InferInputBase,
    InferRequestedOutputBase,
    InferResultBase,
    infer_arguments_of,
    query_arguments,
    translated,
)
from kserve_v2.compat._client_aio import Protocol
from kserve_v2.compat.utils import InferenceServerException
from kserve_v2.datatypes import Datatype, serialized_size, to_json_data
from kserve_v2.messages import InferResult as NativeResult
from kserve_v2.messages import ModelMetadata, RepositoryModel, ServerMetadata
from kserve_v2.options import TLSOptions
from kserve_v2.rest.codec import (
    HEADER_LENGTH,
    decode_infer_response,
    decode_json_object,
    encode_infer_request,
)
from kserve_v2.rest.compression import decompress

__all__ = [
    "HTTPProtocol",
    "InferInput",
    "InferRequestedOutput",
    "InferResult",
    "base_url",
    "generate_request_body",
    "model_metadata_dict",
    "parse_response_body",
    "repository_index_list",
    "server_metadata_dict",
]


class HTTPProtocol(Protocol):
    """HTTP: ``query_params`` become the native ``query`` (where the native method takes
    them); errors carry the HTTP status."""

    _protocol = "http"

    def _native_options(self, method: Callable[..., Any], options: dict[str, Any]) -> None:
        options.update(query_arguments(method, options.pop("query_params", None)))


def base_url(url: str, ssl: bool) -> str:
    """The native client's URL for tritonclient's ``host:port[/path]``."""
    if "://" in url:
        raise InferenceServerException(msg="url should not include the scheme")
    return f"{'https' if ssl else 'http'}://{url}"


def tls_options(
    ssl: bool,
    ssl_options: Mapping[str, Any] | None,
    ssl_context_factory: Any,
    insecure: bool,
    ssl_context: Any = None,
) -> TLSOptions | None:
    """TLS settings from geventhttpclient-style ``ssl_options`` (``ca_certs``, ``certfile``,
    ``keyfile``), an ``ssl_context_factory`` or a ready ``ssl_context``."""
    if not ssl:
        return None
    options = dict(ssl_options or {})
    context = ssl_context
    if context is None and ssl_context_factory is not None:
        context = ssl_context_factory()
    return TLSOptions(
        ca_file=options.get("ca_certs"),
        cert_file=options.get("certfile"),
        key_file=options.get("keyfile"),
        ssl_context=context,
        verify=not insecure,
    )


class InferInput(InferInputBase):
    """An input tensor of a request: ``InferInput(name, shape, datatype)``, then
    :meth:`set_data_from_numpy` or :meth:`set_shared_memory` (either may be called again to
    reuse the object).

    Example::

        x = InferInput("INPUT0", [1, 16], "INT32")
        x.set_data_from_numpy(np.arange(16, dtype=np.int32).reshape(1, 16))
    """

    def set_data_from_numpy(self, input_tensor: Any, binary_data: bool = True) -> InferInput:
        """Send ``input_tensor`` (dtype and shape must match the input's), in binary form or
        as JSON (``binary_data=False``)."""
        self._set_data(input_tensor, bool(binary_data))
        return self


class InferRequestedOutput(InferRequestedOutputBase):
    """An output to return: in binary form or as JSON, optionally the top ``class_count``
    classifications (``"score:index[:label]"`` strings) instead of the tensor."""

    def __init__(self, name: str, binary_data: bool = True, class_count: int = 0) -> None:
        super().__init__(name, class_count, bool(binary_data))


def _json_outputs(outputs: Sequence[InferRequestedOutputBase] | None) -> frozenset[str]:
    return frozenset(o.name() for o in outputs or () if o.binary is False)


class InferResult(InferResultBase):
    """The result of an inference: :meth:`as_numpy` per output, :meth:`get_response` for
    the response's JSON header as a dict.

    Built by the client (from the native result) or by :meth:`from_response_body`.
    """

    def __init__(self, response: Any, verbose: bool) -> None:
        self._header: dict[str, Any] | None = None
        self._json_outputs: frozenset[str] = frozenset()
        if isinstance(response, NativeResult):
            self._result = response
        elif isinstance(response, bytes | bytearray | memoryview):  # a JSON-only body
            self._result, self._header = _decode_body(response, None)
        else:
            raise InferenceServerException(
                msg=f"InferResult needs a result or a response body, got {type(response)}"
            )
        if verbose:
            print(self.get_response())

    @classmethod
    def from_response_body(
        cls,
        response_body: bytes,
        verbose: bool = False,
        header_length: int | None = None,
        content_encoding: str | None = None,
    ) -> InferResult:
        """Decode a captured response body (``header_length``: the
        ``Inference-Header-Content-Length`` header; ``content_encoding``: ``gzip``/``deflate``).
        """
        with translated("http"):
            if content_encoding:
                response_body = decompress(response_body, content_encoding)
            native, header = _decode_body(response_body, header_length)
        result = cls(native, verbose)
        result._header = header
        return result

    def get_output(self, name: str) -> dict[str, Any] | None:
        """Output ``name``'s entry of :meth:`get_response`, or ``None``."""
        for output in self.get_response().get("outputs", ()):
            if output.get("name") == name:
                return dict(output)
        return None

    def get_response(self) -> dict[str, Any]:
        """The response's JSON header: ``model_name``, ``model_version``, ``id`` and
        ``parameters`` when present, and ``outputs`` (binary ones with their
        ``binary_data_size``, JSON ones with their ``data``)."""
        if self._header is None:
            self._header = _rebuild_header(self._result, self._json_outputs)
        return self._header


def _decode_body(
    body: bytes | bytearray | memoryview, header_length: int | None
) -> tuple[NativeResult, dict[str, Any]]:
    with translated("http"):
        result = decode_infer_response(body, header_length)
        view = memoryview(body)
        head = view[:header_length] if header_length is not None else view
        return result, decode_json_object(head, "inference response")


def _rebuild_header(result: NativeResult, json_outputs: frozenset[str]) -> dict[str, Any]:
    header: dict[str, Any] = {"id": result.id} if result.id else {}
    header["model_name"] = result.model_name
    if result.model_version:
        header["model_version"] = result.model_version
    if result.parameters:
        header["parameters"] = dict(result.parameters)
    outputs = []
    for tensor in result.outputs:
        entry: dict[str, Any] = {
            "name": tensor.name,
            "datatype": tensor.datatype,
            "shape": list(tensor.shape),
        }
        params = dict(tensor.parameters)
        if tensor.data is not None:
            datatype = Datatype(tensor.datatype)
            if tensor.name in json_outputs:
                entry["data"] = to_json_data(tensor.data, datatype)
            else:
                params["binary_data_size"] = serialized_size(tensor.data, datatype)
        if params:
            entry["parameters"] = params
        outputs.append(entry)
    header["outputs"] = outputs
    return header


def wrap_result(
    result: NativeResult, outputs: Sequence[InferRequestedOutputBase] | None, verbose: bool
) -> InferResult:
    """A compat result for a native one (remembering which outputs came as JSON)."""
    wrapped = InferResult(result, False)
    wrapped._json_outputs = _json_outputs(outputs)
    if verbose:
        print(wrapped.get_response())
    return wrapped


def generate_request_body(
    inputs: Sequence[InferInputBase],
    outputs: Sequence[InferRequestedOutputBase] | None = None,
    request_id: str = "",
    sequence_id: int | str = 0,
    sequence_start: bool = False,
    sequence_end: bool = False,
    priority: int = 0,
    timeout: int | None = None,
    parameters: Mapping[str, Any] | None = None,
) -> tuple[bytes, int | None]:
    """An inference request body and its JSON header's length (``None`` when the body is
    JSON only), for sending with another HTTP client."""
    with translated("http"):
        kwargs = infer_arguments_of(locals())
        # The model's name is not part of the body: any name passes the checks.
        request = build_infer_request("model", kwargs.pop("inputs"), **kwargs)
        body = encode_infer_request(request)
    length = dict(body.headers).get(HEADER_LENGTH)
    return body.join(), None if length is None else int(length)


def parse_response_body(
    response_body: bytes,
    verbose: bool = False,
    header_length: int | None = None,
    content_encoding: str | None = None,
) -> InferResult:
    """:meth:`InferResult.from_response_body`."""
    return InferResult.from_response_body(response_body, verbose, header_length, content_encoding)


def server_metadata_dict(metadata: ServerMetadata) -> dict[str, Any]:
    """``GET v2``'s JSON."""
    return {
        "name": metadata.name,
        "version": metadata.version,
        "extensions": list(metadata.extensions),
    }


def model_metadata_dict(metadata: ModelMetadata) -> dict[str, Any]:
    """``GET v2/models/{name}``'s JSON."""

    def tensors(items: Any) -> list[dict[str, Any]]:
        return [{"name": t.name, "datatype": t.datatype, "shape": list(t.shape)} for t in items]

    return {
        "name": metadata.name,
        "versions": list(metadata.versions),
        "platform": metadata.platform,
        "inputs": tensors(metadata.inputs),
        "outputs": tensors(metadata.outputs),
    }


def repository_index_list(models: list[RepositoryModel]) -> list[dict[str, Any]]:
    """``POST v2/repository/index``'s JSON: fields Triton leaves out when empty are left
    out."""
    out = []
    for model in models:
        entry = {"name": model.name}
        for key in ("version", "state", "reason"):
            value = getattr(model, key)
            if value:
                entry[key] = value
        out.append(entry)
    return out
