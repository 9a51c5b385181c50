"""The contract's :class:`MetadataProbe`: what it keeps, what it asks again, who asks."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kserve_v2.backend import MetadataProbe
from kserve_v2.errors import (
    DeadlineExceededError,
    InvalidInputError,
    KServeError,
    ProtocolError,
    ServerError,
    TransportError,
)
from kserve_v2.hooks import WireHook
from kserve_v2.messages import ServerMetadata

METADATA = ServerMetadata(name="srv", version="1", extensions=("parameters",))


class ScriptedCall:
    """A metadata call that answers with each of ``answers`` in turn (an error is raised)."""

    def __init__(self, answers: list[ServerMetadata | KServeError]) -> None:
        self.answers = answers
        self.runs = 0

    def _next(self) -> ServerMetadata:
        answer = self.answers[min(self.runs, len(self.answers) - 1)]
        self.runs += 1
        if isinstance(answer, KServeError):
            raise answer
        return answer

    def run(self, io: Any, hook: WireHook | None, /) -> ServerMetadata:
        return self._next()

    async def arun(self, io: Any, hook: WireHook | None, /) -> ServerMetadata:
        await asyncio.sleep(0)  # others may queue meanwhile
        return self._next()


@pytest.mark.parametrize(
    ("error", "kept"),
    [
        (ServerError("not found", http_status=404), True),
        (ServerError("forbidden", http_status=403), True),
        (ServerError("no such method", grpc_code="UNIMPLEMENTED"), True),
        (ProtocolError("not JSON"), True),
        (ServerError("starting", http_status=503), False),
        (ServerError("busy", http_status=429), False),
        (ServerError("down", grpc_code="UNAVAILABLE"), False),
        (TransportError("connection refused"), False),
        (DeadlineExceededError("timed out"), False),
    ],
)
def test_an_error_answer_is_kept_unless_it_may_pass(error: KServeError, kept: bool) -> None:
    probe = MetadataProbe()
    call = ScriptedCall([error, METADATA])
    assert probe.get(lambda: call, None, None) is None
    assert probe.known is kept
    assert probe.get(lambda: call, None, None) is (None if kept else METADATA)
    assert call.runs == (1 if kept else 2)
    assert probe.known


def test_the_metadata_is_asked_once() -> None:
    probe = MetadataProbe()
    call = ScriptedCall([METADATA])
    for _ in range(3):
        assert probe.get(lambda: call, None, None) is METADATA
    assert call.runs == 1


def test_a_bad_argument_is_raised() -> None:
    probe = MetadataProbe()
    with pytest.raises(InvalidInputError):
        probe.get(lambda: ScriptedCall([InvalidInputError("bad header")]), None, None)
    assert not probe.known


@pytest.mark.parametrize("first", [METADATA, TransportError("refused")])
def test_tasks_that_waited_do_not_ask_again(first: ServerMetadata | KServeError) -> None:
    probe = MetadataProbe()
    call = ScriptedCall([first, METADATA])

    async def run() -> list[ServerMetadata | None]:
        return list(await asyncio.gather(*(probe.aget(lambda: call, None, None) for _ in range(5))))

    answers = asyncio.run(run())
    assert call.runs == 1
    assert answers == [first if isinstance(first, ServerMetadata) else None] * 5
    assert asyncio.run(probe.aget(lambda: call, None, None)) is METADATA  # the next need asks
