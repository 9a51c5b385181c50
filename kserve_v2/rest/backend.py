"""The HTTP/REST side of the client, without I/O.

Each method of :class:`HTTPBackend` returns an :class:`HTTPCall`: the request to send and the
function that turns the response into the method's result. The sync and async clients only move
the request through their transport (and tell the wire hook), so all logic lives here once.
"""

from __future__ import annotations

import base64
import functools
import json
import math
import time
from collections.abc import AsyncGenerator, Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Final, Generic, TypeVar
from urllib.parse import urlsplit

from kserve_v2.arguments import (
    Headers,
    InputsArg,
    OutputsArg,
    check_bool,
    check_compression,
    check_model_name,
    check_optional_model,
    check_query,
    check_region_name,
    check_statistics_target,
    check_timeout,
    check_version,
    cuda_shm_registration,
    header_pairs,
    log_settings_update,
    normalize_load_request,
    system_shm_registration,
    trace_settings_update,
)
from kserve_v2.backend import Call, MetadataProbe
from kserve_v2.datatypes import BytesLike
from kserve_v2.endpoint import Endpoint
from kserve_v2.errors import DeadlineExceededError, InvalidInputError, ProtocolError, ServerError
from kserve_v2.hooks import WireHook, WireMessage
from kserve_v2.interfaces import AsyncTransport, HTTPRequest, HTTPResponse, Transport
from kserve_v2.messages import (
    InferRequest,
    InferResult,
    ModelMetadata,
    RepositoryModel,
    ServerMetadata,
)
from kserve_v2.metrics import MetricFamily, parse_metrics
from kserve_v2.rest import codec
from kserve_v2.rest.compression import compress
from kserve_v2.rest.paths import QueryParams, RestPaths, with_query
from kserve_v2.rest.sse import ServerSentEvent, SSEDecoder

if TYPE_CHECKING:
    from kserve_v2.backend import Backend

__all__ = ["DEFAULT_METRICS_PORT", "HTTPCall", "HTTPBackend", "HTTPStreamCall", "metrics_call"]

#: Triton's default metrics port, used when ``metrics()`` is given no URL.
DEFAULT_METRICS_PORT: Final = 8002

T = TypeVar("T")


def _header_items(headers: Headers | None) -> list[tuple[str, str]]:
    """``headers`` checked (:func:`~kserve_v2.arguments.header_pairs`) and then held to
    HTTP's own rule: nothing that could end the header line or the header name early."""
    if headers is None:
        return []
    pairs = header_pairs(headers)
    for key, value in pairs:
        if "\r" in key or "\n" in key or "\r" in value or "\n" in value or ":" in key:
            raise InvalidInputError(f"header {key!r} contains forbidden characters", value=key)
    return pairs


@dataclass(frozen=True, slots=True)
class HTTPCall(Generic[T]):
    """A prepared HTTP exchange: what to send and how to read the answer.

    ``run`` and ``arun`` are the only places where the client meets a transport: they send
    the request, tell the wire hook, and decode.
    """

    request: HTTPRequest
    decode: Callable[[HTTPResponse], T]

    @property
    def timeout(self) -> float | None:
        return self.request.timeout

    def with_timeout(self, timeout: float | None) -> HTTPCall[T]:
        return HTTPCall(replace(self.request, timeout=timeout), self.decode)

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


@dataclass(frozen=True, slots=True)
class _FirstInferCall:
    """An inference of a client that leaves the binary/JSON choice to the server, before the
    server's metadata is known: learn it (once per client), then infer with the choice made:
    ``binary_call`` (built, so its arguments are checked, when the call is), or the call that
    ``json_call`` builds. The JSON body is built only if chosen: for a large tensor it costs
    many times the tensor's size (a Python object per element), where the binary body is
    views of the caller's arrays."""

    backend: HTTPBackend
    binary_call: Call[InferResult, Transport, AsyncTransport]
    json_call: Callable[[], Call[InferResult, Transport, AsyncTransport]]
    headers: Headers | None
    timeout: float | None

    def _call(self) -> Call[InferResult, Transport, AsyncTransport]:
        # JSON also when the server could not be asked this time (the next call asks again).
        return self.binary_call if self.backend._binary_default is True else self.json_call()

    def with_timeout(self, timeout: float | None) -> _FirstInferCall:
        json_call = self.json_call
        return replace(
            self,
            binary_call=self.binary_call.with_timeout(timeout),
            json_call=lambda: json_call().with_timeout(timeout),
            timeout=timeout,
        )

    def run(self, transport: Transport, hook: WireHook | None) -> InferResult:
        self.backend.learn(transport, hook, self.headers, self.timeout)
        return self._call().run(transport, hook)

    async def arun(self, transport: AsyncTransport, hook: WireHook | None) -> InferResult:
        await self.backend.alearn(transport, hook, self.headers, self.timeout)
        return await self._call().arun(transport, hook)


def _response(response: HTTPResponse) -> HTTPResponse:
    return response


@dataclass(frozen=True, slots=True)
class _BinaryRequestCall:
    """A request with binary tensors to a server not known to take them (it does not
    advertise ``binary_tensor_data``, or it has not been asked).

    A success shows that it takes them (later binary requests are plain calls). A refusal
    (:data:`~kserve_v2.rest.codec.REFUSAL_STATUSES`) says that the server may lack the
    extension, when its metadata (asked now if need be) does not list it.
    """

    backend: HTTPBackend
    request: HTTPRequest
    decode: Callable[[HTTPResponse], InferResult]
    headers: Headers | None
    timeout: float | None

    def with_timeout(self, timeout: float | None) -> _BinaryRequestCall:
        return replace(self, request=replace(self.request, timeout=timeout), timeout=timeout)

    def run(self, transport: Transport, hook: WireHook | None) -> InferResult:
        response = HTTPCall(self.request, _response).run(transport, hook)
        if 200 <= response.status < 300:
            self.backend._binary_hint = False
            return self.decode(response)
        if self.backend._binary_hint is None and response.status in codec.REFUSAL_STATUSES:
            self.backend.learn(transport, hook, self.headers, self.timeout)
        raise self._error(response)

    async def arun(self, transport: AsyncTransport, hook: WireHook | None) -> InferResult:
        response = await HTTPCall(self.request, _response).arun(transport, hook)
        if 200 <= response.status < 300:
            self.backend._binary_hint = False
            return self.decode(response)
        if self.backend._binary_hint is None and response.status in codec.REFUSAL_STATUSES:
            await self.backend.alearn(transport, hook, self.headers, self.timeout)
        raise self._error(response)

    def _error(self, response: HTTPResponse) -> ServerError:
        return codec.error_from_response(
            response.status,
            response.body,
            response.reason,
            binary_refused_hint=self.backend._binary_hint is True,
            headers=response.headers,
        )


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
        raise codec.error_from_response(
            response.status, response.body, response.reason, headers=response.headers
        )
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


def _json_any(response: HTTPResponse, what: str) -> Any:
    body = bytes(_ok(response).body)
    try:
        return json.loads(body)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise ProtocolError(f"{what} is not valid JSON: {exc}", value=body[:200]) from None


def _json_objects(response: HTTPResponse, what: str) -> list[dict[str, Any]]:
    """A JSON array of objects (the shared-memory status answers)."""
    obj = _json_any(response, what)
    if not isinstance(obj, list) or not all(isinstance(item, dict) for item in obj):
        raise ProtocolError(f"{what} must be a JSON array of objects", value=obj)
    return obj


def _repository_index(response: HTTPResponse) -> list[RepositoryModel]:
    models = []
    for index, entry in enumerate(_json_objects(response, "repository index")):
        fields = {}
        for key in ("name", "version", "state", "reason"):
            value = entry.get(key, "")
            if not isinstance(value, str) or (key == "name" and not value):
                raise ProtocolError(
                    f"repository index[{index}]: {key!r} must be a string, got {value!r:.80}",
                    value=entry,
                )
            fields[key] = value
        models.append(RepositoryModel(**fields))
    return models


def _error_in_body(obj: Mapping[str, Any], status: int) -> ServerError | None:
    """The error a 2xx generate answer can carry (Triton reports some failures that way)."""
    message = obj.get("error")
    if message is None:
        return None
    text = message if isinstance(message, str) else json.dumps(message)
    return ServerError(text, http_status=status, body=json.dumps(obj).encode("utf-8"))


def _generate_result(response: HTTPResponse) -> dict[str, Any]:
    obj = codec.decode_json_object(_ok(response).body, "generate response")
    error = _error_in_body(obj, response.status)
    if error is not None:
        raise error
    return obj


def _generate_event(event: ServerSentEvent, status: int) -> dict[str, Any]:
    """One ``generate_stream`` response; an error event raises :class:`ServerError`."""
    if event.event == "error":
        try:
            obj = json.loads(event.data)
        except (ValueError, RecursionError):
            obj = None  # a plain-text error event: its data is the message
        message = obj.get("error") if isinstance(obj, dict) else None
        raise ServerError(
            message if isinstance(message, str) else event.data,
            http_status=status,
            body=event.data.encode("utf-8"),
        )
    obj = codec.decode_json_object(event.data.encode("utf-8"), "generate_stream event")
    error = _error_in_body(obj, status)
    if error is not None:
        raise error
    return obj


def _is_event_stream(headers: Mapping[str, str]) -> bool:
    content_type = headers.get("content-type", "")
    return content_type.split(";", 1)[0].strip().lower() == "text/event-stream"


@dataclass(frozen=True, slots=True)
class HTTPStreamCall(Generic[T]):
    """A prepared exchange answered by Server-Sent Events (``generate_stream``).

    :meth:`stream` and :meth:`astream` are generators: the request is sent on the first
    ``next()``, events are parsed as the bytes arrive (:class:`~kserve_v2.rest.sse.SSEDecoder`)
    and each becomes one ``decode_event(event, status)`` result. A response that is not an
    event stream (an error status, or a plain JSON answer) goes to ``decode_whole``, which
    raises for errors. Closing the generator early closes the response (its connection is
    dropped, not reused). The wire hook sees the request, then one ``receive`` message with
    the bytes read when the stream ends, fails or is closed.

    The request's timeout bounds the wait for each next event, not only for each next read
    (which the transport bounds): a server that keeps sending bytes without completing an
    event (one trickled a byte at a time, comments for ever) fails the stream with
    :class:`~kserve_v2.errors.DeadlineExceededError` once that long has passed since the
    head or the last event. The caller's own time between events does not count.
    """

    request: HTTPRequest
    decode_event: Callable[[ServerSentEvent, int], T]
    decode_whole: Callable[[HTTPResponse], T]
    #: The server, named in a deadline error.
    url: str = ""

    def _deadline(self) -> float:
        timeout = self.request.timeout
        return math.inf if timeout is None else time.monotonic() + timeout

    def _expired(self) -> DeadlineExceededError:
        return DeadlineExceededError(
            f"no complete server-sent event within the {self.request.timeout} s timeout "
            "(the server sent bytes, but no event)",
            url=self.url,
        )

    def stream(self, transport: Transport, hook: WireHook | None) -> Generator[T, None, None]:
        started = _hook_send(hook, self.request) if hook is not None else 0.0
        received: list[bytes] = []
        head: HTTPResponse | None = None
        error: BaseException | None = None
        try:
            with transport.stream(self.request) as response:
                status = response.status
                head = HTTPResponse(status, response.headers)
                if not (200 <= status < 300 and _is_event_stream(response.headers)):
                    body = response.read()
                    received.append(body)
                    yield self.decode_whole(HTTPResponse(status, response.headers, body))
                    return
                decoder = SSEDecoder()
                deadline = self._deadline()
                for piece in response.iter_bytes():
                    if hook is not None:
                        received.append(piece)
                    events = decoder.feed(piece)
                    if events:
                        for event in events:
                            yield self.decode_event(event, status)
                        deadline = self._deadline()
                    elif time.monotonic() >= deadline:
                        raise self._expired()
                _check_stream_end(decoder)
        except GeneratorExit:
            raise  # the caller stopped early: not a failure
        except BaseException as exc:
            error = exc
            raise
        finally:
            if hook is not None:
                _hook_stream_end(hook, self.request, started, head, received, error)

    async def astream(
        self, transport: AsyncTransport, hook: WireHook | None
    ) -> AsyncGenerator[T, None]:
        started = _hook_send(hook, self.request) if hook is not None else 0.0
        received: list[bytes] = []
        head: HTTPResponse | None = None
        error: BaseException | None = None
        try:
            async with transport.astream(self.request) as response:
                status = response.status
                head = HTTPResponse(status, response.headers)
                if not (200 <= status < 300 and _is_event_stream(response.headers)):
                    body = await response.aread()
                    received.append(body)
                    yield self.decode_whole(HTTPResponse(status, response.headers, body))
                    return
                decoder = SSEDecoder()
                deadline = self._deadline()
                async for piece in response.aiter_bytes():
                    if hook is not None:
                        received.append(piece)
                    events = decoder.feed(piece)
                    if events:
                        for event in events:
                            yield self.decode_event(event, status)
                        deadline = self._deadline()
                    elif time.monotonic() >= deadline:
                        raise self._expired()
                _check_stream_end(decoder)
        except GeneratorExit:
            raise
        except BaseException as exc:
            error = exc
            raise
        finally:
            if hook is not None:
                _hook_stream_end(hook, self.request, started, head, received, error)


def _check_stream_end(decoder: SSEDecoder) -> None:
    # The SSE specification drops an unfinished last event silently; a client that did so
    # would hand out a truncated answer as if it were complete.
    if decoder.pending:
        raise ProtocolError("the event stream ended in the middle of an event")


def _hook_stream_end(
    hook: WireHook,
    request: HTTPRequest,
    started: float,
    head: HTTPResponse | None,
    received: list[bytes],
    error: BaseException | None,
) -> None:
    response = None
    if head is not None:
        response = HTTPResponse(head.status, head.headers, b"".join(received), head.reason)
    _hook_receive(hook, request, started, response, error)


def _metrics_target(endpoint: Endpoint, url: str | None) -> str:
    """The absolute URL to fetch metrics from: ``url``, or the server's host on port 8002."""
    if url is None:
        # Triton serves metrics over plain HTTP, whatever the inference endpoints use.
        return f"http://{Endpoint('http', endpoint.host, DEFAULT_METRICS_PORT).authority}/metrics"
    if not isinstance(url, str) or not url.strip():
        raise InvalidInputError(f"metrics URL must be a non-empty string, got {url!r}", value=url)
    text = url.strip()
    if "://" not in text:
        text = f"http://{text}"
    parts = urlsplit(text)
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise InvalidInputError(
            f"metrics URL {url!r} must be http://host:port[/path] or https://...", value=url
        )
    try:
        parts.port  # noqa: B018  (parses the port; a bad one raises ValueError)
    except ValueError:
        raise InvalidInputError(f"invalid port in metrics URL {url!r}", value=url) from None
    path = parts.path or "/metrics"
    query = f"?{parts.query}" if parts.query else ""
    return f"{parts.scheme.lower()}://{parts.netloc}{path}{query}"


def metrics_call(
    endpoint: Endpoint,
    url: str | None = None,
    *,
    headers: Headers | None = None,
    query: QueryParams | None = None,
    timeout: float | None = None,
) -> HTTPCall[dict[str, MetricFamily]]:
    """A ``GET`` of the Prometheus metrics of the server at ``endpoint`` (or at ``url``).

    Only the per-call ``headers`` are sent: the client's default headers (credentials, most
    likely) are meant for the inference endpoint, and ``url`` may name another host.
    ``query`` is added to ``url``'s own query string, if it has one.
    """
    target = _metrics_target(endpoint, url)
    if query is not None:
        check_query(query)
        target = with_query(target, query)
    request = HTTPRequest("GET", target, _header_items(headers), (), check_timeout(timeout))
    return HTTPCall(request, lambda r: parse_metrics(_ok(r).body))


class HTTPBackend:
    """Builds HTTP calls for one server; shared by :class:`Client` and :class:`AsyncClient`."""

    def __init__(
        self,
        endpoint: Endpoint,
        *,
        headers: Headers | None = None,
        query: QueryParams | None = None,
        timeout: float | None = None,
        binary: bool | None = None,
        request_compression: str | None = None,
        accept_compression: str | None = None,
    ) -> None:
        self.endpoint = endpoint
        self.paths = RestPaths(endpoint.base_path)
        self.timeout = check_timeout(timeout)
        #: The client's choice: binary tensors (True), JSON (False), or as the server
        #: advertises (None: binary when it lists ``binary_tensor_data``).
        self.binary = None if binary is None else check_bool(binary, "binary")
        #: The server's metadata, learned on first need (see :class:`MetadataProbe`).
        self.probe = MetadataProbe()
        # The default in force: the client's choice, or the server's once learned (None
        # until then). infer() reads it on every call, so it is one attribute.
        self._binary_default = self.binary
        # Whether a refused binary request says the server may lack the extension: True when
        # the server does not advertise it, False when it does or took a binary request,
        # None while unknown (a refusal then asks the metadata).
        self._binary_hint: bool | None = None
        self.request_compression = check_compression(request_compression, "request_compression")
        check_compression(accept_compression, "accept_compression")
        base: list[tuple[str, str]] = []
        if accept_compression:
            base.append(("Accept-Encoding", accept_compression))
        base.extend(_header_items(headers))
        self._base_headers = tuple(base)

    def name_the_server_in_targets(self) -> None:
        """Make every request target an absolute URL of the client's server
        (``http://host:port/v2/...``), so that a transport the caller passed in sends to the
        client's URL whatever origin, if any, it was made for."""
        endpoint = self.endpoint
        self.paths = RestPaths(endpoint.base_path, f"{endpoint.scheme}://{endpoint.authority}")

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
        # The checks and calls below are skipped for what is absent: this runs per request.
        all_headers = [*self._base_headers, *body_headers]
        if headers is not None:
            all_headers += _header_items(headers)
        encoding = self.request_compression
        if compression is not None:
            encoding = check_compression(compression) or encoding
        if body and encoding:
            body = (compress(body, encoding),)
            all_headers.append(("Content-Encoding", encoding))
        if query is not None:
            check_query(query)
            target = with_query(target, query)
        return HTTPRequest(
            method,
            target,
            all_headers,
            body,
            self.timeout if timeout is None else check_timeout(timeout),
        )

    def get(
        self,
        target: str,
        decode: Callable[[HTTPResponse], T],
        *,
        headers: Headers | None = None,
        query: QueryParams | None = None,
        timeout: float | None = None,
    ) -> HTTPCall[T]:
        return HTTPCall(
            self.request("GET", target, headers=headers, query=query, timeout=timeout), decode
        )

    def post(
        self,
        target: str,
        decode: Callable[[HTTPResponse], T],
        obj: Any = None,
        *,
        headers: Headers | None = None,
        query: QueryParams | None = None,
        timeout: float | None = None,
    ) -> HTTPCall[T]:
        """A ``POST`` of ``obj`` as JSON (``None``: an empty body)."""
        if obj is None:
            return HTTPCall(
                self.request("POST", target, headers=headers, query=query, timeout=timeout), decode
            )
        return HTTPCall(
            self.request(
                "POST",
                target,
                headers=headers,
                query=query,
                timeout=timeout,
                body=(codec.encode_json(obj),),
                body_headers=(("Content-Type", codec.JSON_TYPE),),
            ),
            decode,
        )

    # -- core protocol ---------------------------------------------------------------------

    def server_live(
        self,
        *,
        headers: Headers | None = None,
        query: QueryParams | None = None,
        timeout: float | None = None,
    ) -> HTTPCall[bool]:
        return self.get(
            self.paths.server_live(), _is_ok, headers=headers, query=query, timeout=timeout
        )

    def server_ready(
        self,
        *,
        headers: Headers | None = None,
        query: QueryParams | None = None,
        timeout: float | None = None,
    ) -> HTTPCall[bool]:
        return self.get(
            self.paths.server_ready(), _is_ok, headers=headers, query=query, timeout=timeout
        )

    def model_ready(
        self,
        model: str,
        version: str | int = "",
        *,
        headers: Headers | None = None,
        query: QueryParams | None = None,
        timeout: float | None = None,
    ) -> HTTPCall[bool]:
        target = self.paths.model_ready(check_model_name(model), check_version(version))
        return self.get(target, _is_ok, headers=headers, query=query, timeout=timeout)

    def server_metadata(
        self,
        *,
        headers: Headers | None = None,
        query: QueryParams | None = None,
        timeout: float | None = None,
    ) -> HTTPCall[ServerMetadata]:
        return self.get(
            self.paths.server_metadata(),
            lambda r: self.probe.remember(codec.decode_server_metadata(_ok(r).body)),
            headers=headers,
            query=query,
            timeout=timeout,
        )

    def model_metadata(
        self,
        model: str,
        version: str | int = "",
        *,
        headers: Headers | None = None,
        query: QueryParams | None = None,
        timeout: float | None = None,
    ) -> HTTPCall[ModelMetadata]:
        return self.get(
            self.paths.model_metadata(check_model_name(model), check_version(version)),
            lambda r: codec.decode_model_metadata(_ok(r).body),
            headers=headers,
            query=query,
            timeout=timeout,
        )

    def infer_arrays(
        self,
        model: str,
        inputs: InputsArg,
        outputs: OutputsArg | None,
        version: str | int,
        *,
        headers: Headers | None = None,
        timeout: float | None = None,
        compression: str | None = None,
    ) -> HTTPCall[InferResult] | None:
        """None: every REST request takes :meth:`infer` (its JSON header is made per call)."""
        return None

    def infer(
        self,
        request: InferRequest,
        *,
        binary: bool | None = None,
        headers: Headers | None = None,
        query: QueryParams | None = None,
        timeout: float | None = None,
        compression: str | None = None,
    ) -> Call[InferResult, Transport, AsyncTransport]:
        """The inference call; the binary/JSON default is the client's, or else the server's.

        With ``binary=None`` for the client and for the call, the first call of a client asks
        the server's metadata (once; see :meth:`learn`) and the later ones cost nothing more.
        A binary request to a server not known to take binary tensors says so if refused.
        """
        # The request was checked when it was built (build_infer_request); the options are
        # checked by self.request, each only when given.
        use_binary = self._binary_default if binary is None else check_bool(binary, "binary")
        if use_binary is None:
            build = functools.partial(
                self.infer,
                request,
                headers=headers,
                query=query,
                timeout=timeout,
                compression=compression,
            )
            return _FirstInferCall(
                self, build(binary=True), functools.partial(build, binary=False), headers, timeout
            )
        body = codec.encode_infer_request(
            request, binary_inputs=use_binary, binary_outputs=use_binary
        )
        target = self.paths.model_infer(request.model_name, request.model_version)
        # Triton answers outputs placed in shared memory with neither data nor parameters;
        # the decoder needs to know which ones those are.
        placements = {}
        for output in request.outputs:  # a loop: a comprehension costs a function call
            if output.shared_memory:
                placements[output.name] = output.shared_memory
        decode = (
            _infer_result
            if not placements
            else lambda r: codec.decode_infer_response(
                _ok(r).body, codec.header_length_of(r.headers), shared_memory=placements
            )
        )
        http_request = self.request(
            "POST",
            target,
            headers=headers,
            query=query,
            timeout=timeout,
            body_headers=body.headers,
            body=body.parts,
            compression=compression,
        )
        # A body of more than one part carries binary tensors: to a server not known to take
        # them, the call says so if they are refused. Once known, this costs one comparison.
        if self._binary_hint is not False and len(body.parts) > 1:
            return _BinaryRequestCall(self, http_request, decode, headers, timeout)
        return HTTPCall(http_request, decode)

    # -- what the server advertises ----------------------------------------------------------

    def learn(
        self,
        transport: Transport,
        hook: WireHook | None,
        headers: Headers | None,
        timeout: float | None,
    ) -> None:
        """Ask the server's metadata through ``transport`` unless known (with a call's
        ``headers`` and ``timeout``); see :class:`MetadataProbe`."""
        make = functools.partial(self.server_metadata, headers=headers, timeout=timeout)
        self._learned(self.probe.get(make, transport, hook))

    async def alearn(
        self,
        transport: AsyncTransport,
        hook: WireHook | None,
        headers: Headers | None,
        timeout: float | None,
    ) -> None:
        """The asyncio twin of :meth:`learn`."""
        make = functools.partial(self.server_metadata, headers=headers, timeout=timeout)
        self._learned(await self.probe.aget(make, transport, hook))

    def _learned(self, metadata: ServerMetadata | None) -> None:
        if not self.probe.known:  # no answer this time: JSON for now, ask again next time
            return
        advertised = metadata is not None and metadata.supports("binary_tensor_data")
        if self.binary is None:
            self._binary_default = advertised
        if advertised:
            self._binary_hint = False
        elif self._binary_hint is None:
            self._binary_hint = True

    # -- Triton extensions (kserve_v2/client/extensions.py documents the result shapes) ------

    def model_config(
        self,
        model: str,
        version: str | int = "",
        *,
        headers: Headers | None = None,
        query: QueryParams | None = None,
        timeout: float | None = None,
    ) -> HTTPCall[dict[str, Any]]:
        target = self.paths.model_config(check_model_name(model), check_version(version))
        return self.get(target, _json, headers=headers, query=query, timeout=timeout)

    def model_statistics(
        self,
        model: str = "",
        version: str | int = "",
        *,
        headers: Headers | None = None,
        query: QueryParams | None = None,
        timeout: float | None = None,
    ) -> HTTPCall[dict[str, Any]]:
        target = self.paths.model_statistics(*check_statistics_target(model, version))
        return self.get(target, _json, headers=headers, query=query, timeout=timeout)

    def repository_index(
        self,
        *,
        ready_only: bool = False,
        headers: Headers | None = None,
        query: QueryParams | None = None,
        timeout: float | None = None,
    ) -> HTTPCall[list[RepositoryModel]]:
        body = {"ready": True} if check_bool(ready_only, "ready_only") else {}
        return self.post(
            self.paths.repository_index(),
            _repository_index,
            body,
            headers=headers,
            query=query,
            timeout=timeout,
        )

    def load_model(
        self,
        model: str,
        *,
        config: str | Mapping[str, Any] | None = None,
        files: Mapping[str, bytes] | None = None,
        headers: Headers | None = None,
        query: QueryParams | None = None,
        timeout: float | None = None,
    ) -> HTTPCall[None]:
        target = self.paths.repository_load(check_model_name(model))
        config_text, wire_files = normalize_load_request(config, files)
        parameters: dict[str, str] = {}
        if config_text is not None:
            parameters["config"] = config_text
        for key, content in wire_files.items():
            # REST carries file contents as base64 strings (gRPC as bytes).
            parameters[key] = base64.b64encode(content).decode("ascii")
        body = {"parameters": parameters} if parameters else None
        return self.post(target, _nothing, body, headers=headers, query=query, timeout=timeout)

    def unload_model(
        self,
        model: str,
        *,
        unload_dependents: bool = False,
        headers: Headers | None = None,
        query: QueryParams | None = None,
        timeout: float | None = None,
    ) -> HTTPCall[None]:
        target = self.paths.repository_unload(check_model_name(model))
        dependents = check_bool(unload_dependents, "unload_dependents")
        body = {"parameters": {"unload_dependents": True}} if dependents else None
        return self.post(target, _nothing, body, headers=headers, query=query, timeout=timeout)

    def system_shared_memory_status(
        self,
        region: str = "",
        *,
        headers: Headers | None = None,
        query: QueryParams | None = None,
        timeout: float | None = None,
    ) -> HTTPCall[list[dict[str, Any]]]:
        return self.get(
            self.paths.shared_memory("system", "status", check_region_name(region, required=False)),
            lambda r: _json_objects(r, "system shared memory status"),
            headers=headers,
            query=query,
            timeout=timeout,
        )

    def register_system_shared_memory(
        self,
        region: str,
        key: str,
        byte_size: int,
        *,
        offset: int = 0,
        headers: Headers | None = None,
        query: QueryParams | None = None,
        timeout: float | None = None,
    ) -> HTTPCall[None]:
        name, body = system_shm_registration(region, key, byte_size, offset)
        target = self.paths.shared_memory("system", "register", name)
        return self.post(target, _nothing, body, headers=headers, query=query, timeout=timeout)

    def unregister_system_shared_memory(
        self,
        region: str = "",
        *,
        headers: Headers | None = None,
        query: QueryParams | None = None,
        timeout: float | None = None,
    ) -> HTTPCall[None]:
        name = check_region_name(region, required=False)
        target = self.paths.shared_memory("system", "unregister", name)
        return self.post(target, _nothing, headers=headers, query=query, timeout=timeout)

    def cuda_shared_memory_status(
        self,
        region: str = "",
        *,
        headers: Headers | None = None,
        query: QueryParams | None = None,
        timeout: float | None = None,
    ) -> HTTPCall[list[dict[str, Any]]]:
        return self.get(
            self.paths.shared_memory("cuda", "status", check_region_name(region, required=False)),
            lambda r: _json_objects(r, "CUDA shared memory status"),
            headers=headers,
            query=query,
            timeout=timeout,
        )

    def register_cuda_shared_memory(
        self,
        region: str,
        raw_handle: BytesLike,
        device_id: int,
        byte_size: int,
        *,
        headers: Headers | None = None,
        query: QueryParams | None = None,
        timeout: float | None = None,
    ) -> HTTPCall[None]:
        # Imported here: the CUDA module is for the few clients that register CUDA memory.
        from kserve_v2.shm.cuda import encode_raw_handle_rest

        name, handle, device, size = cuda_shm_registration(region, raw_handle, device_id, byte_size)
        body = {
            "raw_handle": encode_raw_handle_rest(handle),
            "device_id": device,
            "byte_size": size,
        }
        target = self.paths.shared_memory("cuda", "register", name)
        return self.post(target, _nothing, body, headers=headers, query=query, timeout=timeout)

    def unregister_cuda_shared_memory(
        self,
        region: str = "",
        *,
        headers: Headers | None = None,
        query: QueryParams | None = None,
        timeout: float | None = None,
    ) -> HTTPCall[None]:
        name = check_region_name(region, required=False)
        target = self.paths.shared_memory("cuda", "unregister", name)
        return self.post(target, _nothing, headers=headers, query=query, timeout=timeout)

    def trace_settings(
        self,
        model: str = "",
        *,
        headers: Headers | None = None,
        query: QueryParams | None = None,
        timeout: float | None = None,
    ) -> HTTPCall[dict[str, Any]]:
        target = self.paths.trace_setting(check_optional_model(model))
        return self.get(target, _json, headers=headers, query=query, timeout=timeout)

    def update_trace_settings(
        self,
        settings: Mapping[str, Any],
        model: str = "",
        *,
        headers: Headers | None = None,
        query: QueryParams | None = None,
        timeout: float | None = None,
    ) -> HTTPCall[dict[str, Any]]:
        body = trace_settings_update(settings)
        target = self.paths.trace_setting(check_optional_model(model))
        return self.post(target, _json, body, headers=headers, query=query, timeout=timeout)

    def log_settings(
        self,
        *,
        headers: Headers | None = None,
        query: QueryParams | None = None,
        timeout: float | None = None,
    ) -> HTTPCall[dict[str, Any]]:
        return self.get(self.paths.logging(), _json, headers=headers, query=query, timeout=timeout)

    def update_log_settings(
        self,
        settings: Mapping[str, Any],
        *,
        headers: Headers | None = None,
        query: QueryParams | None = None,
        timeout: float | None = None,
    ) -> HTTPCall[dict[str, Any]]:
        body = log_settings_update(settings)
        return self.post(
            self.paths.logging(), _json, body, headers=headers, query=query, timeout=timeout
        )

    # -- HTTP-only extensions ----------------------------------------------------------------

    def generate(
        self,
        model: str,
        payload: Mapping[str, Any],
        version: str | int = "",
        *,
        headers: Headers | None = None,
        query: QueryParams | None = None,
        timeout: float | None = None,
    ) -> HTTPCall[dict[str, Any]]:
        target = self.paths.generate(check_model_name(model), check_version(version))
        body = _generate_payload(payload)
        return self.post(
            target, _generate_result, body, headers=headers, query=query, timeout=timeout
        )

    def generate_stream(
        self,
        model: str,
        payload: Mapping[str, Any],
        version: str | int = "",
        *,
        headers: Headers | None = None,
        query: QueryParams | None = None,
        timeout: float | None = None,
    ) -> HTTPStreamCall[dict[str, Any]]:
        target = self.paths.generate(check_model_name(model), check_version(version), stream=True)
        body = _generate_payload(payload)
        call = self.post(
            target, _generate_result, body, headers=headers, query=query, timeout=timeout
        )
        return HTTPStreamCall(call.request, _generate_event, _generate_result, str(self.endpoint))

    def metrics(
        self,
        url: str | None = None,
        *,
        headers: Headers | None = None,
        query: QueryParams | None = None,
        timeout: float | None = None,
    ) -> HTTPCall[dict[str, MetricFamily]]:
        if timeout is None:
            timeout = self.timeout
        return metrics_call(self.endpoint, url, headers=headers, query=query, timeout=timeout)


def _generate_payload(payload: Mapping[str, Any]) -> Mapping[str, Any]:
    if not isinstance(payload, Mapping):
        raise InvalidInputError(
            f"generate payload must be a mapping (the request JSON object), got "
            f"{type(payload).__name__}",
            value=payload,
        )
    return payload


if TYPE_CHECKING:
    # mypy checks that HTTPBackend keeps the contract, its calls running on the HTTP
    # transport interfaces (nothing here runs).
    def _keeps_the_contract(backend: HTTPBackend) -> Backend[Transport, AsyncTransport]:
        return backend
