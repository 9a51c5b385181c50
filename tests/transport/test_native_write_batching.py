"""How the asyncio native connection batches its writes, against an in-memory transport that
answers each request at once (so every round of the event loop is visible): the requests
made by callers that one read woke go out in one write, in the same loop round."""

from __future__ import annotations

import asyncio
import struct

import pytest

from kserve_v2.endpoint import parse_url
from kserve_v2.grpc.config import channel_config
from kserve_v2.h2.frames import DATA, FLAG_ACK, FLAG_END_HEADERS, FLAG_END_STREAM, SETTINGS
from kserve_v2.transport.native.connection import AsyncConnection, ChannelSettings
from tests.hostile.h2_server import frame, grpc_message
from tests.loops import LOOP_PARAMS
from tests.loops import run as run_on

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
METHOD = "/inference.GRPCInferenceService/ModelInfer"
# Stateless HPACK (no dynamic table): ":status: 200" indexed, content-type and grpc-status
# as literals without indexing.
RESPONSE_HEADERS = b"\x88\x0f\x10\x10application/grpc"
TRAILERS = b"\x00\x0bgrpc-status\x010"


class AnsweringTransport(asyncio.Transport):
    """Records each write; answers every request that ends in it, all in one read, on the
    next loop round."""

    def __init__(self, conn: AsyncConnection) -> None:
        super().__init__()
        self._conn = conn
        self._buffer = bytearray()
        self._answers: list[bytes] = []
        self.writes: list[list[int]] = []  # per write: the streams whose requests ended in it

    def get_extra_info(self, name: str, default: object = None) -> object:
        return default

    def is_closing(self) -> bool:
        return False

    def get_write_buffer_size(self) -> int:
        return 0

    def close(self) -> None:
        asyncio.get_running_loop().call_soon(self._conn.connection_lost, None)

    def abort(self) -> None:
        self.close()

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.writelines([data])

    def writelines(self, buffers: object) -> None:
        data = self._buffer
        for buffer in buffers:  # type: ignore[attr-defined]
            data += buffer
        if data.startswith(PREFACE):
            del data[: len(PREFACE)]
            self._answers.append(frame(SETTINGS, 0, 0))
        ended: list[int] = []
        received = 0
        while len(data) >= 9:
            length = int.from_bytes(data[:3], "big")
            if len(data) < 9 + length:
                break
            kind, flags = data[3], data[4]
            stream_id = int.from_bytes(data[5:9], "big") & 0x7FFFFFFF
            if kind == SETTINGS and not flags & FLAG_ACK:
                self._answers.append(frame(SETTINGS, FLAG_ACK, 0))
            if kind == DATA:
                received += length
                if flags & FLAG_END_STREAM:
                    ended.append(stream_id)
            del data[: 9 + length]
        if received:  # give the connection window back, as a reading server does
            self._answers.append(frame(0x8, 0, 0, struct.pack(">L", received)))
        for stream_id in ended:
            self._answers += [
                frame(0x1, FLAG_END_HEADERS, stream_id, RESPONSE_HEADERS),
                frame(DATA, 0, stream_id, grpc_message(b"answer")),
                frame(0x1, FLAG_END_HEADERS | FLAG_END_STREAM, stream_id, TRAILERS),
            ]
        self.writes.append(ended)
        if self._answers:
            asyncio.get_running_loop().call_soon(self._deliver)

    def _deliver(self) -> None:
        if self._answers:
            answers, self._answers = b"".join(self._answers), []
            self._conn.received(answers)


@pytest.mark.parametrize("loop_kind", LOOP_PARAMS)
def test_requests_made_by_callers_one_read_woke_go_out_in_one_write(loop_kind: str) -> None:
    """16 callers in a loop: each read answers all 16, and the 16 requests the woken callers
    make go out in one write before the loop's next round (a callback scheduled after the
    read runs after that write). One write per round, not one per request, and no round
    spent waiting for a flush scheduled after the callers."""
    callers, rounds = 16, 5

    async def run() -> None:
        settings = ChannelSettings(channel_config(parse_url("grpc://127.0.0.1:1")), None)
        conn = AsyncConnection(settings, lambda _conn: None)
        transport = AnsweringTransport(conn)
        conn.connection_made(transport)
        block, parts = settings.unary_request(METHOD, b"request", None, (), None)
        loop = asyncio.get_running_loop()
        written_before_next_round: list[int] = []
        deliver = transport._deliver

        def deliver_and_look() -> None:
            before = len(transport.writes)
            deliver()

            def look() -> None:  # in the next round, after the callers this read woke
                new = transport.writes[before:]
                written_before_next_round.append(len(new[0]) if len(new) == 1 else -len(new))

            loop.call_soon(look)

        transport._deliver = deliver_and_look  # type: ignore[method-assign]

        async def caller(n: int) -> None:
            for _ in range(n):
                response = await conn.call(block, list(parts), None, None)
                assert response.messages == [b"answer"]

        await asyncio.gather(*(caller(rounds) for _ in range(callers)))
        conn.abort()
        request_writes = [ended for ended in transport.writes if ended]
        assert [len(ended) for ended in request_writes] == [callers] * rounds
        # After each read of answers but the last (whose callers had nothing more to ask),
        # the next round found its 16 requests already written.
        assert written_before_next_round[: rounds - 1] == [callers] * (rounds - 1)

    run_on(run(), loop_kind)


class DribblingTransport(AnsweringTransport):
    """Delivers the answers as a BufferedProtocol transport does, a few bytes per read into
    the connection's own buffer, and scribbles over that buffer after each read."""

    def _deliver(self) -> None:
        if not self._answers:
            return
        answers, self._answers = b"".join(self._answers), []
        for start in range(0, len(answers), 7):
            piece = answers[start : start + 7]
            buffer = self._conn.get_buffer(-1)
            buffer[: len(piece)] = piece
            self._conn.buffer_updated(len(piece))
            buffer[: len(piece)] = b"\xff" * len(piece)


@pytest.mark.parametrize("loop_kind", LOOP_PARAMS)
def test_reads_into_the_connection_buffer_split_anywhere(loop_kind: str) -> None:
    """The loop reads into one buffer of the connection's (no allocation per read): frames,
    headers and messages cut across reads are kept by copy, since the buffer's bytes are
    overwritten by the next read."""

    async def run() -> None:
        settings = ChannelSettings(channel_config(parse_url("grpc://127.0.0.1:1")), None)
        conn = AsyncConnection(settings, lambda _conn: None)
        assert isinstance(conn, asyncio.BufferedProtocol)
        conn.connection_made(DribblingTransport(conn))
        block, parts = settings.unary_request(METHOD, b"request", None, (), None)

        async def caller() -> None:
            for _ in range(3):
                response = await conn.call(block, list(parts), None, None)
                assert response.messages == [b"answer"]
                assert response.status() == ("OK", "")

        await asyncio.gather(*(caller() for _ in range(4)))
        conn.abort()

    run_on(run(), loop_kind)
