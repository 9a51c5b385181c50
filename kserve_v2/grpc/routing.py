"""What the sync and asyncio streams share, with no I/O: the router that matches responses
to requests, and the checks, encodings and wire-hook events around it.

:mod:`kserve_v2.grpc.stream_aio` (and :mod:`kserve_v2.grpc.stream_sync`, generated from it)
hold a :class:`Router` under their condition and call it for every response and every
consumer; see :mod:`kserve_v2.grpc.stream` for the behaviour.

Example::

    router = Router(show_empty_final=False)
    router.register("a")
    router.deliver(codec.decode_stream_response(message, router.placements))
    entry = router.take("a")        # the response, or None while none has come
"""

from __future__ import annotations

import itertools
import time
from collections import OrderedDict, deque
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Final

from kserve_v2.arguments import InputsArg, build_infer_request
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
from kserve_v2.grpc.backend import (
    SERVICE,
    refuse_triton_only_parameter,
    speaks_triton_parameters,
    triton_only_parameter,
)
from kserve_v2.grpc.config import Metadata
from kserve_v2.grpc.status import status_of
from kserve_v2.hooks import WireHook, WireMessage
from kserve_v2.messages import InferRequest, InferResult
from kserve_v2.parameters import ParameterValue

if TYPE_CHECKING:
    from kserve_v2.arguments import Headers
    from kserve_v2.grpc.backend import GRPCBackend
    from kserve_v2.interfaces import AsyncStreamCall, SyncStreamCall
    from kserve_v2.messages import ServerMetadata

__all__ = [
    "READ_AHEAD",
    "READER_NAME",
    "STREAM_METHOD",
    "Entry",
    "IdSource",
    "Router",
    "ask_empty_final",
    "build_request",
    "closed_error",
    "encode_request",
    "hook_event",
    "reader_failure",
    "refuse_triton_only",
    "remaining",
    "results_of",
    "stream_deadline",
    "stream_metadata",
    "time_left",
    "triton_server",
]

#: The full name of the streaming RPC.
STREAM_METHOD: Final = SERVICE + "ModelStreamInfer"
#: Name (prefix) of the sync streams' reader threads and the async streams' reader tasks.
READER_NAME: Final = "kserve-v2 stream reader"
#: How far a stream's reader runs ahead of its consumers: beyond this many bytes of responses
#: delivered and not taken it stops reading the call until they catch up, and the call's
#: flow-control window then holds the server back (a consumer that stops reading does not
#: grow memory without end). A consumer that waits for one request while another request's
#: responses fill this much is not served until those are taken.
READ_AHEAD: Final = 16 << 20
_EMPTY_FINAL: Final = "triton_enable_empty_final_response"


@dataclass(slots=True)
class Entry:
    """One buffered response (or error) of a request, with its arrival number."""

    request_id: str
    result: InferResult | None
    error: ServerError | None
    seq: int = 0
    size: int = 0  # bytes of the message it was decoded from

    def unwrap(self) -> InferResult:
        if self.error is not None:
            raise self.error
        assert self.result is not None
        return self.result


class Router:
    """Matches stream responses to requests and buffers them until taken; no I/O, no locks
    (the streams hold their condition around every call).

    Each response is taken once, by whoever asks first: the request's consumer or the
    stream's (``request_id=None`` in :meth:`take` and :meth:`done`). ``_order`` keeps arrival
    order across requests, ``_queues`` each request's share of it, so both kinds of consumer
    take in O(1).

    A request the stream's end leaves in flight fails, unless its end could not be known:

    * the stream failed: its error, for every request in flight;
    * the stream ended with status OK (the server's word that it answered everything):
      :class:`~kserve_v2.ProtocolError` for a request that was owed more, that is one that
      got no response, or one that asked for Triton's empty final response
      (``final_promised``) and did not get it. A request whose responses marked no end
      (MLServer's bare responses; Triton's not final ones, without the empty final response
      asked for) ends with the stream, as it must;
    * the stream was closed and its close timed out (:meth:`abandon`): that error.
    """

    def __init__(self, show_empty_final: bool) -> None:
        self.show_empty_final = show_empty_final
        self._pending: set[str] = set()
        self._order: OrderedDict[int, Entry] = OrderedDict()
        self._queues: dict[str, deque[int]] = {}
        self._seq = itertools.count()
        # Outputs each request placed in shared memory: Triton's answer does not say which.
        self._placements: dict[str, codec.Placements] = {}
        # Requests that asked for the empty final response: their end is sure to come.
        self._promised: set[str] = set()
        # Requests in flight that may end with the stream (see the class docstring).
        self._open_ended: set[str] = set()
        self.ended = False
        self.error: KServeError | None = None
        #: Bytes of the messages of the responses buffered (delivered, not taken yet).
        self.buffered = 0
        # Why the requests still in flight will not complete, when the stream's end was no
        # failure: "ok" (the server ended it) or the error abandon() was given.
        self._left: str | KServeError | None = None

    @property
    def pending(self) -> int:
        return len(self._pending)

    def is_pending(self, request_id: str) -> bool:
        return request_id in self._pending

    def register(
        self,
        request_id: str,
        placements: codec.Placements | None = None,
        *,
        final_promised: bool = False,
    ) -> None:
        """A request sent; ``final_promised``: it asked for Triton's empty final response,
        so it is not complete until a final response comes."""
        if request_id in self._pending:
            raise InvalidInputError(
                f"request id {request_id!r} is already in flight on this stream; "
                "ids must tell concurrent requests apart",
                value=request_id,
            )
        self._pending.add(request_id)
        if placements:
            self._placements[request_id] = placements
        if final_promised:
            self._promised.add(request_id)

    def placements(self, request_id: str) -> codec.Placements | None:
        return self._placements.get(request_id)

    def forget(self, request_id: str) -> None:
        """A request that could not be sent."""
        self._ended(request_id)
        self._collect(request_id)

    def _ended(self, request_id: str) -> None:
        self._pending.discard(request_id)
        self._placements.pop(request_id, None)
        self._promised.discard(request_id)
        self._open_ended.discard(request_id)

    def deliver(self, event: codec.StreamEvent, size: int = 0) -> None:
        """Buffer a response (``size``: the bytes of its message, see :attr:`buffered`)."""
        request_id = event.request_id
        if event.complete:
            self._ended(request_id)
        elif (event.bare or request_id not in self._promised) and request_id in self._pending:
            self._open_ended.add(request_id)  # its end may come with the stream's only
        if event.empty_final and not self.show_empty_final:
            self._collect(request_id)  # it only said "complete"
            return
        seq = next(self._seq)
        self._order[seq] = Entry(request_id, event.result, event.error, seq, size)
        self._queues.setdefault(request_id, deque()).append(seq)
        self.buffered += size

    def give_back(self, entries: list[Entry]) -> None:
        """Put taken entries back where they were (a wait that timed out loses nothing).

        Rare (timeouts), so the buffers are simply re-sorted by arrival number.
        """
        if not entries:
            return
        for entry in entries:
            self._order[entry.seq] = entry
            self._queues.setdefault(entry.request_id, deque()).append(entry.seq)
            self.buffered += entry.size
        self._order = OrderedDict(sorted(self._order.items()))
        for request_id in {entry.request_id for entry in entries}:
            self._queues[request_id] = deque(sorted(self._queues[request_id]))

    def finish(self, error: KServeError | None, *, status_ok: bool = False) -> None:
        """The stream ended: failed with ``error``, or (None) cancelled, or with the
        server's status OK (``status_ok``)."""
        self.ended = True
        if self.error is None:
            self.error = error
        if status_ok and self._left is None:
            self._left = "ok"

    def abandon(self, error: KServeError) -> None:
        """The requests in flight will not complete, for a reason of this side's (a close
        that timed out): consumers still waiting for them raise ``error``. The stream is
        cancelled next; a failure already recorded wins."""
        if self._left is None:
            self._left = error

    def take(self, request_id: str | None) -> Entry | None:
        """The earliest response buffered for ``request_id`` (for any request: None)."""
        return self.take_any() if request_id is None else self.take_for(request_id)

    def take_any(self) -> Entry | None:
        if not self._order:
            return None
        _, entry = self._order.popitem(last=False)
        # The earliest response overall is the earliest of its request too.
        self._queues[entry.request_id].popleft()
        self._collect(entry.request_id)
        self.buffered -= entry.size
        return entry

    def take_for(self, request_id: str) -> Entry | None:
        queue_ = self._queues.get(request_id)
        if not queue_:
            return None
        entry = self._order.pop(queue_.popleft())
        self._collect(request_id)
        self.buffered -= entry.size
        return entry

    def done(self, request_id: str | None) -> bool:
        """Nothing more can come for ``request_id`` (for the stream's consumer: None), given
        nothing is buffered for it."""
        return self.any_done() if request_id is None else self.done_for(request_id)

    def any_done(self) -> bool:
        return self.ended or not self._pending

    def done_for(self, request_id: str) -> bool:
        return self.ended or request_id not in self._pending

    def stop_error(self, request_id: str | None) -> KServeError | None:
        """The error a consumer raises once its responses ran out, if any: for consumers
        whose request(s) were still in flight, the stream's failure, or why the stream's
        end left them incomplete (see the class docstring)."""
        if request_id is None:
            if not self._pending:
                return None
            if self.error is not None:
                return self.error
            stuck = sorted(self._pending - self._open_ended)
            return self._incomplete(stuck) if stuck else None
        if request_id not in self._pending:
            return None
        if self.error is not None:
            return self.error
        return None if request_id in self._open_ended else self._incomplete([request_id])

    def _incomplete(self, request_ids: list[str]) -> KServeError | None:
        left = self._left
        if left is None:
            return None
        if not isinstance(left, str):
            return left
        names = ", ".join(repr(rid) for rid in request_ids[:5])
        if len(request_ids) > 5:
            names += f" and {len(request_ids) - 5} more"
        what = f"request {names} was" if len(request_ids) == 1 else f"requests {names} were"
        return ProtocolError(
            f"the server ended the stream (status OK) while {what} still waiting for "
            "a final response"
        )

    def _collect(self, request_id: str) -> None:
        if request_id not in self._pending and not self._queues.get(request_id):
            self._queues.pop(request_id, None)


class IdSource:
    """Request ids for callers who give none, never one that is in flight."""

    def __init__(self) -> None:
        self._counter = itertools.count(1)

    def make(self, router: Router) -> str:
        while True:
            candidate = f"kserve-v2-{next(self._counter)}"
            if not router.is_pending(candidate):
                return candidate


# ------------------------------------------------------------------------------- requests


def build_request(
    model: str, inputs: InputsArg, request_id: str, empty_final: bool, **kw: Any
) -> InferRequest:
    """Validate one streamed request (its id may still be empty)."""
    request = build_infer_request(model, inputs, request_id=request_id, **kw)
    if not empty_final:
        return request
    params: dict[str, ParameterValue] = dict(request.parameters)
    params.setdefault(_EMPTY_FINAL, True)
    return replace(request, parameters=params)


def ask_empty_final(enable_empty_final_response: bool, triton_grpc_error: bool) -> bool | None:
    """Whether requests ask for Triton's empty final response; ``None``: if the server is
    Triton (see :func:`triton_server`).

    Asked, always. Otherwise from Triton: without it a decoupled model's request never shows
    as complete (the router hides the response unless the caller asked to see it). Not in
    Triton's gRPC error mode unless asked: Triton 2.51 aborts (``!byte_buffer->Valid()``) when
    it ends a stream on an error and then writes the empty final response of the failed
    request.
    """
    if enable_empty_final_response:
        return True
    return False if triton_grpc_error else None


def triton_server(metadata: ServerMetadata | None, known: bool) -> bool:
    """Whether to treat the server as Triton: it lists Triton's ``parameters`` extension, or
    its metadata could not be read (the parameter then goes as it always did: without it,
    Triton's decoupled requests would never complete)."""
    return speaks_triton_parameters(metadata) or not known


def refuse_triton_only(request: InferRequest, metadata: ServerMetadata | None, known: bool) -> None:
    """Refuse a parameter only Triton's ``InferParameter`` carries, for another server."""
    if not speaks_triton_parameters(metadata):
        found = triton_only_parameter(request)
        if found is not None:
            refuse_triton_only_parameter(found, metadata, known)


def encode_request(request: InferRequest, request_id: str) -> bytes:
    if request.id != request_id:
        request = replace(request, id=request_id)
    return codec.encode_infer_request(request)


def stream_metadata(
    proto: GRPCBackend, headers: Headers | None, triton_grpc_error: bool
) -> Metadata:
    metadata = proto.metadata(headers)
    if triton_grpc_error:
        metadata = (*metadata, ("triton_grpc_error", "true"))
    return metadata


# -------------------------------------------------------------------------------- waiting


def stream_deadline(timeout: float | None) -> float | None:
    """The monotonic deadline ``timeout`` seconds from now (checked: positive or None)."""
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not timeout > 0:
        raise InvalidInputError("timeout must be a positive number or None", value=timeout)
    return time.monotonic() + timeout


def remaining(deadline: float | None, request_id: str | None) -> float | None:
    """Seconds left for a consumer to wait; :class:`DeadlineExceededError` when none."""
    if deadline is None:
        return None
    left = deadline - time.monotonic()
    if left <= 0:
        what = "stream responses" if request_id is None else f"request {request_id!r}"
        raise DeadlineExceededError(f"timed out waiting for {what}")
    return left


def time_left(deadline: float | None) -> float | None:
    """Seconds left until ``deadline`` (0 once past; None: no deadline)."""
    return None if deadline is None else max(0.0, deadline - time.monotonic())


def results_of(entries: list[Entry]) -> list[InferResult]:
    """The results of a complete request; its first error, if any, is raised instead."""
    for entry in entries:
        if entry.error is not None:
            raise entry.error
    return [entry.unwrap() for entry in entries]


# ---------------------------------------------------------------------- ends and the hook


def closed_error(router: Router) -> KServeError:
    if router.error is not None:
        return router.error
    return TransportError("the stream is closed; open a new one with client.stream()")


def reader_failure(
    call: SyncStreamCall | AsyncStreamCall, exc: KServeError
) -> tuple[KServeError, str]:
    """The error and wire-hook status of a reader that stopped on ``exc``.

    An error the call raised carries its status; one raised while the call still runs (a
    malformed message) ends the call here.
    """
    if call.status is not None:
        return exc, call.status
    call.cancel()
    return exc, "PROTOCOL_ERROR" if isinstance(exc, ProtocolError) else status_of(exc)


def hook_event(
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
