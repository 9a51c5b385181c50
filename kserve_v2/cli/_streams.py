"""What the commands that read a gRPC stream (`stream`, `generate`) share: reading the
responses as they arrive until the stream is over, whatever the server marks.

Triton flags each request's last response (``triton_final_response``); other servers
(MLServer) flag none, and their stream ends only after the client has ended its sending
side. So the commands send their requests, then end the sending side from a thread
(``close()``: it waits for the requests in flight at most the client's ``--timeout``, then
cancels the stream) while the main thread prints the responses as they come.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

from kserve_v2.client.sync import Client
from kserve_v2.errors import KServeError, ServerError
from kserve_v2.grpc import GRPCStream
from kserve_v2.messages import InferResult

__all__ = ["flags_final_responses", "responses_until_over"]


def flags_final_responses(client: Client) -> bool:
    """Whether the server marks each request's last response: it takes Triton's parameters
    (the stream's own test for asking the empty final response); False when its metadata
    cannot be read."""
    from kserve_v2.grpc.backend import speaks_triton_parameters

    try:
        return speaks_triton_parameters(client.server_metadata())
    except KServeError:
        return False


def responses_until_over(stream: GRPCStream) -> Iterator[InferResult | ServerError]:
    """Every response of ``stream`` (whose requests are all sent) as it arrives, until the
    stream is over. An error the server sends is yielded as its :class:`ServerError`: one
    for a request (the stream goes on after it), or the status that ended the stream (then
    nothing follows). Other failures (the deadline, a lost connection) are raised."""
    closer = threading.Thread(target=stream.close, name="kserve-v2-stream-close", daemon=True)
    closer.start()
    try:
        responses = stream.responses(until_closed=True)
        shown: ServerError | None = None
        while True:
            try:
                result = next(responses)
            except StopIteration:
                return
            except ServerError as exc:
                # A request's error is taken once; the stream's own ending error is raised
                # to every later read: once shown, it is the end.
                if exc is shown:
                    return
                shown = exc
                yield exc
                responses = stream.responses(until_closed=True)
                continue
            yield result
    finally:
        if closer.is_alive():
            stream.cancel()  # the reader stopped early (an error, Ctrl-C): end it now
        closer.join()
