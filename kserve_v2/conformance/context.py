"""What a case works with: the server's clients, raw senders, checks and the evidence log.

A :class:`Session` holds what every case shares (the project's clients, a raw HTTP transport
and a raw gRPC channel, the server's metadata, which models it has); a :class:`Context` is one
case's view of it and records every exchange the case makes.

Cases use the project's client (:attr:`Context.http`, :attr:`Context.grpc`) for what a client
sends, and the lower layers for what the client refuses to send:

* :meth:`Context.rest` sends any HTTP request (any body, any headers) through the project's
  HTTP/1.1 transport, bodies built with the sans-IO REST codec where they are valid;
* :meth:`Context.rpc` sends any protobuf message (built with the generated classes) through
  the transport-level ``call_unary`` of a native gRPC channel, and :meth:`Context.stream_rpc`
  runs a raw ``ModelStreamInfer`` call.

A case fails by raising :class:`CaseFailed` (:meth:`Context.fail`, :meth:`Context.check`) and
skips with :class:`CaseSkipped` (:meth:`Context.skip`).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn
from urllib.parse import urlsplit

from kserve_v2.conformance.evidence import (
    Exchange,
    Message,
    describe_proto,
    grpc_message_preview,
    headers_of,
    http_body_preview,
)
from kserve_v2.datatypes import BytesLike
from kserve_v2.errors import KServeError, ServerError
from kserve_v2.hooks import WireMessage

if TYPE_CHECKING:
    from types import ModuleType

    from kserve_v2 import Client
    from kserve_v2.transport.native import NativeGRPCChannel
    from kserve_v2.transport.stdlib import HTTPTransport

__all__ = [
    "CaseFailed",
    "CaseSkipped",
    "Context",
    "RestResponse",
    "RpcError",
    "Session",
    "StreamMessageMismatch",
    "Target",
]

SERVICE = "/inference.GRPCInferenceService/"
_STREAM_METHOD = SERVICE + "ModelStreamInfer"


class CaseFailed(AssertionError):
    """The server did not do what the cited sentence says."""


class StreamMessageMismatch(CaseFailed):
    """``ModelStreamInfer`` answered with messages that are not ``ModelStreamInferResponse``
    (protobuf would read another message as one without complaint)."""


class CaseSkipped(Exception):
    """The case cannot run here (protocol not given, model missing, extension absent, ...)."""


#: the URL schemes of each protocol
_SCHEMES: Mapping[str, tuple[str, ...]] = {"http": ("http", "https"), "grpc": ("grpc", "grpcs")}


@dataclass(frozen=True)
class Target:
    """The server under test.

    ``http`` / ``grpc`` are its URLs (either may be ``None``: the cases of that protocol are
    skipped). ``headers`` go with every request (e.g. credentials of a gateway). ``local``:
    whether the server shares this machine's memory (system shared memory cases); ``None``
    decides from the host (loopback addresses are local).
    """

    http: str | None = None
    grpc: str | None = None
    headers: tuple[tuple[str, str], ...] = ()
    timeout: float = 30.0
    local: bool | None = None

    @staticmethod
    def normalize(url: str | None, scheme: str) -> str | None:
        """``host:port`` -> ``<scheme>://host:port``; URLs with a scheme are kept.

        ``scheme`` is ``"http"`` or ``"grpc"``: a URL whose scheme belongs to the other
        protocol, or to none (``http``/``https`` for HTTP, ``grpc``/``grpcs`` for gRPC), is a
        :class:`ValueError`.
        """
        if not url:
            return None
        if "://" not in url:
            return f"{scheme}://{url}"
        given = url.split("://", 1)[0].lower()
        allowed = _SCHEMES[scheme]
        if given not in allowed:
            flag = "--grpc" if scheme == "grpc" else "--http"
            hint = ""
            if given in _SCHEMES["grpc" if scheme == "http" else "http"]:
                other = "--http" if scheme == "grpc" else "--grpc"
                hint = f" ({given}:// is a URL for {other})"
            raise ValueError(
                f"{flag} {url}: the scheme must be {' or '.join(allowed)}, not {given!r}{hint}"
            )
        return url

    @property
    def is_local(self) -> bool:
        if self.local is not None:
            return self.local
        hosts = {urlsplit(u).hostname for u in (self.http, self.grpc) if u}
        return bool(hosts) and hosts <= {"127.0.0.1", "localhost", "::1"}


@dataclass(frozen=True)
class RestResponse:
    """A raw HTTP response: status, lower-case headers, the whole body."""

    status: int
    headers: Mapping[str, str]
    body: bytes
    reason: str = ""

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "")

    def json(self) -> Any:
        """The body as JSON, or :class:`CaseFailed` saying why it is not."""
        try:
            return json.loads(self.body)
        except (ValueError, RecursionError) as exc:
            raise CaseFailed(
                f"the response body is not JSON ({exc}): {self.body[:200]!r}"
            ) from None


@dataclass(frozen=True)
class RpcError:
    """A gRPC call that ended with a status other than OK."""

    code: str
    message: str


@dataclass
class _ServerInfo:
    metadata: dict[str, Any] | None = None
    problem: str | None = None


class Session:
    """Shared by every case of one run: clients, raw senders, server facts. Use as a context
    manager (it closes the connections)."""

    def __init__(self, target: Target) -> None:
        self.target = target
        self._lock = threading.Lock()
        self._current: Context | None = None
        self._http_client: Client | None = None
        self._grpc_client: Client | None = None
        self._transport: HTTPTransport | None = None
        self._channel: NativeGRPCChannel | None = None
        self._info: dict[str, _ServerInfo] = {}
        self._models: dict[str, str | None] = {}
        #: what cases learn about the server once per run (e.g. how it answers a stream)
        self.facts: dict[str, Any] = {}
        self._base_path = urlsplit(target.http).path.rstrip("/") if target.http else ""

    # -- lifecycle ------------------------------------------------------------------------

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for closable in (self._http_client, self._grpc_client, self._transport, self._channel):
            if closable is not None:
                closable.close()
        self._http_client = self._grpc_client = None
        self._transport = None
        self._channel = None

    # -- the wire hook --------------------------------------------------------------------

    def _hook(self, message: WireMessage) -> None:
        ctx = self._current
        if ctx is not None:
            ctx._wire(message)

    @contextmanager
    def running(self, ctx: Context) -> Iterator[None]:
        self._current = ctx
        try:
            yield
        finally:
            self._current = None

    # -- connections ----------------------------------------------------------------------

    def transport(self) -> HTTPTransport:
        if self.target.http is None:
            raise CaseSkipped("no HTTP URL given (--http)")
        if self._transport is None:
            from kserve_v2.transport.stdlib import HTTPTransport

            parts = urlsplit(self.target.http)
            self._transport = HTTPTransport(
                f"{parts.scheme}://{parts.netloc}", timeout=self.target.timeout
            )
        return self._transport

    def http_client(self) -> Client:
        if self._http_client is None:
            from kserve_v2 import Client

            assert self.target.http is not None
            self._http_client = Client(
                self.target.http,
                transport=self.transport(),
                headers=self.target.headers,
                timeout=self.target.timeout,
                binary=self._advertises_binary(),
                wire_hook=self._hook,
            )
        return self._http_client

    def _advertises_binary(self) -> bool:
        """Whether the server lists ``binary_tensor_data``: only then does the HTTP client send
        and ask for binary tensor data by default. Elsewhere it speaks the core protocol's JSON,
        so that core-protocol and cross-protocol cases never depend on an extension the server
        does not claim. (Read through the raw transport: the client is not built yet.)"""
        from kserve_v2.interfaces import HTTPRequest

        request = HTTPRequest("GET", self.path("v2"), list(self.target.headers), (), None)
        try:
            response = self.transport().handle_request(request)
            extensions = json.loads(bytes(response.body)).get("extensions", [])
        except (KServeError, ValueError, AttributeError):
            return False  # no usable metadata: the HTTP cases skip anyway
        return isinstance(extensions, list) and "binary_tensor_data" in extensions

    def grpc_client(self) -> Client:
        if self.target.grpc is None:
            raise CaseSkipped("no gRPC URL given (--grpc)")
        if self._grpc_client is None:
            from kserve_v2 import Client

            self._grpc_client = Client(
                self.target.grpc,
                headers=self.target.headers,
                timeout=self.target.timeout,
                wire_hook=self._hook,
            )
        return self._grpc_client

    def channel(self) -> NativeGRPCChannel:
        if self.target.grpc is None:
            raise CaseSkipped("no gRPC URL given (--grpc)")
        if self._channel is None:
            from kserve_v2.endpoint import parse_url
            from kserve_v2.grpc.config import channel_config
            from kserve_v2.transport.native import NativeGRPCChannel

            self._channel = NativeGRPCChannel(channel_config(parse_url(self.target.grpc)))
        return self._channel

    def path(self, path: str) -> str:
        """A request target for ``path`` (``v2/...``) under the URL's base path."""
        return f"{self._base_path}/{path.lstrip('/')}"

    # -- server facts ---------------------------------------------------------------------

    def server_metadata(self, protocol: str) -> dict[str, Any] | None:
        """The server metadata over ``protocol`` as a dict, or ``None`` when unavailable
        (:meth:`metadata_problem` says why)."""
        info = self._info.get(protocol)
        if info is None:
            info = self._info[protocol] = _ServerInfo()
            try:
                client = self.http_client() if protocol == "http" else self.grpc_client()
                meta = client.server_metadata()
                info.metadata = {
                    "name": meta.name,
                    "version": meta.version,
                    "extensions": list(meta.extensions),
                }
            except CaseSkipped as exc:
                info.problem = str(exc)
            except KServeError as exc:
                info.problem = f"server metadata over {protocol} failed: {exc}"
        return info.metadata

    def metadata_problem(self, protocol: str) -> str | None:
        self.server_metadata(protocol)
        return self._info[protocol].problem

    def protocols(self) -> tuple[str, ...]:
        """The protocols this run has URLs for."""
        return tuple(
            p for p, url in (("http", self.target.http), ("grpc", self.target.grpc)) if url
        )

    def extensions(self) -> set[str]:
        """The extensions the server advertises (over any protocol given)."""
        found: set[str] = set()
        for protocol in self.protocols():
            meta = self.server_metadata(protocol)
            if meta is not None:
                found.update(meta["extensions"])
        return found

    def model_problem(self, name: str) -> str | None:
        """Why model ``name`` cannot be used (``None``: it is ready)."""
        if name not in self._models:
            problem: str | None = f"model {name!r} is not ready on the server"
            for protocol in self.protocols():
                try:
                    client = self.http_client() if protocol == "http" else self.grpc_client()
                    if client.is_model_ready(name):
                        problem = None
                        break
                except KServeError as exc:
                    problem = f"model {name!r}: readiness check failed: {exc}"
            self._models[name] = problem
        return self._models[name]

    def forget_model(self, name: str) -> None:
        """Forget the cached readiness of ``name`` (after a case loaded or unloaded it)."""
        self._models.pop(name, None)


class Context:
    """One case's access to the server; everything it exchanges is recorded as evidence."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.exchanges: list[Exchange] = []
        self._lock = threading.Lock()
        self._pending: dict[tuple[str, str], int] = {}
        self.cleanups: list[Callable[[], object]] = []

    # -- clients --------------------------------------------------------------------------

    @property
    def http(self) -> Client:
        """The project's client over HTTP/REST."""
        return self.session.http_client()

    @property
    def grpc(self) -> Client:
        """The project's client over gRPC."""
        return self.session.grpc_client()

    def client(self, protocol: str) -> Client:
        return self.http if protocol == "http" else self.grpc

    @property
    def local(self) -> bool:
        """Whether the server shares this machine's memory."""
        return self.session.target.is_local

    # -- raw HTTP -------------------------------------------------------------------------

    def rest(
        self,
        method: str,
        path: str,
        *,
        json_body: Any = None,
        body: BytesLike | Sequence[BytesLike] = b"",
        headers: Sequence[tuple[str, str]] = (),
        timeout: float | None = None,
    ) -> RestResponse:
        """Send one HTTP request to ``path`` (``v2/...``) as given; the response whatever its
        status. ``json_body`` is dumped as JSON (with ``Content-Type: application/json``)."""
        from kserve_v2.interfaces import HTTPRequest

        parts: tuple[BytesLike, ...]
        hdrs = list(self.session.target.headers) + list(headers)
        if json_body is not None:
            parts = (json.dumps(json_body).encode(),)
            if not any(k.lower() == "content-type" for k, _ in hdrs):
                hdrs.append(("Content-Type", "application/json"))
        elif isinstance(body, bytes | bytearray | memoryview):
            parts = (body,) if len(memoryview(body)) else ()
        else:
            parts = tuple(body)
        request = HTTPRequest(method, self.session.path(path), hdrs, parts, timeout)
        sent = Message(
            f"{method} {request.target}",
            headers_of(hdrs),
            http_body_preview({k.lower(): v for k, v in hdrs}, parts),
        )
        try:
            response = self.session.transport().handle_request(request)
        except KServeError as exc:
            self._record(Exchange("http", sent, None, f"{type(exc).__name__}: {exc}"))
            raise CaseFailed(f"{method} {path}: no response: {exc}") from exc
        headers_lower = {k.lower(): v for k, v in response.headers.items()}
        self._record(
            Exchange(
                "http",
                sent,
                Message(
                    f"{response.status} {response.reason}".strip(),
                    headers_of(response.headers),
                    http_body_preview(headers_lower, (response.body,)),
                ),
            )
        )
        return RestResponse(response.status, headers_lower, bytes(response.body), response.reason)

    def rest_infer(
        self,
        model: str,
        header: Mapping[str, Any] | bytes,
        blobs: Sequence[BytesLike] = (),
        *,
        version: str = "",
        header_length: int | str | None = -1,
        headers: Sequence[tuple[str, str]] = (),
        endpoint: str = "infer",
    ) -> RestResponse:
        """POST an inference body: the JSON ``header`` (a dict, or bytes sent as they are)
        followed by ``blobs``. ``Inference-Header-Content-Length`` is the header's length when
        there are blobs (``header_length=-1``), else the given value (``None``: omitted)."""
        head = header if isinstance(header, bytes) else json.dumps(header).encode()
        hdrs = list(headers)
        length: int | str | None = header_length
        if length == -1:
            length = len(head) if blobs else None
        if length is not None:
            hdrs.append(("Inference-Header-Content-Length", str(length)))
        content_type = "application/octet-stream" if blobs else "application/json"
        if not any(k.lower() == "content-type" for k, _ in hdrs):
            hdrs.append(("Content-Type", content_type))
        path = f"v2/models/{model}" + (f"/versions/{version}" if version else "")
        return self.rest("POST", f"{path}/{endpoint}", body=(head, *blobs), headers=hdrs)

    # -- raw gRPC -------------------------------------------------------------------------

    @property
    def pb(self) -> ModuleType:
        """The generated ``grpc_service_pb2`` module (``ctx.pb.ModelInferRequest(...)``)."""
        from kserve_v2.grpc.codec import generated

        return generated()

    def rpc(
        self,
        name: str,
        request: Any,
        *,
        metadata: Sequence[tuple[str, str]] = (),
        timeout: float | None = None,
    ) -> Any:
        """Call RPC ``name`` (``"ModelInfer"``) with a protobuf message; returns the parsed
        response, or an :class:`RpcError` when the call ends with another status than OK."""
        method = SERVICE + name
        data = request.SerializeToString()
        meta = tuple(self.session.target.headers) + tuple(metadata)
        sent = Message(method, headers_of(meta), describe_proto(request))
        channel = self.session.channel()
        try:
            raw, _ = channel.call_unary(
                method, data, metadata=meta, timeout=timeout or self.session.target.timeout
            )
        except ServerError as exc:
            code = exc.grpc_code or "UNKNOWN"
            self._record(Exchange("grpc", sent, Message(code, (), exc.message)))
            return RpcError(code, exc.message)
        except KServeError as exc:
            self._record(Exchange("grpc", sent, None, f"{type(exc).__name__}: {exc}"))
            raise CaseFailed(f"{name}: no response: {exc}") from exc
        self._record(
            Exchange(
                "grpc", sent, Message("OK", (), grpc_message_preview(name, raw, response=True))
            )
        )
        response_type = getattr(self.pb, _response_type(name), None)
        if response_type is None:  # an RPC the service does not define answered OK
            return bytes(raw)
        try:
            return response_type.FromString(bytes(raw))
        except Exception as exc:  # protobuf DecodeError: the server sent a broken message
            raise CaseFailed(
                f"{name}: the response is not a valid {response_type.__name__}: {exc}"
            ) from None

    def rpc_ok(self, name: str, request: Any, **kw: Any) -> Any:
        """:meth:`rpc` that fails the case on an error status."""
        response = self.rpc(name, request, **kw)
        if isinstance(response, RpcError):
            self.fail(f"{name} failed with {response.code}: {response.message}")
        return response

    def stream_rpc(
        self,
        requests: Sequence[Any],
        *,
        expect: Callable[[list[Any]], bool],
        metadata: Sequence[tuple[str, str]] = (),
        timeout: float = 30.0,
    ) -> tuple[list[Any], RpcError | None]:
        """Run ``ModelStreamInfer``: send ``requests``, read responses until ``expect``
        (given the responses so far) is true or the server ends the call, then half-close and
        read what is left. Returns the parsed responses and the final error status, if any."""
        meta = tuple(self.session.target.headers) + tuple(metadata)
        call = self.session.channel().open_stream(_STREAM_METHOD, timeout=timeout, metadata=meta)
        responses: list[Any] = []
        error: RpcError | None = None
        cls = self.pb.ModelStreamInferResponse
        try:
            for request in requests:
                self._record(
                    Exchange(
                        "grpc", Message(_STREAM_METHOD, headers_of(meta), describe_proto(request))
                    )
                )
                call.send(request.SerializeToString())
            half_closed = False
            if expect(responses):
                call.done_sending()
                half_closed = True
            for data in call:
                raw = bytes(data)
                message, problem = _parse_stream_response(cls, raw)
                if problem is not None:
                    self._record(
                        Exchange(
                            "grpc",
                            Message(f"{_STREAM_METHOD} (response {len(responses) + 1})"),
                            Message("message", (), _foreign_preview(self.pb, raw)),
                        )
                    )
                    raise StreamMessageMismatch(
                        f"ModelStreamInfer: response {len(responses) + 1} is not a "
                        f"ModelStreamInferResponse: {problem}"
                    )
                responses.append(message)
                self._record(
                    Exchange(
                        "grpc",
                        Message(f"{_STREAM_METHOD} (response {len(responses)})"),
                        Message("message", (), describe_proto(message)),
                    )
                )
                if not half_closed and expect(responses):
                    call.done_sending()
                    half_closed = True
        except ServerError as exc:
            error = RpcError(exc.grpc_code or "UNKNOWN", exc.message)
            self._record(
                Exchange(
                    "grpc",
                    Message(f"{_STREAM_METHOD} (end)"),
                    Message(error.code, (), error.message),
                )
            )
        except KServeError as exc:
            call.cancel()
            raise CaseFailed(f"ModelStreamInfer: {type(exc).__name__}: {exc}") from exc
        finally:
            call.cancel()
        return responses, error

    # -- evidence -------------------------------------------------------------------------

    def _record(self, exchange: Exchange) -> None:
        with self._lock:
            self.exchanges.append(exchange)

    def _wire(self, message: WireMessage) -> None:
        """Turn the client's wire-hook messages into exchanges."""
        key = (message.protocol, message.target)
        if message.protocol == "http":
            hdrs = {k.lower(): v for k, v in message.headers}
            body = http_body_preview(hdrs, message.body)
        else:
            body = (
                grpc_message_preview(
                    message.target,
                    b"".join(bytes(b) for b in message.body),
                    response=message.direction == "receive",
                )
                if message.body
                else ""
            )
        error = (
            None if message.error is None else f"{type(message.error).__name__}: {message.error}"
        )
        with self._lock:
            if message.direction == "send":
                line = (
                    f"{message.method} {message.target}"
                    if message.protocol == "http"
                    else message.target
                )
                self.exchanges.append(
                    Exchange(message.protocol, Message(line, headers_of(message.headers), body))
                )
                if message.method != "stream":
                    self._pending[key] = len(self.exchanges) - 1
                return
            status = "" if message.status is None else str(message.status)
            reply = Message(status or "(no status)", headers_of(message.headers), body)
            index = self._pending.pop(key, None)
            if index is not None and message.method != "stream":
                old = self.exchanges[index]
                self.exchanges[index] = Exchange(old.protocol, old.request, reply, error)
            else:
                self.exchanges.append(
                    Exchange(
                        message.protocol, Message(f"{message.target} (response)"), reply, error
                    )
                )

    # -- checks ---------------------------------------------------------------------------

    def fail(self, message: str) -> NoReturn:
        raise CaseFailed(message)

    def skip(self, reason: str) -> NoReturn:
        raise CaseSkipped(reason)

    def check(self, condition: object, message: str) -> None:
        if not condition:
            raise CaseFailed(message)

    def equal(self, actual: object, expected: object, what: str) -> None:
        if actual != expected:
            raise CaseFailed(f"{what}: expected {expected!r}, got {actual!r}")

    def need_local(self) -> None:
        if not self.local:
            self.skip("the server is not on this machine (shared memory); pass --local if it is")

    def need_extension(self, name: str) -> None:
        if name not in self.session.extensions():
            self.skip(f"the server does not advertise {name!r}")

    def need_versioning(self) -> None:
        """Skip unless the server serves versioned models (the suite's ``versioned``): the
        cases about unknown versions assume that the server implements versions, which the
        specs leave optional."""
        if self.session.model_problem("versioned") is not None:
            self.skip(
                "the server serves no versioned model ('versioned' is missing); the specs show "
                'the version part of the paths as optional "to allow implementations that '
                "don't support versioning\", and say nothing of what those do with a version"
            )

    def cleanup(self, func: Callable[[], object]) -> None:
        """Run ``func`` after the case, pass or fail (errors there are ignored)."""
        self.cleanups.append(func)


def _parse_stream_response(cls: Any, raw: bytes) -> tuple[Any, str | None]:
    """``raw`` as a ``ModelStreamInferResponse``, and what is wrong with it if it is not one:
    protobuf reads any message with matching field types, so fields the message does not
    define are what gives another message away (a ``ModelInferResponse`` has 3 to 6)."""
    from google.protobuf.message import DecodeError
    from google.protobuf.unknown_fields import UnknownFieldSet

    try:
        message = cls.FromString(raw)
    except DecodeError as exc:
        return None, f"it does not parse as one ({exc})"
    fields = UnknownFieldSet(message)
    unknown = sorted({fields[i].field_number for i in range(len(fields))})
    if unknown:
        return message, f"it carries field numbers {unknown}, which that message does not have"
    return message, None


def _foreign_preview(pb: ModuleType, raw: bytes) -> str:
    """A message that is not a ``ModelStreamInferResponse``, read as a ``ModelInferResponse``
    (what servers that answer the stream with plain inference responses send)."""
    try:
        text = describe_proto(pb.ModelInferResponse.FromString(raw))
    except Exception:  # protobuf DecodeError: show the bytes
        return f"{len(raw)} bytes: {raw[:200]!r}"
    return f"(read as a ModelInferResponse)\n{text}"


def _response_type(rpc: str) -> str:
    return "ModelStreamInferResponse" if rpc == "ModelStreamInfer" else rpc + "Response"
