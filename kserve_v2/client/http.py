"""The HTTP/REST side of the client, without I/O.

Each method of :class:`HTTPProtocol` returns an :class:`HTTPCall`: the request to send and the
function that turns the response into the method's result. The sync and async clients only move
the request through their transport (and tell the wire hook), so all logic lives here once.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from kserve_v2.client.endpoint import Endpoint
from kserve_v2.client.wire import WireHook, WireMessage
from kserve_v2.errors import InvalidInputError
from kserve_v2.messages import InferRequest, InferResult, ModelMetadata, ServerMetadata
from kserve_v2.rest import codec
from kserve_v2.rest.compression import SUPPORTED_ENCODINGS, compress
from kserve_v2.rest.paths import QueryParams, RestPaths, with_query
from kserve_v2.transport.base import (
    AsyncTransport,
    BytesLike,
    HTTPRequest,
    HTTPResponse,
    Transport,
)

__all__ = ["HTTPCall", "HTTPProtocol", "Headers"]

T = TypeVar("T")

#: Extra headers: a mapping or a sequence of (name, value) pairs.
Headers = Mapping[str, str] | Sequence[tuple[str, str]]


def _header_items(headers: Headers | None) -> list[tuple[str, str]]:
    if not headers:
        return []
    items = headers.items() if isinstance(headers, Mapping) else headers
    out = []
    for key, value in items:
        if not isinstance(key, str) or not isinstance(value, str):
            raise InvalidInputError(f"header {key!r}: names and values must be str", value=key)
        if "\r" in key or "\n" in key or "\r" in value or "\n" in value or ":" in key:
            raise InvalidInputError(f"header {key!r} contains forbidden characters", value=key)
        out.append((key, value))
    return out


def _check_encoding(value: str | None, what: str) -> str | None:
    if value is not None and value not in SUPPORTED_ENCODINGS:
        raise InvalidInputError(
            f"{what} must be one of {SUPPORTED_ENCODINGS} or None, got {value!r}", value=value
        )
    return value


@dataclass(frozen=True, slots=True)
class HTTPCall(Generic[T]):
    """A prepared HTTP exchange: what to send and how to read the answer.

    ``run`` and ``arun`` are the only places where the client meets a transport: they send
    the request, tell the wire hook, and decode.
    """

    request: HTTPRequest
    decode: Callable[[HTTPResponse], T]

    def run(self, transport: Transport, hook: WireHook | None) -> T:
        if hook is None:
            return self.decode(transport.handle_request(self.request))
        started = _hook_send(hook, self.request)
        try:
            response = transport.handle_request(self.request)
        except BaseException as exc:
            _hook_receive(hook, self.request, started, None, exc)
            raise
        _hook_receive(hook, self.request, started, response)
        return self.decode(response)

    async def arun(self, transport: AsyncTransport, hook: WireHook | None) -> T:
        if hook is None:
            return self.decode(await transport.handle_async_request(self.request))
        started = _hook_send(hook, self.request)
        try:
            response = await transport.handle_async_request(self.request)
        except BaseException as exc:
            _hook_receive(hook, self.request, started, None, exc)
            raise
        _hook_receive(hook, self.request, started, response)
        return self.decode(response)


def _hook_send(hook: WireHook, request: HTTPRequest) -> float:
    hook(
        WireMessage(
            "send", "http", request.method, request.target, tuple(request.headers), request.body
        )
    )
    return time.perf_counter()


def _hook_receive(
    hook: WireHook,
    request: HTTPRequest,
    started: float,
    response: HTTPResponse | None,
    error: BaseException | None = None,
) -> None:
    hook(
        WireMessage(
            "receive",
            "http",
            request.method,
            request.target,
            tuple(response.headers.items()) if response is not None else (),
            (response.body,) if response is not None else (),
            response.status if response is not None else None,
            time.perf_counter() - started,
            error,
        )
    )


def _ok(response: HTTPResponse) -> HTTPResponse:
    if not 200 <= response.status < 300:
        raise codec.error_from_response(response.status, response.body, response.reason)
    return response


def _is_ok(response: HTTPResponse) -> bool:
    return response.status == 200


def _json(response: HTTPResponse) -> Any:
    body = _ok(response).body
    if not memoryview(body).nbytes:
        return {}
    return codec.decode_json_object(body, "response")


def _nothing(response: HTTPResponse) -> None:
    _ok(response)


def _infer_result(response: HTTPResponse) -> InferResult:
    _ok(response)
    return codec.decode_infer_response(response.body, codec.header_length_of(response.headers))


class HTTPProtocol:
    """Builds HTTP calls for one server; shared by :class:`Client` and :class:`AsyncClient`."""

    def __init__(
        self,
        endpoint: Endpoint,
        *,
        headers: Headers | None = None,
        timeout: float | None = None,
        binary: bool = True,
        request_compression: str | None = None,
        accept_compression: str | None = None,
    ) -> None:
        self.endpoint = endpoint
        self.paths = RestPaths(endpoint.base_path)
        self.timeout = timeout
        self.binary = binary
        self.request_compression = _check_encoding(request_compression, "request_compression")
        _check_encoding(accept_compression, "accept_compression")
        base: list[tuple[str, str]] = []
        if accept_compression:
            base.append(("Accept-Encoding", accept_compression))
        base.extend(_header_items(headers))
        self._base_headers = tuple(base)

    # -- building blocks ------------------------------------------------------------------

    def request(
        self,
        method: str,
        target: str,
        *,
        headers: Headers | None = None,
        query: QueryParams | None = None,
        timeout: float | None = None,
        body_headers: Sequence[tuple[str, str]] = (),
        body: Sequence[BytesLike] = (),
        compression: str | None = None,
    ) -> HTTPRequest:
        """One request with the client's default headers, compression and timeout applied."""
        all_headers = [*self._base_headers, *body_headers, *_header_items(headers)]
        encoding = _check_encoding(compression, "compression") or self.request_compression
        if body and encoding:
            body = (compress(body, encoding),)
            all_headers.append(("Content-Encoding", encoding))
        return HTTPRequest(
            method,
            with_query(target, query),
            all_headers,
            body,
            self.timeout if timeout is None else timeout,
        )

    def get(self, target: str, decode: Callable[[HTTPResponse], T], **kw: Any) -> HTTPCall[T]:
        return HTTPCall(self.request("GET", target, **kw), decode)

    def post_json(
        self, target: str, obj: Any, decode: Callable[[HTTPResponse], T], **kw: Any
    ) -> HTTPCall[T]:
        body = codec.encode_json(obj)
        return HTTPCall(
            self.request(
                "POST",
                target,
                body=(body,),
                body_headers=(("Content-Type", codec.JSON_TYPE),),
                **kw,
            ),
            decode,
        )

    # -- core protocol ---------------------------------------------------------------------

    def server_live(self, **kw: Any) -> HTTPCall[bool]:
        return self.get(self.paths.server_live(), _is_ok, **kw)

    def server_ready(self, **kw: Any) -> HTTPCall[bool]:
        return self.get(self.paths.server_ready(), _is_ok, **kw)

    def model_ready(self, model: str, version: str = "", **kw: Any) -> HTTPCall[bool]:
        return self.get(self.paths.model_ready(model, version), _is_ok, **kw)

    def server_metadata(self, **kw: Any) -> HTTPCall[ServerMetadata]:
        return self.get(
            self.paths.server_metadata(),
            lambda r: codec.decode_server_metadata(_ok(r).body),
            **kw,
        )

    def model_metadata(self, model: str, version: str = "", **kw: Any) -> HTTPCall[ModelMetadata]:
        return self.get(
            self.paths.model_metadata(model, version),
            lambda r: codec.decode_model_metadata(_ok(r).body),
            **kw,
        )

    def infer(
        self, request: InferRequest, *, binary: bool | None = None, **kw: Any
    ) -> HTTPCall[InferResult]:
        use_binary = self.binary if binary is None else binary
        body = codec.encode_infer_request(
            request, binary_inputs=use_binary, binary_outputs=use_binary
        )
        target = self.paths.model_infer(request.model_name, request.model_version)
        return HTTPCall(
            self.request("POST", target, body_headers=body.headers, body=body.parts, **kw),
            _infer_result,
        )
