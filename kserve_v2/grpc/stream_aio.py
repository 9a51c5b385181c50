"""The asyncio stream, :class:`AsyncGRPCStream`, and its requests.

:mod:`kserve_v2.grpc.stream_sync` is generated from this module by ``scripts/unasync.py``:
edit this one, then run the script. See :mod:`kserve_v2.grpc.stream` for how streams work.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import AsyncIterator, Callable, Mapping
from types import TracebackType
from typing import TYPE_CHECKING

from kserve_v2.arguments import InputsArg, OutputsArg, check_compression, check_timeout
from kserve_v2.concurrency import AsyncBackground, AsyncCondition, AsyncLock
from kserve_v2.errors import DeadlineExceededError, KServeError, TransportError
from kserve_v2.grpc import codec, routing
from kserve_v2.grpc.backend import triton_only_parameter
from kserve_v2.grpc.routing import (
    READER_NAME,
    STREAM_METHOD,
    Entry,
    IdSource,
    Router,
    ask_empty_final,
    build_request,
    closed_error,
    encode_request,
    hook_event,
    reader_failure,
    refuse_triton_only,
    remaining,
    results_of,
    stream_deadline,
    stream_metadata,
    time_left,
    triton_server,
)
from kserve_v2.hooks import WireHook
from kserve_v2.messages import InferResult
from kserve_v2.parameters import ParameterValue

if TYPE_CHECKING:
    from kserve_v2.arguments import Headers
    from kserve_v2.grpc.backend import GRPCBackend
    from kserve_v2.interfaces import AsyncChannel, AsyncStreamCall
    from kserve_v2.messages import ServerMetadata

__all__ = ["AsyncGRPCStream", "AsyncStreamRequest"]


class AsyncStreamRequest:
    """One request sent on a stream (:class:`AsyncGRPCStream`): iterate it for its responses.

    Iteration yields each response as it arrives and stops when the request is complete
    (or the stream ended); an error response raises :class:`~kserve_v2.ServerError`, a
    stream that ended while the request was still owed a response its error (see
    :mod:`kserve_v2.grpc.stream`).

    Example::

        request = await stream.send("simple", inputs)
        (result,) = await request.results(timeout=10)
    """

    __slots__ = ("_stream", "id")

    def __init__(self, stream: AsyncGRPCStream, request_id: str) -> None:
        self._stream = stream
        self.id = request_id

    async def __aiter__(self) -> AsyncIterator[InferResult]:
        while (result := await self._stream._next(self.id, None)) is not None:
            yield result

    async def results(self, timeout: float | None = None) -> list[InferResult]:
        """Wait until the request is complete; all its responses in order.

        If one was an error, its :class:`~kserve_v2.ServerError` is raised once the request
        is complete (iterate the request instead to see the others). ``timeout`` raises
        :class:`~kserve_v2.DeadlineExceededError`; responses not yet taken stay buffered.
        """
        return await self._stream._collect(self.id, timeout)

    @property
    def done(self) -> bool:
        """Whether the request is complete (its last response arrived, or the stream ended)."""
        return self._stream._request_done(self.id)

    def __repr__(self) -> str:
        return f"AsyncStreamRequest(id={self.id!r}, done={self.done})"


class AsyncGRPCStream:
    """An asyncio ``ModelStreamInfer`` stream; made by ``AsyncClient.stream()``.

    The call opens on entering the stream (``async with``) or at its first ``send``.
    Leaving ``async with`` normally waits for the requests in flight (``aclose``), leaving it
    by an exception cancels them (``cancel``).

    ``send`` may be called from any task of the loop; a task reads the responses.

    Example::

        async with client.stream(enable_empty_final_response=True) as stream:
            first = await stream.send("repeat_decoupled", inputs_a, request_id="a")
            second = await stream.send("repeat_decoupled", inputs_b)   # id made up
            async for result in stream:        # both requests' responses, as they arrive
                print(result.id, result.final)
    """

    def __init__(
        self,
        channel: AsyncChannel,
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
        stream_deadline(check_timeout(timeout))  # checks it (the call opens later)
        self._channel = channel
        self._url = channel.config.url
        self._hook = hook
        self._timeout = timeout
        self._compression = check_compression(compression)
        self._close_timeout = close_timeout
        self._on_close = on_close
        self._metadata = stream_metadata(proto, headers, triton_grpc_error)
        self._router = Router(bool(enable_empty_final_response))
        self._empty_final = ask_empty_final(enable_empty_final_response, triton_grpc_error)
        # What the server speaks, asked (once per client) on the first send that needs it.
        self._proto = proto
        self._probe = proto.server_metadata(headers=headers, timeout=timeout)
        self._server: tuple[ServerMetadata | None, bool] | None = None
        self._ids = IdSource()
        # Held around every use of the router and the flags below; the reader notifies it.
        self._cond = AsyncCondition()
        # One message at a time, whole and in order (a send may wait for flow control).
        self._write_lock = AsyncLock()
        # Opening happens once, whoever comes first; held around no wait.
        self._open_lock = threading.Lock()
        self._call: AsyncStreamCall | None = None
        self._reader: AsyncBackground | None = None
        self._half_closed = False
        self._cancelled = False
        self._closed = False
        self._sent_any = False  # a request was sent (or is being sent) on this stream
        self._reader_waits = False  # the reader is held back by routing.READ_AHEAD
        self._started = time.perf_counter()

    # -- the reader --------------------------------------------------------------------------

    def _open(self) -> AsyncStreamCall | None:
        """The call, opened with its reader on first use; None if the stream was closed
        before that."""
        call = self._call
        if call is not None:
            return call
        with self._open_lock:
            if self._call is not None:
                return self._call
            if self._half_closed or self._closed:
                return None
            self._started = time.perf_counter()
            hook_event(self._hook, "send", None, self._started, self._metadata)
            call = self._channel.open_stream(
                STREAM_METHOD,
                timeout=self._timeout,
                metadata=self._metadata,
                compression=self._compression,
            )
            reader = AsyncBackground(f"{READER_NAME} {self._url}", self._read, call)
            reader.start()
            self._reader = reader
            self._call = call
        return call

    async def _read(self, call: AsyncStreamCall) -> None:
        """Read the call's responses into the router until it ends. (A sync stream's reader
        thread is the one that reads the native transport's socket.)"""
        router, cond, hook = self._router, self._cond, self._hook
        error: KServeError | None = None
        status = "OK"
        try:
            while (data := await call.read()) is not None:  # unasync: sync: for data in call:
                hook_event(hook, "receive", data, self._started)
                event = codec.decode_stream_response(data, router.placements)
                with cond:
                    router.deliver(event, len(data))
                    cond.notify_all()
                    # Consumers fell behind: read on once they caught up (or the stream is
                    # closing: aclose() waits for the responses, which stay for reading).
                    while router.buffered > routing.READ_AHEAD and not (
                        self._half_closed or self._cancelled
                    ):
                        self._reader_waits = True
                        await cond.wait()
                    self._reader_waits = False
            status = call.status or "OK"
        except KServeError as exc:
            error, status = reader_failure(call, exc)
        except Exception as exc:  # never leave consumers waiting on a dead reader
            error, status = TransportError(f"stream reader failed: {exc!r}", url=self._url), ""
            error.__cause__ = exc
            call.cancel()
        except BaseException:
            # Stopped from outside (the async reader's task cancelled as its loop ends): the
            # call ends too, and consumers learn that their requests will not complete.
            status = "CANCELLED"
            if not self._cancelled:
                error = TransportError("the stream's reader was stopped", url=self._url)
            call.cancel()
            raise
        finally:
            with cond:
                router.finish(error, status_ok=error is None and status == "OK")
                cond.notify_all()
            hook_event(hook, "receive", None, self._started, (), status, error)

    async def _learn(self) -> tuple[ServerMetadata | None, bool]:
        """The server's metadata (None: unknown) and whether it is known, asked through the
        channel's unary side unless the client knows them; decides the empty final response
        if the caller did not."""
        if self._server is None:
            metadata = await self._proto.alearn(self._channel, self._hook, self._probe)
            self._server = (metadata, self._proto.probe.known)
            if self._empty_final is None:
                self._empty_final = triton_server(*self._server)
        return self._server

    async def __aenter__(self) -> AsyncGRPCStream:
        if self._open() is None:
            raise closed_error(self._router)
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

    # -- sending -----------------------------------------------------------------------------

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
        """Send one inference request on the stream; returns its :class:`AsyncStreamRequest`.

        The arguments are those of ``AsyncClient.infer`` (metadata, deadline and compression
        belong to the stream: give them to ``client.stream()``). Without ``request_id`` a
        unique id is made up; an id already in flight on this stream is refused. A float
        or uint64 parameter is refused for a server that does not take Triton's parameters.
        """
        if self._empty_final is None:
            await self._learn()
        request = build_request(
            model,
            inputs,
            request_id,
            bool(self._empty_final),
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
        if not self._proto.takes_triton_parameters and triton_only_parameter(request):
            refuse_triton_only(request, *(await self._learn()))
        call = self._open()
        router = self._router
        with self._cond:
            if call is None or self._half_closed or router.ended:
                raise closed_error(router)
            rid = request.id or self._ids.make(router)
            router.register(
                rid, codec.output_placements(request), final_promised=bool(self._empty_final)
            )
            self._sent_any = True
        try:
            data = encode_request(request, rid)  # outside _cond: the reader must not wait on it
            # Outside _cond too: a send may wait for flow control, which the reader (who needs
            # _cond to deliver) releases. A cancel() meanwhile makes it raise.
            async with self._write_lock:
                if self._half_closed or router.ended:  # checked again: close() may have come
                    raise closed_error(router)
                hook_event(self._hook, "send", data, self._started)
                await call.write(data)  # unasync: sync: call.send(data)
        except BaseException:
            with self._cond:
                router.forget(rid)
            raise
        return AsyncStreamRequest(self, rid)

    # -- receiving ---------------------------------------------------------------------------

    async def _take(
        self, request_id: str | None, deadline: float | None, until_closed: bool = False
    ) -> Entry | None:
        """The next response (of one request, or of any); None once there will be none.

        ``until_closed`` (the stream's consumer only): with nothing in flight, wait for
        more requests until the sending side is closed or the stream ended."""
        router, cond = self._router, self._cond
        with cond:
            while True:
                entry = router.take(request_id)
                if entry is not None:
                    if self._reader_waits and router.buffered <= routing.READ_AHEAD:
                        cond.notify_all()  # the reader may go on
                    return entry
                if router.done(request_id) and not (
                    until_closed and not self._half_closed and not router.ended
                ):
                    error = router.stop_error(request_id)
                    if error is not None:
                        raise error
                    return None
                await cond.wait(remaining(deadline, request_id))

    async def _next(
        self, request_id: str | None, deadline: float | None, until_closed: bool = False
    ) -> InferResult | None:
        entry = await self._take(request_id, deadline, until_closed)
        return None if entry is None else entry.unwrap()

    async def _collect(self, request_id: str, timeout: float | None) -> list[InferResult]:
        deadline = stream_deadline(timeout)
        taken: list[Entry] = []
        try:
            while (entry := await self._take(request_id, deadline)) is not None:
                taken.append(entry)
        except KServeError:  # timed out, or the stream failed: the caller may retry
            with self._cond:
                self._router.give_back(taken)
            raise
        return results_of(taken)

    def _request_done(self, request_id: str) -> bool:
        with self._cond:
            return self._router.done_for(request_id)

    def __aiter__(self) -> AsyncIterator[InferResult]:
        """Every response in arrival order: ``responses()`` (see :meth:`responses`)."""
        return self.responses()

    def responses(self, *, until_closed: bool | None = None) -> AsyncIterator[InferResult]:
        """Every response of the stream in arrival order (iterating the stream itself is
        ``responses()``). An error response raises :class:`~kserve_v2.ServerError` where it
        comes; iterating again goes on after it.

        When it stops:

        * ``until_closed=False``: once every request sent so far is complete (at once if
          none is in flight). For a consumer that sends first, then reads.
        * ``until_closed=True``: once the sending side is closed (``close()``, the end of
          the ``with`` block, ``cancel()``) or the stream ended, and every request is
          complete. For a consumer running beside the sender (another task or thread),
          which must not stop while the sender catches up.
        * ``None`` (default): ``True`` if nothing was sent on the stream yet when the
          iterator is made (by this call, or by the ``for`` loop over the stream), else
          ``False``. So a consumer started before the first
          ``send`` waits for the responses instead of ending at once, and code that sends
          first and then iterates ends when its requests are answered, as before.

        Example::

            # A consumer in its own task (or thread, with the sync stream), started at once:
            async for result in stream.responses(until_closed=True):
                print(result.id, result.final)
            # It waits while the sender sends, and ends once the sender closed the stream
            # (``close()``, or the end of its ``with`` block) and every answer is in.
        """
        return self._responses(self._until_closed(until_closed))

    async def _responses(self, until_closed: bool) -> AsyncIterator[InferResult]:
        while (result := await self._next(None, None, until_closed)) is not None:
            yield result

    def _until_closed(self, until_closed: bool | None) -> bool:
        if until_closed is None:
            with self._cond:
                return not self._sent_any
        return bool(until_closed)

    async def wait(
        self, request: str | AsyncStreamRequest, timeout: float | None = None
    ) -> list[InferResult]:
        """All responses of one request (by id or handle); see
        :meth:`AsyncStreamRequest.results`."""
        request_id = request.id if isinstance(request, AsyncStreamRequest) else request
        return await self._collect(request_id, timeout)

    @property
    def pending(self) -> int:
        """How many requests sent on this stream are not complete yet."""
        with self._cond:
            return self._router.pending

    @property
    def closed(self) -> bool:
        """Whether the stream is over (closed or cancelled)."""
        return self._closed

    # -- ending ------------------------------------------------------------------------------

    async def aclose(self, timeout: float | None = None) -> None:
        """End the stream gracefully: no more requests; wait for those in flight.

        Waits at most ``timeout`` seconds (default: the client's timeout), then cancels.
        Responses not taken yet can still be read. Idempotent.
        """
        if self._closed:
            return
        wait = self._close_timeout if timeout is None else timeout
        deadline = None if wait is None else time.monotonic() + wait
        with self._cond:
            self._half_closed = True
            # Consumers waiting for more requests (until_closed), and a reader held back by
            # READ_AHEAD, go on.
            self._cond.notify_all()
        with self._open_lock:
            call, reader = self._call, self._reader
        if call is None or reader is None:  # never opened
            self._finish()
            return
        if reader.is_current():
            # A wire hook run by the reader: it cannot wait for itself (nor for a sender that
            # waits for it). The reader ends the stream when the server does.
            await call.done_writing()
            return
        if self._empty_final:
            # Every request ends with a final response: end the stream only after them.
            # Triton 2.51 races (and may abort) when the stream ends while a decoupled model
            # is still answering.
            router = self._router
            with self._cond:
                await self._cond.wait_for(
                    lambda: not router.pending or router.ended, time_left(deadline)
                )
        async with self._write_lock:  # after the message being sent, if any
            if not reader.done():
                with contextlib.suppress(KServeError):
                    await call.done_writing()
        if not await reader.join(time_left(deadline)):
            with self._cond:
                self._router.abandon(
                    DeadlineExceededError(
                        f"the stream was closed and cancelled after waiting {wait:g} s: "
                        "the request was not complete by then",
                        url=self._url,
                    )
                )
            await self.cancel()
        self._finish()

    async def cancel(self) -> None:
        """Cancel the stream and every request in flight at once. Idempotent."""
        if self._closed:
            return
        with self._cond:
            self._half_closed = True
            self._cancelled = True
            self._cond.notify_all()
        with self._open_lock:
            call, reader = self._call, self._reader
        if call is not None:
            call.cancel()
        if reader is not None and not reader.is_current():
            await reader.join()
        self._finish()

    def _finish(self) -> None:
        if not self._closed:
            self._closed = True
            if self._on_close is not None:
                self._on_close(self)

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"{self.pending} pending"
        return f"<AsyncGRPCStream {self._url} {state}>"
