"""The stream router (no I/O): responses matched to requests, taken once, in arrival order;
and the checks around it."""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np
import pytest

from kserve_v2.errors import DeadlineExceededError, InvalidInputError, ProtocolError, ServerError
from kserve_v2.grpc.codec import StreamEvent
from kserve_v2.grpc.routing import Router, remaining, stream_deadline, time_left
from kserve_v2.messages import InferResult, OutputTensor


def event(rid: str, final: bool | None, *, error: str = "", outputs: int = 1) -> StreamEvent:
    if error:
        return StreamEvent(rid, None, ServerError(error), final)
    tensors = tuple(
        OutputTensor(f"o{i}", "INT32", (1,), np.zeros(1, np.int32)) for i in range(outputs)
    )
    params = {} if final is None else {"triton_final_response": final}
    result = InferResult("m", id=rid, parameters=params, outputs=tensors)
    return StreamEvent(rid, result, None, final)


def test_router_matches_responses_to_requests() -> None:
    router = Router(show_empty_final=False)
    router.register("a")
    router.register("b")
    for e in (event("a", False), event("b", True), event("a", False), event("a", True, outputs=0)):
        router.deliver(e)
    assert router.pending == 0
    first = router.take_for("a")
    assert first is not None
    assert first.request_id == "a"
    taken = router.take_any()
    assert taken is not None
    assert taken.request_id == "b"
    second = router.take_any()
    assert second is not None
    assert second.request_id == "a"
    assert router.take_any() is None  # the empty final response was hidden
    assert router.any_done()
    assert router.done_for("a")
    assert router.stop_error(None) is None


def test_router_shows_empty_final_responses_when_asked() -> None:
    router = Router(show_empty_final=True)
    router.register("a")
    router.deliver(event("a", True, outputs=0))
    entry = router.take_for("a")
    assert entry is not None
    assert entry.result is not None
    assert entry.result.final is True


def test_router_ends_requests_answered_by_bare_responses_with_the_stream() -> None:
    router = Router(show_empty_final=False)
    router.register("a")
    for _ in range(2):
        router.deliver(replace(event("a", None), bare=True))
        assert router.is_pending("a")
    router.finish(None)
    assert router.done_for("a")
    assert [e.request_id for e in (router.take_for("a"), router.take_for("a")) if e] == ["a", "a"]
    assert router.take_for("a") is None


def test_router_fails_requests_an_ok_end_leaves_owed_a_response() -> None:
    """Status OK while requests wait: those owed more fail (no response at all; the empty
    final response asked for and not come), those whose end could not be known do not."""
    router = Router(show_empty_final=False)
    router.register("silent")  # never answered
    router.register("promised", final_promised=True)
    router.deliver(event("promised", False))  # its final response never comes
    router.register("open")  # Triton's decoupled answer, the empty final not asked for
    router.deliver(event("open", False))
    router.register("bare", final_promised=True)  # MLServer's answer marks no end
    router.deliver(replace(event("bare", None), bare=True))
    router.register("done", final_promised=True)
    router.deliver(event("done", True))
    router.finish(None, status_ok=True)
    for request_id in ("silent", "promised"):
        error = router.stop_error(request_id)
        assert isinstance(error, ProtocolError)
        assert f"request {request_id!r} was still waiting for a final response" in str(error)
    for request_id in ("open", "bare", "done"):
        assert router.stop_error(request_id) is None
    error = router.stop_error(None)
    assert isinstance(error, ProtocolError)
    assert "requests 'promised', 'silent' were still waiting" in str(error)


def test_router_ok_end_with_nothing_owed_and_cancel_raise_nothing() -> None:
    router = Router(show_empty_final=False)
    router.register("open")
    router.deliver(event("open", False))
    router.finish(None, status_ok=True)
    assert router.stop_error(None) is None
    cancelled = Router(show_empty_final=False)
    cancelled.register("a", final_promised=True)
    cancelled.finish(None)  # this side cancelled: the caller knows
    assert cancelled.stop_error("a") is None
    assert cancelled.stop_error(None) is None


def test_router_abandoned_requests_raise_the_reason() -> None:
    router = Router(show_empty_final=False)
    router.register("a", final_promised=True)
    router.register("b")
    router.deliver(event("b", True))
    reason = DeadlineExceededError("closed after waiting")
    router.abandon(reason)
    router.finish(None)  # the cancel that follows
    assert router.stop_error("a") is reason
    assert router.stop_error(None) is reason
    assert router.stop_error("b") is None
    failed = Router(show_empty_final=False)
    failed.register("a")
    failure = ServerError("stream failed", grpc_code="INTERNAL")
    failed.finish(failure)
    failed.abandon(reason)
    assert failed.stop_error("a") is failure  # a failure wins


def test_router_errors_end_a_request_only_when_final_or_unflagged() -> None:
    router = Router(show_empty_final=False)
    router.register("a")
    router.register("b")
    router.deliver(event("a", False, error="mid-stream"))  # decoupled: more may follow
    router.deliver(event("b", None, error="unknown model"))  # rejected before running
    assert router.is_pending("a")
    assert not router.is_pending("b")
    entry = router.take_for("b")
    assert entry is not None
    assert entry.error is not None
    assert entry.error.message == "unknown model"
    assert router.done_for("b")
    assert not router.done_for("a")


def test_router_refuses_ids_in_flight_and_reports_the_streams_end() -> None:
    router = Router(show_empty_final=False)
    router.register("a")
    with pytest.raises(InvalidInputError, match="in flight"):
        router.register("a")
    router.register("b")
    router.deliver(event("b", True))
    failure = ServerError("stream failed", grpc_code="INTERNAL")
    router.finish(failure)
    assert router.done_for("a")
    assert router.stop_error("a") is failure
    assert router.stop_error("b") is None  # b completed before the failure
    assert router.stop_error(None) is failure
    router.forget("a")
    assert router.pending == 0


def test_router_gives_back_taken_entries_in_place() -> None:
    router = Router(show_empty_final=False)
    router.register("a")
    for e in (event("a", False), event("b", True), event("a", True)):
        router.deliver(e)
    first, second = router.take_for("a"), router.take_for("a")
    assert first is not None
    assert second is not None
    router.give_back([first, second])
    order = [router.take_any() for _ in range(3)]
    assert [(e.request_id, e.seq) for e in order if e is not None] == [("a", 0), ("b", 1), ("a", 2)]
    assert router.take_any() is None


def test_router_passes_unknown_ids_to_the_stream_consumer() -> None:
    router = Router(show_empty_final=False)
    router.deliver(event("stranger", True))
    entry = router.take_any()
    assert entry is not None
    assert entry.request_id == "stranger"


def test_take_and_done_serve_both_kinds_of_consumer() -> None:
    router = Router(show_empty_final=False)
    router.register("a")
    router.register("b")
    router.deliver(event("b", False))
    assert router.take("a") is None
    assert not router.done("a")
    entry = router.take(None)
    assert entry is not None
    assert entry.request_id == "b"
    assert not router.done(None)
    router.deliver(event("a", True))
    router.deliver(event("b", True))
    assert router.done(None)  # nothing pending: the stream's consumer stops once it is empty
    assert [e.request_id for e in (router.take(None), router.take(None)) if e] == ["a", "b"]


def test_deadlines() -> None:
    assert stream_deadline(None) is None
    assert remaining(None, "a") is None
    assert time_left(None) is None
    for bad in (0, -1, True):
        with pytest.raises(InvalidInputError, match="timeout"):
            stream_deadline(bad)
    deadline = stream_deadline(30)
    assert deadline is not None
    left = remaining(deadline, "a")
    assert left is not None
    assert 0 < left <= 30
    past = time.monotonic() - 1
    assert time_left(past) == 0.0
    with pytest.raises(DeadlineExceededError, match="request 'a'"):
        remaining(past, "a")
    with pytest.raises(DeadlineExceededError, match="stream responses"):
        remaining(past, None)


def test_router_counts_the_bytes_it_buffers() -> None:
    """``buffered`` follows what is delivered and not taken (a stream's reader stops reading
    above its read-ahead bound): taken, given back, hidden empty finals count nothing."""
    router = Router(show_empty_final=False)
    router.register("a")
    router.register("b")
    router.deliver(event("a", False), 100)
    router.deliver(event("b", False), 10)
    router.deliver(event("a", True, outputs=0), 7)  # an empty final: hidden, not buffered
    assert router.buffered == 110
    first = router.take_any()
    assert first is not None
    assert first.size == 100
    assert router.buffered == 10
    router.give_back([first])
    assert router.buffered == 110
    assert router.take_for("b") is not None
    assert router.take_for("a") is not None
    assert router.buffered == 0
