"""The asyncio client, :class:`AsyncClient`, and :class:`AsyncGenerateStream`, what its
``generate_stream`` returns.

:mod:`kserve_v2.client.sync` is generated from this module by ``scripts/unasync.py``: edit
this one, then run the script.
"""

from __future__ import annotations

import math
import time
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from kserve_v2.arguments import (
    Headers,
    InputsArg,
    OutputsArg,
    build_infer_request,
)
from kserve_v2.backend import Call
from kserve_v2.client.base import ClientBase
from kserve_v2.client.extensions import region_call
from kserve_v2.concurrency import AsyncSemaphore, async_sleep
from kserve_v2.errors import DeadlineExceededError, InvalidInputError, KServeError, TransportError
from kserve_v2.hooks import WireHook
from kserve_v2.interfaces import AsyncChannel, AsyncTransport
from kserve_v2.messages import InferResult, ModelMetadata, RepositoryModel, ServerMetadata
from kserve_v2.metrics import MetricFamily
from kserve_v2.options import DEFAULT_CONNECT_TIMEOUT, DEFAULT_TIMEOUT, GRPCOptions, TLSOptions
from kserve_v2.parameters import ParameterValue
from kserve_v2.rest.backend import HTTPBackend, metrics_call
from kserve_v2.rest.paths import QueryParams

if TYPE_CHECKING:
    from kserve_v2.grpc.stream import AsyncGRPCStream
    from kserve_v2.options import GRPCKeepAlive
    from kserve_v2.retry import RetryPolicy
    from kserve_v2.shm import CudaSharedMemoryRegion, SystemSharedMemoryRegion

__all__ = ["AsyncClient", "AsyncGenerateStream"]

T = TypeVar("T")


class AsyncClient(ClientBase):
    """An asyncio client for one inference server.

    The URL chooses the protocol: ``http://host:8000`` (or a bare ``host:8000``),
    ``https://...``, optionally with a base path for servers behind a gateway
    (``http://gw/serving/ns/model``). One client serves any number of concurrent tasks on
    its event loop; ``max_concurrency`` caps how many requests are in flight at once.

    Example::

        import numpy as np
        from kserve_v2 import AsyncClient

        async with AsyncClient("http://localhost:8000") as client:
            result = await client.infer("simple", {
                "INPUT0": np.arange(16, dtype=np.int32).reshape(1, 16),
                "INPUT1": np.ones((1, 16), dtype=np.int32),
            })
            print(result.as_numpy("OUTPUT0"))

    Args:
        url: the server URL.
        headers: headers sent with every request (e.g. ``Authorization``).
        timeout: default whole-request timeout in seconds (``None``: wait forever).
        connect_timeout: TCP/TLS connect timeout in seconds.
        binary: HTTP: tensors in binary form (Triton's binary-data extension, ``True``) or
            as JSON (``False``), unless a call or tensor says otherwise. ``None`` (default):
            binary if the server lists ``binary_tensor_data`` in its metadata (Triton does),
            JSON otherwise (the open protocol alone); the first ``infer`` asks the metadata,
            once per client (JSON for that call if the server cannot be asked).
        request_compression: ``"gzip"`` or ``"deflate"`` to compress request bodies.
        accept_compression: ``"gzip"`` or ``"deflate"`` to ask for compressed responses.
        tls: certificates for ``https://`` (see :class:`TLSOptions`).
        pool_size: most connections kept open to the server (and most requests in flight).
        transport: a ready transport (e.g. ``AsyncHTTPXTransport(...)``) instead of the
            default. Requests go to ``url`` (this package's transports made for another
            server, or without a URL, get absolute request targets naming it).
        wire_hook: called with a :class:`WireMessage` for every message sent and received.
        verbose: print every message to stderr (credentials redacted).
        max_concurrency: most requests in flight at once; the others wait their turn. The
            wait is not part of a request's ``timeout`` but is bounded by it: a request that
            found no free slot within its timeout fails with
            :class:`~kserve_v2.DeadlineExceededError`. A ``generate_stream`` holds its slot
            until it ends (or is closed); gRPC streams (:meth:`stream`) take none.
        grpc: gRPC only: the gRPC settings (:class:`~kserve_v2.GRPCOptions`): transport, grpcio
            channel arguments, credentials, keepalive; or give them as the four keywords below.
        grpc_options: gRPC only: further grpcio channel arguments, added to the defaults
            (unlimited message sizes), e.g. ``{"grpc.max_receive_message_length": 2**28}``.
        grpc_credentials: gRPC only: a ready ``grpc.ChannelCredentials`` for ``grpcs://``
            (instead of the files of ``tls``).
        grpc_keepalive: gRPC only: keepalive pings (:class:`~kserve_v2.grpc.GRPCKeepAlive`).
        grpc_transport: gRPC only: ``"native"`` (default), the library's own HTTP/2 client,
            which needs no grpcio and costs far less CPU per call; or ``"grpcio"``, which is
            needed for ``grpc_credentials``, ``grpc_keepalive`` and grpcio channel arguments
            beyond the message size limits.
        max_response_size: largest response accepted, in bytes (``None``: no limit): over
            HTTP the body as received and after decompression (refused before it is
            allocated when its ``Content-Length`` says so; compressed bodies are never
            inflated past it), over gRPC each message received. Beyond it: over HTTP a
            :class:`~kserve_v2.ProtocolError`, over gRPC a :class:`~kserve_v2.ServerError`
            with ``grpc_code == "RESOURCE_EXHAUSTED"`` (as gRPC reports it). Set it when the
            server is not trusted; streamed HTTP bodies (``generate_stream``) are not limited.
            With ``transport=``, give the limit to that transport instead.
        retry: retry failed calls (:class:`~kserve_v2.RetryPolicy`): idempotent ones
            (health, metadata, configuration, statistics, index, settings, metrics) after a
            transport failure or an answer such as 503, ``infer`` only as the policy's
            ``infer`` (or the call's ``retry``) says, other writes and streams never. The
            call's ``timeout`` bounds all its tries together. ``None`` (default): no retries.

    Every method that makes a request takes the per-call keywords ``headers``, ``timeout`` and
    ``query``: extra URL query parameters, a mapping or a sequence of ``(name, value)`` pairs
    (booleans written ``true``/``false``), for a gateway that routes or authenticates by them,
    e.g. ``client.model_config("simple", query={"api-version": "2"})``. Over gRPC, which has
    no URL, a ``query`` raises :class:`~kserve_v2.InvalidInputError` (``metrics()`` excepted:
    it is fetched over HTTP whatever the client's protocol).

    Over gRPC (``grpc://host:8001``, ``grpcs://...``) one HTTP/2 channel carries every call:
    ``pool_size`` and ``binary`` do not apply, ``connect_timeout`` is bounded by each call's
    deadline (``timeout``), ``request_compression`` compresses request messages, and
    responses are compressed as the server decides (``accept_compression`` is not needed).
    The channel opens on first use, inside the running event loop, and belongs to that loop.
    :meth:`stream` opens bidirectional streams (decoupled models, sequences).
    """

    def __init__(
        self,
        url: str,
        *,
        headers: Headers | None = None,
        timeout: float | None = DEFAULT_TIMEOUT,
        connect_timeout: float | None = DEFAULT_CONNECT_TIMEOUT,
        binary: bool | None = None,
        request_compression: str | None = None,
        accept_compression: str | None = None,
        tls: TLSOptions | None = None,
        pool_size: int = 16,
        transport: AsyncTransport | None = None,
        wire_hook: WireHook | None = None,
        verbose: bool = False,
        max_concurrency: int | None = None,
        grpc: GRPCOptions | None = None,
        grpc_options: Mapping[str, Any] | None = None,
        grpc_credentials: Any = None,
        grpc_keepalive: GRPCKeepAlive | None = None,
        grpc_transport: str = "native",
        max_response_size: int | None = None,
        retry: RetryPolicy | None = None,
    ) -> None:
        super().__init__(
            url,
            headers=headers,
            timeout=timeout,
            connect_timeout=connect_timeout,
            binary=binary,
            request_compression=request_compression,
            accept_compression=accept_compression,
            tls=tls,
            wire_hook=wire_hook,
            verbose=verbose,
            grpc=grpc,
            grpc_options=grpc_options,
            grpc_credentials=grpc_credentials,
            grpc_keepalive=grpc_keepalive,
            grpc_transport=grpc_transport,
            max_response_size=max_response_size,
            retry=retry,
        )
        if transport is not None:
            self._check_foreign_transport(transport)
        self._io: AsyncTransport | AsyncChannel = (
            transport if transport is not None else self._default_io(pool_size)
        )
        self._owns_io = transport is None
        if max_concurrency is not None and (
            isinstance(max_concurrency, bool)
            or not isinstance(max_concurrency, int)
            or max_concurrency < 1
        ):
            raise InvalidInputError(
                "max_concurrency must be a positive integer", value=max_concurrency
            )
        # Requests past the limit wait here, before taking a connection or any memory.
        self._limit = AsyncSemaphore(max_concurrency) if max_concurrency else None
        self._max_concurrency = max_concurrency

    def _default_io(self, pool_size: int) -> AsyncTransport | AsyncChannel:
        if self.protocol == "grpc":
            if self.grpc_transport == "native":
                from kserve_v2.transport.native import AsyncNativeGRPCChannel

                return AsyncNativeGRPCChannel(
                    self._grpc_config, connect_timeout=self.connect_timeout
                )
            from kserve_v2.transport.grpcio import AsyncGRPCChannel

            return AsyncGRPCChannel(self._grpc_config)
        from kserve_v2.transport.aio import AsyncHTTPTransport

        return AsyncHTTPTransport(**self._transport_kwargs(pool_size))

    async def _run(self, call: Call[T, Any, Any], retry: str = "never") -> T:
        """Run ``call``; ``retry`` (a :data:`~kserve_v2.retry.INFER_RETRY_MODES` mode) says
        whether a failure may be tried again."""
        # Any I/O type: self._io is of the protocol self._proto builds calls for (see
        # ClientBase), a pairing made at run time that the type system cannot follow.
        if self._closed:  # also when the transport was passed in and is still open
            raise TransportError("the client is closed", url=self.url)
        if retry != "never":
            return await self._retrying(call, retry)
        if self._limit is None:
            return await call.arun(self._io, self._hook)
        await self._take_slot(call.timeout)
        try:
            return await call.arun(self._io, self._hook)
        finally:
            self._limit.release()

    async def _take_slot(self, timeout: float | None) -> None:
        """Wait for one of the ``max_concurrency`` slots, at most the call's timeout."""
        assert self._limit is not None
        wait = self.timeout if timeout is None else timeout
        if not await self._limit.acquire_within(None if wait == math.inf else wait):
            raise DeadlineExceededError(
                f"no free slot within {wait:g} s: max_concurrency={self._max_concurrency} "
                "requests hold them all (a generate_stream not closed?)",
                url=self.url,
            )

    async def _read(self, call: Call[T, Any, Any]) -> T:
        """Run an idempotent call: retried when the client has a retry policy."""
        return await self._run(call, self._read_retry)

    async def _retrying(self, call: Call[T, Any, Any], mode: str) -> T:
        """Run ``call`` until it succeeds, the policy (the default one for an ``infer(...,
        retry=...)`` on a client without one) gives up on its failure in ``mode``, or the
        call's timeout, which every try shares, runs out."""
        # Imported here, as in ClientBase: only clients that retry load it.
        from kserve_v2.retry import DEFAULT_RETRY_POLICY

        policy = self.retry or DEFAULT_RETRY_POLICY
        budget = call.timeout if call.timeout is not None else self.timeout
        deadline = None if budget is None or budget == math.inf else time.monotonic() + budget
        tries = 0
        while True:
            if self._closed:  # closed during the backoff
                raise TransportError("the client is closed", url=self.url)
            try:
                if self._limit is None:
                    return await call.arun(self._io, self._hook)
                await self._take_slot(call.timeout)  # not held while sleeping
                try:
                    return await call.arun(self._io, self._hook)
                finally:
                    self._limit.release()
            except KServeError as exc:
                tries += 1
                if tries >= policy.attempts or not policy.retries(exc, mode):
                    raise
                delay = policy.delay(tries, exc)
                # A wait the policy refuses (the server asked for too long), or one that
                # would end past the call's timeout: its last error, now.
                if delay is None or (deadline is not None and time.monotonic() + delay >= deadline):
                    raise
                error = exc
            await async_sleep(delay)
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise error
                call = call.with_timeout(left)

    # -- lifecycle ---------------------------------------------------------------------------

    async def aclose(self) -> None:
        """Close the connections this client opened (a transport passed in stays open)."""
        if not self._closed:
            self._closed = True
            for stream in list(self._streams):
                await stream.cancel()
            if self._owns_io:
                await self._io.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    # -- health and metadata -----------------------------------------------------------------

    async def is_server_live(
        self,
        *,
        headers: Headers | None = None,
        query: QueryParams | None = None,
        timeout: float | None = None,
    ) -> bool:
        """Whether the server is live (``GET v2/health/live`` answers 200)."""
        return await self._read(
            self._proto.server_live(headers=headers, query=query, timeout=timeout)
        )

    async def is_server_ready(
        self,
        *,
        headers: Headers | None = None,
        query: QueryParams | None = None,
        timeout: float | None = None,
    ) -> bool:
        """Whether the server is ready for inference."""
        return await self._read(
            self._proto.server_ready(headers=headers, query=query, timeout=timeout)
        )

    async def is_model_ready(
        self,
        model: str,
        version: str | int = "",
        *,
        headers: Headers | None = None,
        query: QueryParams | None = None,
        timeout: float | None = None,
    ) -> bool:
        """Whether ``model`` (optionally a given version) is ready for inference."""
        return await self._read(
            self._proto.model_ready(model, version, headers=headers, query=query, timeout=timeout)
        )

    async def server_metadata(
        self,
        *,
        headers: Headers | None = None,
        query: QueryParams | None = None,
        timeout: float | None = None,
    ) -> ServerMetadata:
        """Server name, version and extensions."""
        return await self._read(
            self._proto.server_metadata(headers=headers, query=query, timeout=timeout)
        )

    async def model_metadata(
        self,
        model: str,
        version: str | int = "",
        *,
        headers: Headers | None = None,
        query: QueryParams | None = None,
        timeout: float | None = None,
    ) -> ModelMetadata:
        """A model's platform, versions, inputs and outputs."""
        return await self._read(
            self._proto.model_metadata(
                model, version, headers=headers, query=query, timeout=timeout
            )
        )

    async def supports_extension(
        self,
        extension: str,
        *,
        headers: Headers | None = None,
        query: QueryParams | None = None,
        timeout: float | None = None,
    ) -> bool:
        """Whether the server lists ``extension`` in its metadata (one request each call).

        Names are the server's: Triton lists ``"model_repository"``, ``"statistics"``,
        ``"trace"``, ``"logging"``, ``"system_shared_memory"``, ``"cuda_shared_memory"``,
        ``"classification"``, ``"sequence"``, ``"schedule_policy"``,
        ``"model_configuration"``, ``"binary_tensor_data"``, ``"parameters"``. A qualified
        name such as ``"model_repository(unload_dependents)"`` must be listed exactly; a bare
        name also matches the base of a qualified one. Triton does not list ``generate``
        although it serves it over HTTP.

        Example::

            if await client.supports_extension("model_repository(unload_dependents)"):
                await client.unload_model("ensemble", unload_dependents=True)
        """
        return (await self.server_metadata(headers=headers, query=query, timeout=timeout)).supports(
            extension
        )

    # -- inference ---------------------------------------------------------------------------

    async def infer(
        self,
        model: str,
        inputs: InputsArg,
        *,
        outputs: OutputsArg | None = None,
        version: str | int = "",
        request_id: str = "",
        parameters: Mapping[str, ParameterValue] | None = None,
        headers: Headers | None = None,
        query: QueryParams | None = None,
        timeout: float | None = None,
        binary: bool | None = None,
        compression: str | None = None,
        sequence_id: int | str | None = None,
        sequence_start: bool = False,
        sequence_end: bool = False,
        priority: int | None = None,
        timeout_us: int | None = None,
        allow_reserved: bool = False,
        retry: str | None = None,
    ) -> InferResult:
        """Run one inference.

        Args:
            model: model name.
            inputs: ``{"name": numpy_array_or_list}`` (datatype inferred from the dtype), or a
                sequence of :class:`InferInput`.
            outputs: output names or :class:`RequestedOutput` objects (default: all outputs).
            version: model version (default: the server's choice).
            request_id: echoed back in the result's ``id``.
            parameters: custom request parameters (reserved names need ``allow_reserved``).
            headers: extra headers for this call.
            query: extra URL query parameters for this call (HTTP; gRPC refuses them).
            timeout: whole-request timeout in seconds for this call (client-side).
            binary: override the client's binary/JSON default for this call (HTTP).
            compression: compress this request body (``"gzip"``/``"deflate"``).
            sequence_id, sequence_start, sequence_end: sequence-batching controls.
            priority: scheduling priority (schedule-policy extension).
            timeout_us: server-side queue timeout in **microseconds** (schedule policy).
            retry: how this call is retried, instead of the client's ``retry`` policy's
                ``infer`` (its other settings apply; a client without one uses
                ``RetryPolicy()``'s): ``"never"``; ``"unprocessed"``, only when the server
                certainly did not get the request (connection refused, HTTP/2
                ``REFUSED_STREAM``...), so the model never runs twice; ``"idempotent"``, also
                after failures where it may have run (connection lost, 503...).
        """
        mode = self._infer_retry if retry is None else _infer_retry_mode(retry)
        call = None
        if (  # the common call: the backend may have kept what its request looks like
            request_id == ""
            and parameters is None
            and sequence_id is None
            and sequence_start is False
            and sequence_end is False
            and priority is None
            and timeout_us is None
            and allow_reserved is False
            and binary is None
            and query is None
        ):
            call = self._proto.infer_arrays(
                model,
                inputs,
                outputs,
                version,
                headers=headers,
                timeout=timeout,
                compression=compression,
            )
        if call is None:
            request = build_infer_request(
                model,
                inputs,
                outputs=outputs,
                version=version,
                request_id=request_id,
                parameters=parameters,
                sequence_id=sequence_id,
                sequence_start=sequence_start,
                sequence_end=sequence_end,
                priority=priority,
                timeout_us=timeout_us,
                allow_reserved=allow_reserved,
            )
            call = self._proto.infer(
                request,
                binary=binary,
                headers=headers,
                query=query,
                timeout=timeout,
                compression=compression,
            )
        return await self._run(call, mode)

    # -- streaming (gRPC) --------------------------------------------------------------------

    def stream(
        self,
        *,
        headers: Headers | None = None,
        timeout: float | None = None,
        compression: str | None = None,
        enable_empty_final_response: bool = False,
        triton_grpc_error: bool = False,
    ) -> AsyncGRPCStream:
        """Open a bidirectional inference stream (``ModelStreamInfer``; gRPC only).

        Any number of streams may be open at once. Requests go out with ``send`` (the
        arguments of :meth:`infer`); responses are matched to requests by id. Decoupled
        models answer a request with any number of responses, whose ``result.final`` says
        which is the last. The call opens when the stream is entered (``async with``) or at
        its first ``send``. See :mod:`kserve_v2.grpc.stream`.

        Args:
            headers: metadata of the stream (the client's headers are sent too).
            timeout: deadline of the whole stream in seconds (default: none; closing waits
                at most the client's ``timeout`` for requests in flight).
            compression: ``"gzip"``/``"deflate"`` for this stream's requests.
            enable_empty_final_response: also yield the empty response a decoupled model's
                request ends with (``final == True``, no outputs).
            triton_grpc_error: have Triton end the stream with a gRPC error status at the
                first error (``triton_grpc_error`` header): the error is raised as
                :class:`~kserve_v2.ServerError` and the stream is over. Combined with
                ``enable_empty_final_response`` it crashes Triton 2.51 on the first error;
                without it, per-request iteration over a decoupled model may only end with
                the stream (see :mod:`kserve_v2.grpc.stream`).

        Example::

            async with client.stream() as stream:
                request = await stream.send("repeat_decoupled", {
                    "IN": np.arange(4, dtype=np.int32), "REPEAT": np.array([3], np.int32)})
                async for result in request:
                    print(result.as_numpy("IDX"), result.final)
        """
        from kserve_v2.grpc.backend import GRPCBackend
        from kserve_v2.grpc.stream import AsyncGRPCStream

        if not isinstance(self._proto, GRPCBackend):
            raise InvalidInputError("streaming inference needs a grpc:// or grpcs:// URL")
        if self._closed:
            raise TransportError("the client is closed", url=self.url)
        stream = AsyncGRPCStream(
            cast(AsyncChannel, self._io),  # a gRPC client's I/O object is its channel
            self._proto,
            self._hook,
            headers=headers,
            timeout=timeout,
            compression=compression,
            enable_empty_final_response=enable_empty_final_response,
            triton_grpc_error=triton_grpc_error,
            close_timeout=self.timeout,
            on_close=self._streams.discard,
        )
        self._streams.add(stream)
        return stream

    # -- model configuration, statistics and repository (Triton extensions) ------------------
    # Results are shaped like Triton's REST JSON on both protocols: see
    # kserve_v2/client/extensions.py.

    async def model_config(
        self,
        model: str,
        version: str | int = "",
        *,
        headers: Headers | None = None,
        query: QueryParams | None = None,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        """The model's configuration as Triton's REST JSON (model-configuration extension).

        Example::

            config = await client.model_config("simple")
            config["max_batch_size"]          # 8
            [i["name"] for i in config["input"]]
        """
        return await self._read(
            self._proto.model_config(model, version, headers=headers, query=query, timeout=timeout)
        )

    async def model_statistics(
        self,
        model: str = "",
        version: str | int = "",
        *,
        headers: Headers | None = None,
        query: QueryParams | None = None,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        """Inference statistics: of every model (no ``model``), of one model (all its
        versions), or of one version (statistics extension).

        Returns ``{"model_stats": [{"name", "version", "inference_count",
        "execution_count", "inference_stats": {"success": {"count", "ns"}, ...}, ...}]}``.

        Example::

            stats = (await client.model_statistics("simple"))["model_stats"][0]
            stats["inference_count"], stats["inference_stats"]["success"]["count"]
        """
        return await self._read(
            self._proto.model_statistics(
                model, version, headers=headers, query=query, timeout=timeout
            )
        )

    async def repository_index(
        self,
        *,
        ready_only: bool = False,
        headers: Headers | None = None,
        query: QueryParams | None = None,
        timeout: float | None = None,
    ) -> list[RepositoryModel]:
        """The models of the repository, loaded or not (``ready_only``: only those ready
        for inference) (model-repository extension).

        Example::

            {m.name: m.state for m in await client.repository_index()}   # {'simple': 'READY', ...}
        """
        return await self._read(
            self._proto.repository_index(
                ready_only=ready_only, headers=headers, query=query, timeout=timeout
            )
        )

    async def load_model(
        self,
        model: str,
        *,
        config: str | Mapping[str, Any] | None = None,
        files: Mapping[str, bytes] | None = None,
        headers: Headers | None = None,
        query: QueryParams | None = None,
        timeout: float | None = None,
    ) -> None:
        """Load or reload ``model`` (model-repository extension; the server must run with
        ``--model-control-mode=explicit``).

        Args:
            config: a model configuration (JSON text or a mapping) to use instead of the
                one in the repository.
            files: the model's files, ``{"1/model.py": b"..."}`` (paths inside the model
                directory; a ``"file:"`` prefix is accepted). The model is then loaded from
                these files alone, and ``config`` is required.

        Example::

            await client.load_model("simple", config={
                "backend": "python", "max_batch_size": 4, "input": [...], "output": [...]})
            await client.load_model(
                "uploaded", config=config_json, files={"1/model.py": Path("model.py").read_bytes()})
        """
        await self._run(
            self._proto.load_model(
                model, config=config, files=files, headers=headers, query=query, timeout=timeout
            )
        )

    async def unload_model(
        self,
        model: str,
        *,
        unload_dependents: bool = False,
        headers: Headers | None = None,
        query: QueryParams | None = None,
        timeout: float | None = None,
    ) -> None:
        """Unload ``model``; ``unload_dependents`` also unloads the models loaded with it
        (e.g. an ensemble's parts) (model-repository extension).

        Example::

            await client.unload_model("simple")
            await client.is_model_ready("simple")    # False once the unload finished
        """
        await self._run(
            self._proto.unload_model(
                model,
                unload_dependents=unload_dependents,
                headers=headers,
                query=query,
                timeout=timeout,
            )
        )

    # -- shared memory (Triton extensions) ---------------------------------------------------

    async def system_shared_memory_status(
        self,
        region: str = "",
        *,
        headers: Headers | None = None,
        query: QueryParams | None = None,
        timeout: float | None = None,
    ) -> list[dict[str, Any]]:
        """The registered system shared-memory regions (all, or the one named ``region``):
        ``[{"name", "key", "offset", "byte_size"}, ...]``.

        Example::

            [r["name"] for r in await client.system_shared_memory_status()]
        """
        return await self._read(
            self._proto.system_shared_memory_status(
                region, headers=headers, query=query, timeout=timeout
            )
        )

    async def register_system_shared_memory(
        self,
        region: str,
        key: str,
        byte_size: int,
        *,
        offset: int = 0,
        headers: Headers | None = None,
        query: QueryParams | None = None,
        timeout: float | None = None,
    ) -> None:
        """Register ``byte_size`` bytes at ``offset`` of the POSIX shared-memory object
        ``key`` under the name ``region``. :meth:`register_region` does this for a
        :class:`~kserve_v2.shm.SystemSharedMemoryRegion`.

        Triton maps the registered part with ``mmap``, so ``offset`` must be a multiple of
        the page size (4096 on most systems); tensors can still start anywhere inside a
        region (their own ``shared_memory_offset``).

        Example::

            await client.register_system_shared_memory("in0", "/my_shm_key", 1024)
        """
        await self._run(
            self._proto.register_system_shared_memory(
                region, key, byte_size, offset=offset, headers=headers, query=query, timeout=timeout
            )
        )

    async def unregister_system_shared_memory(
        self,
        region: str = "",
        *,
        headers: Headers | None = None,
        query: QueryParams | None = None,
        timeout: float | None = None,
    ) -> None:
        """Unregister the system region ``region``, or **every** system region when no name
        is given. Unregistering a name that is not registered is not an error.

        Example::

            await client.unregister_system_shared_memory("in0")
        """
        await self._run(
            self._proto.unregister_system_shared_memory(
                region, headers=headers, query=query, timeout=timeout
            )
        )

    async def cuda_shared_memory_status(
        self,
        region: str = "",
        *,
        headers: Headers | None = None,
        query: QueryParams | None = None,
        timeout: float | None = None,
    ) -> list[dict[str, Any]]:
        """The registered CUDA shared-memory regions (all, or the one named ``region``):
        ``[{"name", "device_id", "byte_size"}, ...]``.
        """
        return await self._read(
            self._proto.cuda_shared_memory_status(
                region, headers=headers, query=query, timeout=timeout
            )
        )

    async def register_cuda_shared_memory(
        self,
        region: str,
        raw_handle: bytes,
        device_id: int,
        byte_size: int,
        *,
        headers: Headers | None = None,
        query: QueryParams | None = None,
        timeout: float | None = None,
    ) -> None:
        """Register GPU memory by its 64-byte CUDA IPC handle under the name ``region``.
        :meth:`register_region` does this for a :class:`~kserve_v2.shm.CudaSharedMemoryRegion`.

        Example::

            await client.register_cuda_shared_memory("out0", region.raw_handle, 0, region.byte_size)
        """
        await self._run(
            self._proto.register_cuda_shared_memory(
                region,
                raw_handle,
                device_id,
                byte_size,
                headers=headers,
                query=query,
                timeout=timeout,
            )
        )

    async def unregister_cuda_shared_memory(
        self,
        region: str = "",
        *,
        headers: Headers | None = None,
        query: QueryParams | None = None,
        timeout: float | None = None,
    ) -> None:
        """Unregister the CUDA region ``region``, or **every** CUDA region when no name is
        given."""
        await self._run(
            self._proto.unregister_cuda_shared_memory(
                region, headers=headers, query=query, timeout=timeout
            )
        )

    async def register_region(
        self,
        region: SystemSharedMemoryRegion | CudaSharedMemoryRegion,
        *,
        headers: Headers | None = None,
        query: QueryParams | None = None,
        timeout: float | None = None,
    ) -> None:
        """Register a region object from :mod:`kserve_v2.shm` (system or CUDA) under its
        ``name``: the whole region, so placements from ``region.placement()`` fit it.
        Outputs the server writes to a region come back with ``data=None``; read them with
        :func:`kserve_v2.extensions.read_shared_memory_output` (or ``region.ndarray``).

        Example::

            with SystemSharedMemoryRegion.create("io", 1024) as region:
                await client.register_region(region)
                n = region.write(x)
                result = await client.infer("identity_fp32", [InferInput(
                    "INPUT0", datatype="FP32", shape=x.shape, shared_memory=region.placement(n))],
                    outputs=[RequestedOutput("OUTPUT0", shared_memory=region.placement(
                        n, offset=512))])
                y = read_shared_memory_output(result, "OUTPUT0", region)
                await client.unregister_region(region)
        """
        await self._run(
            region_call(
                self._proto, region, register=True, headers=headers, query=query, timeout=timeout
            )
        )

    async def unregister_region(
        self,
        region: SystemSharedMemoryRegion | CudaSharedMemoryRegion,
        *,
        headers: Headers | None = None,
        query: QueryParams | None = None,
        timeout: float | None = None,
    ) -> None:
        """Unregister a region object registered with :meth:`register_region`."""
        await self._run(
            region_call(
                self._proto, region, register=False, headers=headers, query=query, timeout=timeout
            )
        )

    # -- trace and log settings (Triton extensions) ------------------------------------------

    async def trace_settings(
        self,
        model: str = "",
        *,
        headers: Headers | None = None,
        query: QueryParams | None = None,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        """The global trace settings, or those in force for ``model`` (trace extension).

        Example::

            (await client.trace_settings())["trace_rate"]     # '1000' (Triton sends strings)
        """
        return await self._read(
            self._proto.trace_settings(model, headers=headers, query=query, timeout=timeout)
        )

    async def update_trace_settings(
        self,
        settings: Mapping[str, Any],
        model: str = "",
        *,
        headers: Headers | None = None,
        query: QueryParams | None = None,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        """Change trace settings, globally or for ``model``; returns the settings now in
        force. Integers are sent as the strings Triton expects; ``trace_level`` takes a
        string or a list; ``None`` clears a model's setting so the global one applies.

        Example::

            await client.update_trace_settings({"trace_rate": 100}, model="simple")
            await client.update_trace_settings({"trace_rate": None}, model="simple")   # reset
        """
        return await self._run(
            self._proto.update_trace_settings(
                settings, model, headers=headers, query=query, timeout=timeout
            )
        )

    async def log_settings(
        self,
        *,
        headers: Headers | None = None,
        query: QueryParams | None = None,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        """The server's log settings (logging extension).

        Example::

            (await client.log_settings())["log_verbose_level"]   # 0
        """
        return await self._read(
            self._proto.log_settings(headers=headers, query=query, timeout=timeout)
        )

    async def update_log_settings(
        self,
        settings: Mapping[str, Any],
        *,
        headers: Headers | None = None,
        query: QueryParams | None = None,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        """Change log settings; returns the settings now in force.

        Example::

            await client.update_log_settings({"log_verbose_level": 1, "log_info": True})
        """
        return await self._run(
            self._proto.update_log_settings(settings, headers=headers, query=query, timeout=timeout)
        )

    # -- generate and metrics (HTTP only) ----------------------------------------------------

    def _http_only(self, feature: str) -> HTTPBackend:
        if not isinstance(self._proto, HTTPBackend):
            raise InvalidInputError(f"{feature} is an HTTP-only extension")
        return self._proto

    async def generate(
        self,
        model: str,
        payload: Mapping[str, Any],
        version: str | int = "",
        *,
        headers: Headers | None = None,
        query: QueryParams | None = None,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        """One answer of the generate extension (``POST .../generate``; HTTP only).

        ``payload`` is the request JSON object: ``text_input``, optional ``id`` and
        ``parameters``, and any other field the model takes as an input or parameter.
        An error the server reports (even with status 200) raises
        :class:`~kserve_v2.errors.ServerError`.

        Example::

            answer = await client.generate("llm", {"text_input": "Hello", "max_tokens": 16})
            print(answer["text_output"])
        """
        proto = self._http_only("generate")
        return await self._run(
            proto.generate(model, payload, version, headers=headers, query=query, timeout=timeout)
        )

    def generate_stream(
        self,
        model: str,
        payload: Mapping[str, Any],
        version: str | int = "",
        *,
        headers: Headers | None = None,
        query: QueryParams | None = None,
        timeout: float | None = None,
    ) -> AsyncGenerateStream:
        """Stream the answers of the generate extension (``POST .../generate_stream``,
        Server-Sent Events; HTTP only), one dict per event, as they arrive.

        It returns the stream at once; the request is sent when iteration starts.
        ``timeout`` bounds the wait for the response head and then for each next event
        (bytes that complete no event, such as comments, do not extend it; the time your
        loop spends between events does not count), not the whole stream. An error event raises
        :class:`~kserve_v2.errors.ServerError`. Stopping early (``break`` inside
        ``async with``, ``aclose()``) closes the connection. With ``max_concurrency`` the
        stream holds one slot until it ends.

        Example::

            async with client.generate_stream("llm", {"text_input": "Hello"}) as stream:
                async for event in stream:
                    print(event["text_output"], end="", flush=True)
        """
        if self._closed:
            raise TransportError("the client is closed", url=self.url)
        proto = self._http_only("generate_stream")
        call = proto.generate_stream(
            model, payload, version, headers=headers, query=query, timeout=timeout
        )
        # an HTTP client's I/O object is its transport
        events = call.astream(cast(AsyncTransport, self._io), self._hook)
        if self._limit is None:
            return AsyncGenerateStream(events)
        return AsyncGenerateStream(self._limited(events, self._limit, timeout))

    async def _limited(
        self, events: AsyncGenerator[T, None], limit: AsyncSemaphore, timeout: float | None
    ) -> AsyncGenerator[T, None]:
        # The slot is taken when iteration starts and given back when the stream ends or is
        # closed; the inner generator is closed explicitly, not left to the garbage collector.
        try:
            await self._take_slot(timeout)
        except DeadlineExceededError:
            await events.aclose()
            raise
        try:
            async for event in events:
                yield event
        finally:
            try:
                await events.aclose()
            finally:
                limit.release()

    async def metrics(
        self,
        url: str | None = None,
        *,
        headers: Headers | None = None,
        query: QueryParams | None = None,
        timeout: float | None = None,
    ) -> dict[str, MetricFamily]:
        """The server's Prometheus metrics, parsed (see :mod:`kserve_v2.metrics`).

        ``url`` defaults to ``http://<server host>:8002/metrics`` (Triton's default metrics
        port); pass it when the server uses another port or a gateway serves the metrics
        (``"host:port"`` and ``"http://host:port/path"`` both work). Only ``headers`` given
        here are sent: the client's default headers are meant for the inference endpoint.

        Example::

            families = await client.metrics("http://localhost:8002/metrics")
            families["nv_inference_count"].value(model="simple", version="1")
        """
        call = metrics_call(self.endpoint, url, headers=headers, query=query, timeout=timeout)
        if self.protocol == "http":
            return await self._read(call)
        if self._closed:
            raise TransportError("the client is closed", url=self.url)
        # A gRPC client has no HTTP connection to reuse: fetch over a one-off transport.
        from kserve_v2.transport.aio import AsyncHTTPTransport

        async with AsyncHTTPTransport(**{**self._transport_kwargs(1), "url": None}) as transport:
            return await call.arun(transport, self._hook)


def _infer_retry_mode(mode: object) -> str:
    from kserve_v2.retry import check_infer_retry  # only for calls that give one

    return check_infer_retry(mode)


class AsyncGenerateStream(AsyncIterator[dict[str, Any]]):
    """The responses of ``AsyncClient.generate_stream``, one dict per server-sent event.

    The request is sent when iteration starts. An error the server reports mid-stream raises
    :class:`~kserve_v2.errors.ServerError`. Stopping early is fine: leaving the ``async with``
    block, calling :meth:`aclose`, or dropping the iterator closes the connection (it is not
    reused, since the rest of the stream was not read).

    Example::

        async with client.generate_stream("llm", {"text_input": "Hi", "max_tokens": 8}) as stream:
            async for response in stream:
                print(response["text_output"], end="")
    """

    __slots__ = ("_events",)

    def __init__(self, events: AsyncGenerator[dict[str, Any], None]) -> None:
        self._events = events

    def __aiter__(self) -> AsyncGenerateStream:
        return self

    async def __anext__(self) -> dict[str, Any]:
        return await self._events.__anext__()

    async def aclose(self) -> None:
        """Stop reading and close the connection (no-op when the stream has ended)."""
        await self._events.aclose()

    async def __aenter__(self) -> AsyncGenerateStream:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()
