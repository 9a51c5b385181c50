"""gRPC ``ModelStreamInfer`` on the servers that serve it (Triton, MLServer; KServe has none).

Each server's ``repeat_decoupled`` model answers a request with REPEAT responses (OUT = IN,
IDX = [i]). MLServer's stream answers with ``ModelInferResponse`` messages, not
``ModelStreamInferResponse`` (issue #11 item 5), and passes every request parameter on to the
model (so the client sends it no ``triton_*`` parameter unasked, item 6).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from kserve_v2 import InferResult, InvalidInputError
from kserve_v2.grpc import codec
from tests.interop.conftest import ClientUnderTest, Peer

pytestmark = pytest.mark.parametrize("protocol", ["grpc"])

STREAM_INPUTS = {"IN": np.arange(3, dtype=np.int32), "REPEAT": np.array([2], np.int32)}


def _stream_results(client: ClientUnderTest, **stream_options: Any) -> list[InferResult]:
    """One request with REPEAT = 2 on a fresh stream, which then ends (leaving ``with``
    closes the sending side and waits for the server to end the stream: a server that marks
    no request's end, MLServer, ends its requests so); the request's results."""
    if client.mode == "sync":
        with client.client.stream(**stream_options) as stream:
            request = stream.send("repeat_decoupled", STREAM_INPUTS)
        assert request.done
        return list(request.results(timeout=10))

    async def run() -> list[InferResult]:
        async with client.client.stream(**stream_options) as stream:
            request = await stream.send("repeat_decoupled", STREAM_INPUTS)
        assert request.done
        return list(await request.results(timeout=10))

    return list(client.run(run()))


def test_stream_answers_a_request(client: ClientUnderTest, peer: Peer) -> None:
    """MLServer answers with bare ``ModelInferResponse`` messages, with no mark of a
    request's last response: they are its results, and the request ends with the stream."""
    peer.skip_unless("streaming")
    results = _stream_results(client)
    assert [r.as_numpy("IDX").tolist() for r in results] == [[0], [1]]
    for result in results:
        np.testing.assert_array_equal(result.as_numpy("OUT"), STREAM_INPUTS["IN"])


def test_stream_requests_carry_no_triton_parameters_unasked(
    client: ClientUnderTest, peer: Peer
) -> None:
    """A stream request carries ``triton_*`` parameters only to a server that means something
    by them (Triton) or when the caller asked; others pass them on to the model."""
    peer.skip_unless("streaming")
    if peer.name == "triton":
        pytest.skip("Triton is the server these parameters are for")
    sent: list[Any] = []

    def record(message: Any) -> None:
        if message.direction == "send" and message.method == "stream" and message.body:
            sent.append(bytes(memoryview(message.body[0]).cast("B")))

    recording = type(client)(client.mode, client.url, timeout=60, wire_hook=record)
    try:  # what is sent is the question, not what comes back (item 5): send, then cancel
        if recording.mode == "sync":
            with recording.client.stream() as stream:
                stream.send("repeat_decoupled", STREAM_INPUTS)
                stream.cancel()
        else:

            async def send() -> None:
                async with recording.client.stream() as stream:
                    await stream.send("repeat_decoupled", STREAM_INPUTS)
                    await stream.cancel()

            recording.run(send())
    finally:
        recording.close()
    assert sent, "the stream sent nothing"
    generated = codec.generated()
    for body in sent:
        message = generated.ModelInferRequest.FromString(body)
        assert not [k for k in message.parameters if k.startswith("triton_")]


def test_a_stream_refuses_a_float_parameter_for_a_server_that_would_drop_it(
    client: ClientUnderTest, peer: Peer
) -> None:
    """As unary gRPC calls do (Triton's ``double_param`` is not the open protocol's)."""
    peer.skip_unless("streaming")
    if peer.name == "triton":
        pytest.skip("Triton takes float parameters")

    def send_sync() -> None:
        with client.client.stream() as stream:
            stream.send("repeat_decoupled", STREAM_INPUTS, parameters={"t": 0.5})

    async def send_async() -> None:
        async with client.client.stream() as stream:
            await stream.send("repeat_decoupled", STREAM_INPUTS, parameters={"t": 0.5})

    send = send_sync if client.mode == "sync" else lambda: client.run(send_async())
    with pytest.raises(InvalidInputError, match=r"request parameter 't' = 0\.5"):
        send()
