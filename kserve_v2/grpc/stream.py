"""Bidirectional streaming inference (``ModelStreamInfer``): sync and asyncio streams.

A stream carries any number of requests, each answered by 0..N responses (decoupled models)
in any order. Responses are matched to requests by id (the stream makes one up when the
caller gives none) and wait in a buffer until a consumer takes them, either

* per request: iterate the :class:`StreamRequest` that ``send`` returns, or ``wait`` for all
  its responses; or
* for the whole stream: iterate the stream itself, which yields every response in arrival
  order and stops once every request sent so far is complete.

A request is complete when Triton flags a response ``triton_final_response``. Decoupled models
may finish without a final data response, so every request asks for Triton's empty final
response (``triton_enable_empty_final_response``); it is shown to consumers only when the
stream was opened with ``enable_empty_final_response=True`` (as an :class:`InferResult` with
no outputs and ``final == True``).

The streams run on either gRPC transport: they only use the channel's ``open_stream`` (see
:class:`~kserve_v2.interfaces.SyncStreamCall`). The sync stream's background thread is the
call's reader; on the native transport it reads the stream's own connection.

An error for one request (``error_message``) is raised as :class:`ServerError` by the consumer
that takes it; the stream lives on. With ``triton_grpc_error=True`` Triton instead ends the
whole stream with a gRPC status at the first error: consumers then raise that
:class:`ServerError` and the stream is over. In that mode requests ask for the empty final
response only if ``enable_empty_final_response=True`` (Triton 2.51 aborts when it has to send
one after ending the stream on an error), so a decoupled model's request whose last data
response is not flagged final stays in flight until the stream ends.

Example::

    with Client("grpc://localhost:8001") as client, client.stream() as stream:
        request = stream.send("repeat_decoupled", {"IN": np.arange(4, dtype=np.int32),
                                                   "REPEAT": np.array([3], np.int32)})
        for result in request:                 # three responses, then the request is done
            print(result.as_numpy("IDX"))
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import threading
import time
from collections import OrderedDict, deque
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final

from kserve_v2.arguments import (
    InputsArg,
    OutputsArg,
    build_infer_request,
    check_compression,
    check_timeout,
)
from kserve_v2.datatypes import BytesLike
from kserve_v2.errors import (
    DeadlineExceededError,
    InvalidInputError,
    KServeError,
    ProtocolError,
    ServerError,
    TransportError,
)
from kserve_v2.grpc import codec
from kserve_v2.grpc.backend import SERVICE
from kserve_v2.grpc.config import Metadata
from kserve_v2.grpc.status import status_of
from kserve_v2.hooks import WireHook, WireMessage
from kserve_v2.messages import InferRequest, InferResult
from kserve_v2.parameters import ParameterValue

if TYPE_CHECKING:
    from kserve_v2.arguments import Headers
    from kserve_v2.grpc.backend import GRPCBackend
    from kserve_v2.interfaces import (
        AsyncStreamCall,
        AsyncStreamChannel,
        SyncStreamCall,
        SyncStreamChannel,
    )

__all__ = ["AsyncGRPCStream", "AsyncStreamRequest", "GRPCStream", "StreamRequest"]

#: The full name of the streaming RPC.
STREAM_METHOD: Final = SERVICE + "ModelStreamInfer"
_EMPTY_FINAL: Final = "triton_enable_empty_final_response"


# ----------------------------------------------------------------------- routing (no I/O)


@dataclass(slots=True)
class _Entry:
    request_id: str
    result: InferResult | None
    error: ServerError | None
    seq: int = 0

    def unwrap(self) -> InferResult:
        if self.error is not None:
            raise self.error
        assert self.result is not None
        return self.result


class _Router:
    """Matches stream responses to requests and buffers them until taken; no I/O, no locks
    (the streams hold theirs around every call).

    Each response is taken once, by whoever asks first: the request's consumer or the
    stream's. ``_order`` keeps arrival order across requests, ``_queues`` each request's
    share of it, so both kinds of consumer take in O(1).
    """

    def __init__(self, show_empty_final: bool) -> None:
        self.show_empty_final = show_empty_final
        self._pending: set[str] = set()
        self._order: OrderedDict[int, _Entry] = OrderedDict()
        self._queues: dict[str, deque[int]] = {}
        self._seq = itertools.count()
        # Outputs each request placed in shared memory: Triton's answer does not say which.
        self._placements: dict[str, codec.Placements] = {}
        self.ended = False
        self.error: KServeError | None = None

    @property
    def pending(self) -> int:
        return len(self._pending)

    def is_pending(self, request_id: str) -> bool:
        return request_id in self._pending

    def register(self, request_id: str, placements: codec.Placements | None = None) -> None:
        if request_id in self._pending:
            raise InvalidInputError(
                f"request id {request_id!r} is already in flight on this stream; "
                "ids must tell concurrent requests apart",
                value=request_id,
            )
        self._pending.add(request_id)
        if placements:
            self._placements[request_id] = placements

    def placements(self, request_id: str) -> codec.Placements | None:
        return self._placements.get(request_id)

    def forget(self, request_id: str) -> None:
        """A request that could not be sent."""
        self._pending.discard(request_id)
        self._placements.pop(request_id, None)
        self._collect(request_id)

    def deliver(self, event: codec.StreamEvent) -> None:
        request_id = event.request_id
        if event.complete:
            self._pending.discard(request_id)
            self._placements.pop(request_id, None)
        if event.empty_final and not self.show_empty_final:
            self._collect(request_id)  # it only said "complete"
            return
        seq = next(self._seq)
        self._order[seq] = _Entry(request_id, event.result, event.error, seq)
        self._queues.setdefault(request_id, deque()).append(seq)

    def give_back(self, entries: list[_Entry]) -> None:
        """Put taken entries back where they were (a wait that timed out loses nothing).

        Rare (timeouts), so the buffers are simply re-sorted by arrival number.
        """
        if not entries:
            return
        for entry in entries:
            self._order[entry.seq] = entry
            self._queues.setdefault(entry.request_id, deque()).append(entry.seq)
        self._order = OrderedDict(sorted(self._order.items()))
        for request_id in {entry.request_id for entry in entries}:
            self._queues[request_id] = deque(sorted(self._queues[request_id]))

    def finish(self, error: KServeError | None) -> None:
        self.ended = True
        if self.error is None:
            self.error = error

    def take_any(self) -> _Entry | None:
        if not self._order:
            return None
        _, entry = self._order.popitem(last=False)
        # The earliest response overall is the earliest of its request too.
        self._queues[entry.request_id].popleft()
        self._collect(entry.request_id)
        return entry

    def take_for(self, request_id: str) -> _Entry | None:
        queue_ = self._queues.get(request_id)
        if not queue_:
            return None
        entry = self._order.pop(queue_.popleft())
        self._collect(request_id)
        return entry

    def any_done(self) -> bool:
        """Nothing more can come for the stream's consumer (given nothing is buffered)."""
        return self.ended or not self._pending

    def done_for(self, request_id: str) -> bool:
        return self.ended or request_id not in self._pending

    def stop_error(self, request_id: str | None) -> KServeError | None:
        """The error a consumer raises once its responses ran out, if any: the stream's
        failure, for consumers whose request(s) were still in flight."""
        if request_id is None:
            return self.error if self._pending else None
        return self.error if request_id in self._pending else None

    def _collect(self, request_id: str) -> None:
        if request_id not in self._pending and not self._queues.get(request_id):
            self._queues.pop(request_id, None)


# ------------------------------------------------------------------------- shared parts


def _build(
    model: str, inputs: InputsArg, request_id: str, empty_final: bool, **kw: Any
) -> InferRequest:
    """Validate one streamed request (its id may still be empty)."""
    request = build_infer_request(model, inputs, request_id=request_id, **kw)
    if not empty_final:
        return request
    params: dict[str, ParameterValue] = dict(request.parameters)
    params.setdefault(_EMPTY_FINAL, True)
    return replace(request, parameters=params)


def _ask_empty_final(enable_empty_final_response: bool, triton_grpc_error: bool) -> bool:
    """Whether requests ask for Triton's empty final response.

    Normally always: without it a decoupled model's request never shows as complete (the
    router hides the response unless the caller asked to see it). Not in Triton's gRPC error
    mode unless asked: Triton 2.51 aborts (``!byte_buffer->Valid()``) when it ends a stream on
    an error and then writes the empty final response of the failed request.
    """
    return enable_empty_final_response or not triton_grpc_error


def _encode(request: InferRequest, request_id: str) -> bytes:
    if request.id != request_id:
        request = replace(request, id=request_id)
    return codec.encode_infer_request(request)


def _stream_metadata(
    proto: GRPCBackend, headers: Headers | None, triton_grpc_error: bool
) -> Metadata:
    metadata = proto.metadata(headers)
    if triton_grpc_error:
        metadata = (*metadata, ("triton_grpc_error", "true"))
    return metadata


def _deadline(timeout: float | None) -> float | None:
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not timeout > 0:
        raise InvalidInputError("timeout must be a positive number or None", value=timeout)
    return time.monotonic() + timeout


def _remaining(deadline: float | None, what: str) -> float | None:
    if deadline is None:
        return None
    left = deadline - time.monotonic()
    if left <= 0:
        raise DeadlineExceededError(f"timed out waiting for {what}")
    return left


def _hook_event(
    hook: WireHook | None,
    direction: str,
    body: BytesLike | None,
    started: float,
    metadata: Metadata = (),
    status: str | None = None,
    error: BaseException | None = None,
) -> None:
    if hook is not None:
        hook(
            WireMessage(
                direction,
                "grpc",
                "stream",
                STREAM_METHOD,
                metadata,
                (body,) if body is not None else (),
                status,
                time.perf_counter() - started if direction == "receive" else None,
                error,
            )
        )


def _results(entries: list[_Entry]) -> list[InferResult]:
    """The results of a complete request; its first error, if any, is raised instead."""
    for entry in entries:
        if entry.error is not None:
            raise entry.error
    return [entry.unwrap() for entry in entries]


def _closed_error(router: _Router) -> KServeError:
    if router.error is not None:
        return router.error
    return TransportError("the stream is closed; open a new one with client.stream()")


def _failure(call: SyncStreamCall | AsyncStreamCall, exc: KServeError) -> tuple[KServeError, str]:
    """The error and wire-hook status of a reader that stopped on ``exc``.

    An error the call raised carries its status; one raised while the call still runs (a
    malformed message) ends the call here.
    """
    if call.status is not None:
        return exc, call.status
    call.cancel()
    return exc, "PROTOCOL_ERROR" if isinstance(exc, ProtocolError) else status_of(exc)


class _IdSource:
    """Request ids for callers who give none, never one that is in flight."""

    def __init__(self) -> None:
        self._counter = itertools.count(1)

    def make(self, router: _Router) -> str:
        while True:
            candidate = f"kserve-v2-{next(self._counter)}"
            if not router.is_pending(candidate):
                return candidate


# --------------------------------------------------------------------------------- sync


class StreamRequest:
    """One request sent on a :class:`GRPCStream`: iterate it for its responses.

    Iteration yields each response as it arrives and stops when the request is complete
    (or the stream ended); an error response raises :class:`ServerError`.

    Example::

        request = stream.send("simple", inputs)
        (result,) = request.results(timeout=10)
    """

    __slots__ = ("_stream", "id")

    def __init__(self, stream: GRPCStream, request_id: str) -> None:
        self._stream = stream
        self.id = request_id

    def __iter__(self) -> Iterator[InferResult]:
        while (result := self._stream._next(self.id, None)) is not None:
            yield result

    def results(self, timeout: float | None = None) -> list[InferResult]:
        """Wait until the request is complete; all its responses in order.

        If one was an error, its :class:`ServerError` is raised once the request is complete
        (iterate the request instead to see the others). ``timeout`` raises
        :class:`DeadlineExceededError`; responses not yet taken stay buffered.
        """
        return self._stream._collect(self.id, timeout)

    @property
    def done(self) -> bool:
        """Whether the request is complete (its last response arrived, or the stream ended)."""
        return self._stream._request_done(self.id)

    def __repr__(self) -> str:
        return f"StreamRequest(id={self.id!r}, done={self.done})"


class GRPCStream:
    """A synchronous ``ModelStreamInfer`` stream; made by ``Client.stream()``.

    ``send`` may be called from any thread; responses are read by a background thread. Use
    ``with``: leaving the block normally waits for requests in flight (``close``), leaving it
    by an exception cancels them (``cancel``).

    Example::

        with client.stream(enable_empty_final_response=True) as stream:
            first = stream.send("repeat_decoupled", inputs_a, request_id="a")
            second = stream.send("repeat_decoupled", inputs_b)     # id made up
            for result in stream:                # both requests' responses, as they arrive
                print(result.id, result.final)
    """

    def __init__(
        self,
        channel: SyncStreamChannel,
        proto: GRPCBackend,
        hook: WireHook | None,
        *,
        headers: Headers | None = None,
        timeout: float | None = None,
        compression: str | None = None,
        enable_empty_final_response: bool = False,
        triton_grpc_error: bool = False,
        close_timeout: float | None = None,
        on_close: Callable[[GRPCStream], None] | None = None,
    ) -> None:
        check_timeout(timeout)
        check_compression(compression)
        self._url = channel.config.url
        self._hook = hook
        self._close_timeout = close_timeout
        self._on_close = on_close
        self._metadata = _stream_metadata(proto, headers, triton_grpc_error)
        self._router = _Router(bool(enable_empty_final_response))
        self._empty_final = _ask_empty_final(enable_empty_final_response, triton_grpc_error)
        self._ids = _IdSource()
        self._cond = threading.Condition()
        self._half_closed = False
        self._cancelled = False
        self._closed = False
        self._started = time.perf_counter()
        _hook_event(hook, "send", None, self._started, self._metadata)
        self._call: SyncStreamCall = channel.open_stream(
            STREAM_METHOD, timeout=timeout, metadata=self._metadata, compression=compression
        )
        # The reader thread iterates the call (on the native transport it is the thread
        # that reads the socket) and turns responses into buffered entries.
        self._reader = threading.Thread(
            target=self._read, name=f"kserve-v2 stream reader {self._url}", daemon=True
        )
        self._reader.start()

    # -- I/O threads ------------------------------------------------------------------------

    def _read(self) -> None:
        call = self._call
        error: KServeError | None = None
        status = "OK"
        try:
            for data in call:
                _hook_event(self._hook, "receive", data, self._started)
                event = codec.decode_stream_response(data, self._router.placements)
                with self._cond:
                    self._router.deliver(event)
                    self._cond.notify_all()
            status = call.status or "OK"
        except KServeError as exc:
            error, status = _failure(call, exc)
        except BaseException as exc:  # never leave consumers waiting on a dead reader
            error, status = TransportError(f"stream reader failed: {exc!r}", url=self._url), ""
            error.__cause__ = exc
            call.cancel()
        finally:
            with self._cond:
                self._router.finish(error)
                self._cond.notify_all()
            _hook_event(self._hook, "receive", None, self._started, (), status, error)

    # -- sending -----------------------------------------------------------------------------

    def _no_more_sends(self) -> bool:
        return self._half_closed or self._router.ended

    def send(
        self,
        model: str,
        inputs: InputsArg,
        *,
        outputs: OutputsArg | None = None,
        version: str | int = "",
        request_id: str = "",
        parameters: Mapping[str, ParameterValue] | None = None,
        sequence_id: int | str | None = None,
        sequence_start: bool = False,
        sequence_end: bool = False,
        priority: int | None = None,
        timeout_us: int | None = None,
        allow_reserved: bool = False,
    ) -> StreamRequest:
        """Send one inference request on the stream; returns its :class:`StreamRequest`.

        The arguments are those of ``Client.infer`` (metadata, deadline and compression
        belong to the stream: give them to ``client.stream()``). Without ``request_id`` a
        unique id is made up; an id already in flight on this stream is refused.
        """
        request = _build(
            model,
            inputs,
            request_id,
            self._empty_final,
            outputs=outputs,
            version=version,
            parameters=parameters,
            sequence_id=sequence_id,
            sequence_start=sequence_start,
            sequence_end=sequence_end,
            priority=priority,
            timeout_us=timeout_us,
            allow_reserved=allow_reserved,
        )
        with self._cond:
            if self._no_more_sends():
                raise _closed_error(self._router)
            rid = request.id or self._ids.make(self._router)
            self._router.register(rid, codec.output_placements(request))
        try:
            data = _encode(request, rid)  # outside the lock: the reader must not wait on it
        except BaseException:
            with self._cond:
                self._router.forget(rid)
            raise
        with self._cond:
            if self._no_more_sends():  # checked again: close() may have come meanwhile
                self._router.forget(rid)
                raise _closed_error(self._router)
            _hook_event(self._hook, "send", data, self._started)
        try:
            # Outside the lock: a send may wait for flow control, which the reader (who
            # needs the lock to deliver) releases. A close() meanwhile makes it raise.
            self._call.send(data)
        except BaseException:
            with self._cond:
                self._router.forget(rid)
            raise
        return StreamRequest(self, rid)

    # -- receiving ---------------------------------------------------------------------------

    def _take(self, request_id: str | None, deadline: float | None) -> _Entry | None:
        """The next response (of one request, or of any); None once there will be none."""
        router = self._router
        with self._cond:
            while True:
                if request_id is None:
                    entry, done = router.take_any(), router.any_done
                else:
                    entry, done = router.take_for(request_id), lambda: router.done_for(request_id)
                if entry is not None:
                    return entry
                if done():
                    error = router.stop_error(request_id)
                    if error is not None:
                        raise error
                    return None
                what = "stream responses" if request_id is None else f"request {request_id!r}"
                self._cond.wait(_remaining(deadline, what))

    def _next(self, request_id: str | None, deadline: float | None) -> InferResult | None:
        entry = self._take(request_id, deadline)
        return None if entry is None else entry.unwrap()

    def _collect(self, request_id: str, timeout: float | None) -> list[InferResult]:
        deadline = _deadline(timeout)
        taken: list[_Entry] = []
        try:
            while (entry := self._take(request_id, deadline)) is not None:
                taken.append(entry)
        except KServeError:  # timed out, or the stream failed: the caller may retry
            with self._cond:
                self._router.give_back(taken)
            raise
        return _results(taken)

    def _request_done(self, request_id: str) -> bool:
        with self._cond:
            return self._router.done_for(request_id)

    def __iter__(self) -> Iterator[InferResult]:
        """Every response in arrival order, until all requests sent so far are complete."""
        while (result := self._next(None, None)) is not None:
            yield result

    def wait(self, request: str | StreamRequest, timeout: float | None = None) -> list[InferResult]:
        """All responses of one request (by id or handle); see :meth:`StreamRequest.results`."""
        request_id = request.id if isinstance(request, StreamRequest) else request
        return self._collect(request_id, timeout)

    @property
    def pending(self) -> int:
        """How many requests sent on this stream are not complete yet."""
        with self._cond:
            return self._router.pending

    @property
    def closed(self) -> bool:
        return self._closed

    # -- ending ------------------------------------------------------------------------------

    def close(self, timeout: float | None = None) -> None:
        """End the stream gracefully: no more requests; wait for those in flight.

        Waits at most ``timeout`` seconds (default: the client's timeout), then cancels.
        Responses nobody took are dropped. Idempotent.
        """
        if self._closed:
            return
        wait = self._close_timeout if timeout is None else timeout
        deadline = None if wait is None else time.monotonic() + wait
        in_reader = threading.current_thread() is self._reader  # a wire hook: cannot wait
        with self._cond:
            self._half_closed = True
            if self._empty_final and not in_reader:
                # Every request ends with a final response: end the stream only after them.
                # Triton 2.51 races (and may abort) when the stream ends while a decoupled
                # model is still answering.
                self._cond.wait_for(
                    lambda: not self._router.pending or self._router.ended,
                    None if deadline is None else max(0.0, deadline - time.monotonic()),
                )
        self._call.done_sending()
        if in_reader:
            return
        self._reader.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
        if self._reader.is_alive():
            self.cancel()
        self._finish()

    def cancel(self) -> None:
        """Cancel the stream and every request in flight at once. Idempotent."""
        if self._closed:
            return
        with self._cond:
            self._half_closed = True
            self._cancelled = True
        self._call.cancel()
        if threading.current_thread() is not self._reader:
            self._reader.join()
        self._finish()

    def _finish(self) -> None:
        if not self._closed:
            self._closed = True
            if self._on_close is not None:
                self._on_close(self)

    def __enter__(self) -> GRPCStream:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            self.close()
        else:
            self.cancel()

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"{self.pending} pending"
        return f"<GRPCStream {self._url} {state}>"


# -------------------------------------------------------------------------------- async


class AsyncStreamRequest:
    """One request sent on an :class:`AsyncGRPCStream`: ``async for`` its responses.

    Example::

        request = await stream.send("simple", inputs)
        async for result in request:
            ...
    """

    __slots__ = ("_stream", "id")

    def __init__(self, stream: AsyncGRPCStream, request_id: str) -> None:
        self._stream = stream
        self.id = request_id

    async def __aiter__(self) -> AsyncIterator[InferResult]:
        while (result := await self._stream._next(self.id, None)) is not None:
            yield result

    async def results(self, timeout: float | None = None) -> list[InferResult]:
        """All responses once the request is complete (see :meth:`StreamRequest.results`)."""
        return await self._stream._collect(self.id, timeout)

    @property
    def done(self) -> bool:
        return self._stream._router.done_for(self.id)

    def __repr__(self) -> str:
        return f"AsyncStreamRequest(id={self.id!r}, done={self.done})"


class AsyncGRPCStream:
    """The asyncio twin of :class:`GRPCStream`; made by ``AsyncClient.stream()``.

    The call starts on ``async with`` (or the first ``send``), inside the running loop.

    Example::

        async with client.stream() as stream:
            request = await stream.send("repeat_decoupled", inputs)
            async for result in request:
                print(result.as_numpy("IDX"))
    """

    def __init__(
        self,
        channel: AsyncStreamChannel,
        proto: GRPCBackend,
        hook: WireHook | None,
        *,
        headers: Headers | None = None,
        timeout: float | None = None,
        compression: str | None = None,
        enable_empty_final_response: bool = False,
        triton_grpc_error: bool = False,
        close_timeout: float | None = None,
        on_close: Callable[[AsyncGRPCStream], None] | None = None,
    ) -> None:
        check_timeout(timeout)
        check_compression(compression)
        self._channel = channel
        self._url = channel.config.url
        self._hook = hook
        self._timeout = timeout
        self._compression = compression
        self._close_timeout = close_timeout
        self._on_close = on_close
        self._metadata = _stream_metadata(proto, headers, triton_grpc_error)
        self._router = _Router(bool(enable_empty_final_response))
        self._empty_final = _ask_empty_final(enable_empty_final_response, triton_grpc_error)
        self._ids = _IdSource()
        self._call: AsyncStreamCall | None = None
        self._reader: asyncio.Task[None] | None = None
        self._cond: asyncio.Condition | None = None
        self._write_lock: asyncio.Lock | None = None
        self._half_closed = False
        self._cancelled = False
        self._closed = False
        self._started = time.perf_counter()

    def _start(self) -> asyncio.Condition:
        if self._cond is not None:
            return self._cond
        if self._closed:
            raise _closed_error(self._router)
        self._started = time.perf_counter()
        _hook_event(self._hook, "send", None, self._started, self._metadata)
        self._call = self._channel.open_stream(
            STREAM_METHOD,
            timeout=self._timeout,
            metadata=self._metadata,
            compression=self._compression,
        )
        self._cond = asyncio.Condition()
        self._write_lock = asyncio.Lock()
        self._reader = asyncio.get_running_loop().create_task(self._read())
        return self._cond

    async def _read(self) -> None:
        assert self._cond is not None
        call = self._call
        assert call is not None
        error: KServeError | None = None
        status = "OK"
        try:
            while (data := await call.read()) is not None:
                _hook_event(self._hook, "receive", data, self._started)
                event = codec.decode_stream_response(data, self._router.placements)
                async with self._cond:
                    self._router.deliver(event)
                    self._cond.notify_all()
            status = call.status or "OK"
        except KServeError as exc:
            error, status = _failure(call, exc)
        except asyncio.CancelledError:
            status = "CANCELLED"
            if not self._cancelled:  # the task itself was cancelled: honour it after clean-up
                call.cancel()
                await self._end(error, status)
                raise
        except Exception as exc:  # never leave consumers waiting on a dead reader
            error, status = TransportError(f"stream reader failed: {exc!r}", url=self._url), ""
            error.__cause__ = exc
            call.cancel()
        await self._end(error, status)

    async def _end(self, error: KServeError | None, status: str) -> None:
        assert self._cond is not None
        async with self._cond:
            self._router.finish(error)
            self._cond.notify_all()
        _hook_event(self._hook, "receive", None, self._started, (), status, error)

    async def __aenter__(self) -> AsyncGRPCStream:
        self._start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            await self.aclose()
        else:
            await self.cancel()

    async def send(
        self,
        model: str,
        inputs: InputsArg,
        *,
        outputs: OutputsArg | None = None,
        version: str | int = "",
        request_id: str = "",
        parameters: Mapping[str, ParameterValue] | None = None,
        sequence_id: int | str | None = None,
        sequence_start: bool = False,
        sequence_end: bool = False,
        priority: int | None = None,
        timeout_us: int | None = None,
        allow_reserved: bool = False,
    ) -> AsyncStreamRequest:
        """Send one request; see :meth:`GRPCStream.send`."""
        self._start()
        assert self._write_lock is not None
        assert self._call is not None
        if self._half_closed or self._router.ended:
            raise _closed_error(self._router)
        request = _build(
            model,
            inputs,
            request_id,
            self._empty_final,
            outputs=outputs,
            version=version,
            parameters=parameters,
            sequence_id=sequence_id,
            sequence_start=sequence_start,
            sequence_end=sequence_end,
            priority=priority,
            timeout_us=timeout_us,
            allow_reserved=allow_reserved,
        )
        rid = request.id or self._ids.make(self._router)
        self._router.register(rid, codec.output_placements(request))
        try:
            data = _encode(request, rid)
            # Calls take one write at a time; the lock also keeps senders in order.
            async with self._write_lock:
                if self._half_closed or self._router.ended:
                    raise _closed_error(self._router)
                _hook_event(self._hook, "send", data, self._started)
                await self._call.write(data)
        except BaseException:
            self._router.forget(rid)
            raise
        return AsyncStreamRequest(self, rid)

    async def _take(self, request_id: str | None, deadline: float | None) -> _Entry | None:
        if self._cond is None and self._closed:
            return None  # closed before it ever started: nothing will come
        cond = self._start()
        router = self._router
        async with cond:
            while True:
                if request_id is None:
                    entry, done = router.take_any(), router.any_done()
                else:
                    entry, done = router.take_for(request_id), router.done_for(request_id)
                if entry is not None:
                    return entry
                if done:
                    error = router.stop_error(request_id)
                    if error is not None:
                        raise error
                    return None
                what = "stream responses" if request_id is None else f"request {request_id!r}"
                left = _remaining(deadline, what)
                try:
                    await asyncio.wait_for(cond.wait(), left)
                except asyncio.TimeoutError:
                    raise DeadlineExceededError(f"timed out waiting for {what}") from None

    async def _next(self, request_id: str | None, deadline: float | None) -> InferResult | None:
        entry = await self._take(request_id, deadline)
        return None if entry is None else entry.unwrap()

    async def _collect(self, request_id: str, timeout: float | None) -> list[InferResult]:
        deadline = _deadline(timeout)
        taken: list[_Entry] = []
        try:
            while (entry := await self._take(request_id, deadline)) is not None:
                taken.append(entry)
        except KServeError:  # timed out, or the stream failed: the caller may retry
            self._router.give_back(taken)
            raise
        return _results(taken)

    async def __aiter__(self) -> AsyncIterator[InferResult]:
        """Every response in arrival order, until all requests sent so far are complete."""
        while (result := await self._next(None, None)) is not None:
            yield result

    async def wait(
        self, request: str | AsyncStreamRequest, timeout: float | None = None
    ) -> list[InferResult]:
        """All responses of one request (by id or handle)."""
        request_id = request.id if isinstance(request, AsyncStreamRequest) else request
        return await self._collect(request_id, timeout)

    @property
    def pending(self) -> int:
        return self._router.pending

    @property
    def closed(self) -> bool:
        return self._closed

    async def aclose(self, timeout: float | None = None) -> None:
        """End gracefully: no more requests; wait (at most ``timeout``, default the client's
        timeout) for those in flight, then cancel. Idempotent."""
        if self._closed:
            return
        self._half_closed = True
        wait = self._close_timeout if timeout is None else timeout
        loop = asyncio.get_running_loop()
        deadline = None if wait is None else loop.time() + wait
        if self._reader is not None and self._write_lock is not None:
            assert self._call is not None
            assert self._cond is not None
            try:
                if self._empty_final:
                    # End the stream only after every request's final response (see close()
                    # of the sync stream: Triton 2.51 races when it ends earlier).
                    cond = self._cond
                    async with cond:
                        await asyncio.wait_for(
                            cond.wait_for(lambda: not self._router.pending or self._router.ended),
                            None if deadline is None else max(0.0, deadline - loop.time()),
                        )
                async with self._write_lock:
                    if not self._reader.done():
                        with contextlib.suppress(KServeError):
                            await self._call.done_writing()
                await asyncio.wait_for(
                    asyncio.shield(self._reader),
                    None if deadline is None else max(0.0, deadline - loop.time()),
                )
            except asyncio.TimeoutError:
                await self.cancel()
        self._finish()

    async def cancel(self) -> None:
        """Cancel the stream and every request in flight. Idempotent."""
        if self._closed:
            return
        self._half_closed = True
        self._cancelled = True
        if self._call is not None:
            self._call.cancel()
        if self._reader is not None and self._reader is not asyncio.current_task():
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader
        self._finish()

    def _finish(self) -> None:
        if not self._closed:
            self._closed = True
            if self._on_close is not None:
                self._on_close(self)

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"{self.pending} pending"
        return f"<AsyncGRPCStream {self._url} {state}>"
