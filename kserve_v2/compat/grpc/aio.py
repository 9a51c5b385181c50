"""tritonclient.grpc.aio on kserve-v2: ``import kserve_v2.compat.grpc.aio as aiogrpcclient``.

Example::

    import kserve_v2.compat.grpc.aio as aiogrpcclient

    async def main():
        client = aiogrpcclient.InferenceServerClient("localhost:8001")
        result = await client.infer("simple", inputs)

        async def requests():
            yield {"model_name": "repeat_decoupled", "inputs": [x, repeat]}

        async for result, error in client.stream_infer(requests()):
            ...
        await client.close()

The client is a :class:`kserve_v2.AsyncClient`: calls of any number of tasks share one
HTTP/2 connection (on the native transport).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterable, AsyncIterator, Mapping
from types import TracebackType
from typing import Any

from kserve_v2.compat._base import (
    InferenceServerClientPlugin,
    PluginHost,
    Request,
    translate,
    translated,
)
from kserve_v2.compat.grpc._methods_aio import AsyncGRPCMethods
from kserve_v2.compat.grpc._shared import (
    InferInput,
    InferRequestedOutput,
    InferResult,
    KeepAliveOptions,
    StreamRequests,
    stream_ends,
    stream_options,
)
from kserve_v2.compat.utils import InferenceServerException, raise_error
from kserve_v2.errors import KServeError

__all__ = [
    "InferInput",
    "InferRequestedOutput",
    "InferResult",
    "InferenceServerClient",
    "InferenceServerClientBase",
    "InferenceServerClientPlugin",
    "InferenceServerException",
    "KeepAliveOptions",
    "Request",
    "raise_error",
]

#: The clients' base class (plugin registration), under tritonclient's name.
InferenceServerClientBase = PluginHost


class InferenceServerClient(AsyncGRPCMethods):
    """An asyncio client for Triton's gRPC endpoint (``url`` is ``host:port``); the
    arguments are those of :class:`kserve_v2.compat.grpc.InferenceServerClient`."""

    # -- lifecycle ---------------------------------------------------------------------------

    async def close(self) -> None:
        """Close the client (its streams are cancelled)."""
        await self._client.aclose()

    async def __aenter__(self) -> InferenceServerClient:
        return self

    async def __aexit__(
        self,
        type: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()

    # -- streaming ---------------------------------------------------------------------------

    def stream_infer(
        self,
        inputs_iterator: AsyncIterable[Mapping[str, Any]],
        stream_timeout: float | None = None,
        headers: Mapping[str, str] | None = None,
        compression_algorithm: str | None = None,
    ) -> AsyncIterator[tuple[InferResult | None, InferenceServerException | None]]:
        """Stream requests and their responses: ``inputs_iterator`` yields requests as dicts
        of :meth:`kserve_v2.compat.grpc.InferenceServerClient.async_stream_infer`'s arguments
        (``model_name``, ``inputs``, ``outputs``, ``request_id``, ``sequence_id``, ...); the
        result yields ``(result, None)`` or ``(None, error)`` for each response, in arrival
        order, until the requests are exhausted and answered.
        """
        return self._stream(inputs_iterator, stream_timeout, headers, compression_algorithm)

    async def _stream(
        self,
        requests: AsyncIterable[Mapping[str, Any]],
        stream_timeout: float | None,
        headers: Mapping[str, str] | None,
        compression_algorithm: str | None,
    ) -> AsyncIterator[tuple[InferResult | None, InferenceServerException | None]]:
        options = stream_options(self._headers(headers), stream_timeout, compression_algorithm)
        grpc_error = options["triton_grpc_error"]
        with translated("grpc"):
            stream = self._client.stream(**options)
        state = _StreamState()
        sender = asyncio.ensure_future(self._send_all(stream, requests, state))
        try:
            async with stream:
                while True:
                    snapshot = state.sent
                    try:
                        async for native in stream.responses(until_closed=False):
                            item = state.requests.shown(native)
                            if item is not None:
                                yield item, None
                    except KServeError as exc:
                        yield None, translate(exc, "grpc")
                        if stream_ends(exc, grpc_error):
                            return
                        continue
                    if sender.done():
                        sender.result()  # a failure of the request iterator is raised here
                        if state.sent == snapshot:
                            return
                        continue
                    if state.sent == snapshot:
                        state.more.clear()
                        await state.more.wait()
        finally:
            if not sender.done():
                sender.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await sender

    async def _send_all(
        self, stream: Any, requests: AsyncIterable[Mapping[str, Any]], state: _StreamState
    ) -> None:
        try:
            async for request in requests:
                unknown = set(request) - _STREAM_REQUEST_KEYS
                if unknown:
                    raise InferenceServerException(
                        msg=f"unknown stream request keys: {sorted(unknown)}"
                    )
                kwargs = self._infer_arguments(request)
                request_id = state.requests.add(
                    kwargs.pop("request_id"),
                    bool(request.get("enable_empty_final_response", False)),
                )
                with translated("grpc"):
                    await stream.send(request["model_name"], request_id=request_id, **kwargs)
                state.sent += 1
                state.more.set()
        finally:
            state.more.set()


class _StreamState:
    """What ``stream_infer``'s sender and consumer share."""

    def __init__(self) -> None:
        self.sent = 0
        self.more = asyncio.Event()
        self.requests = StreamRequests()


#: The keys a ``stream_infer`` request may have.
_STREAM_REQUEST_KEYS = frozenset(
    {
        "model_name",
        "inputs",
        "model_version",
        "outputs",
        "request_id",
        "sequence_id",
        "sequence_start",
        "sequence_end",
        "enable_empty_final_response",
        "priority",
        "timeout",
        "parameters",
    }
)
