"""The load of one process: asyncio tasks sending requests with :class:`~kserve_v2.AsyncClient`,
recording each request's latency and its client-side send and receive times.

In concurrency mode ``n`` slots each keep one request in flight (a sequence model's slot runs
its sequences one request after the other; a streaming slot keeps one gRPC stream). In
request-rate mode a scheduler starts requests at a constant rate or with Poisson arrivals
(exponential gaps), each in a task of its own, whatever the number in flight.

Client send and receive times come from the client's wire hook, which is called right before
a request goes out (after it is built and encoded) and right after its response arrived
(before it is decoded): send = start .. hook(send), receive = hook(receive) .. end. The hook
knows whose request it sees through a context variable each request task sets.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import itertools
import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kserve_v2.cli.perf.histogram import LatencyHistogram

if TYPE_CHECKING:
    from kserve_v2 import AsyncClient, InferInput, RequestedOutput
    from kserve_v2.hooks import WireMessage
    from kserve_v2.shm import SystemSharedMemoryRegion

__all__ = ["LoadConfig", "LoadGenerator", "Step", "WindowStats"]

# The timestamps (perf_counter_ns) of the request the current task is sending.
_CURRENT: contextvars.ContextVar[list[int] | None] = contextvars.ContextVar(
    "kserve_v2_perf_request", default=None
)
# Regions for outputs in rate mode (requests in flight at once that can have their own).
_RATE_MODE_OUTPUT_REGIONS = 64


def _wire_hook(message: WireMessage) -> None:
    stamps = _CURRENT.get()
    if stamps is not None:
        stamps.append(time.perf_counter_ns())


@dataclass
class LoadConfig:
    """Everything a process needs to generate the load (picklable: sent to worker processes)."""

    url: str
    model: str
    version: str
    inputs: list[tuple[str, str, Any]]  # (name, datatype, array)
    outputs: list[tuple[str, int]]  # (name, class_count); empty: all
    client_kwargs: dict[str, Any]
    binary: bool = True
    parameters: dict[str, Any] = field(default_factory=dict)
    shared_memory: str = "none"
    output_shm_size: int = 0
    streaming: bool = False
    sequence_length: int = 0
    sequence_id_start: int = 1
    sequence_id_end: int = 0
    num_sequences: int = 4
    worker_index: int = 0
    workers: int = 1
    max_inflight: int = 1024
    timeout: float | None = 30.0


@dataclass
class Step:
    """One point of the sweep: ``concurrency`` slots, or ``rate`` requests/s."""

    concurrency: int = 0
    rate: float = 0.0
    distribution: str = "constant"
    seed: int = 0


@dataclass
class WindowStats:
    """What one process saw in one measurement window (or since the step began)."""

    histogram: LatencyHistogram = field(default_factory=LatencyHistogram)
    completed: int = 0
    errors: int = 0
    responses: int = 0
    send_ns: int = 0
    recv_ns: int = 0
    timed: int = 0  # requests whose send and receive times are known
    late: int = 0  # rate mode: requests started more than 1 ms after their time
    first_error: str = ""
    # Totals of the process since setup (every request, warm-up and probe included).
    sent_total: int = 0
    completed_total: int = 0
    errors_total: int = 0

    def merge(self, other: WindowStats) -> WindowStats:
        self.histogram.merge(other.histogram)
        self.completed += other.completed
        self.errors += other.errors
        self.responses += other.responses
        self.send_ns += other.send_ns
        self.recv_ns += other.recv_ns
        self.timed += other.timed
        self.late += other.late
        self.first_error = self.first_error or other.first_error
        self.sent_total += other.sent_total
        self.completed_total += other.completed_total
        self.errors_total += other.errors_total
        return self


class _Sequence:
    """A sequence of ``length`` requests under one correlation id, sent in order."""

    def __init__(self, ids: Callable[[], int], length: int) -> None:
        self._ids = ids
        self.length = length
        self.lock = asyncio.Lock()
        self.id = ids()
        self.position = 0

    def flags(self) -> dict[str, Any]:
        """The sequence arguments of the next request (and move on)."""
        flags = {
            "sequence_id": self.id,
            "sequence_start": self.position == 0,
            "sequence_end": self.position == self.length - 1,
        }
        self.position += 1
        if self.position == self.length:
            self.position = 0
            self.id = self._ids()
        return flags


class LoadGenerator:
    """The requests of one process; :meth:`start` a step, :meth:`snapshot` its windows."""

    def __init__(self, config: LoadConfig) -> None:
        self.config = config
        self._client: AsyncClient | None = None
        self._window = WindowStats()
        self._tasks: list[asyncio.Task[None]] = []
        self._inflight: set[asyncio.Task[None]] = set()
        self._running = False
        self._sent = 0
        self._completed = 0
        self._errors = 0
        self._inputs: list[InferInput] = []
        self._outputs: list[RequestedOutput] | None = None
        self._regions: list[SystemSharedMemoryRegion] = []
        self._output_regions: asyncio.Queue[SystemSharedMemoryRegion] | None = None
        self._output_sizes: list[int] = []
        self._slot_regions: dict[int, SystemSharedMemoryRegion] = {}
        self._next_region = itertools.count()
        self._seq_counter = itertools.count()
        self._tag = f"kv2perf_{os.getpid()}_{config.worker_index}"

    # -- setup ----------------------------------------------------------------------------------

    async def setup(self) -> None:
        from kserve_v2 import AsyncClient, InferInput, RequestedOutput

        cfg = self.config
        self._client = AsyncClient(
            cfg.url,
            wire_hook=None if cfg.streaming else _wire_hook,
            pool_size=max(16, min(cfg.max_inflight, 256)),
            **cfg.client_kwargs,
        )
        self._inputs = [InferInput(n, a, datatype=d) for n, d, a in cfg.inputs]
        if cfg.outputs:
            self._outputs = [RequestedOutput(n, class_count=c) for n, c in cfg.outputs]
        if cfg.shared_memory == "system":
            await self._setup_shm()

    async def _setup_shm(self) -> None:
        """One input region (read-only, shared by every request) and output regions sized by
        a probe request sent the usual way."""
        from kserve_v2 import InferInput
        from kserve_v2.shm import SystemSharedMemoryRegion

        assert self._client is not None
        cfg = self.config
        probe_kwargs: dict[str, Any] = {}
        if cfg.sequence_length:
            probe_kwargs = {
                "sequence_id": self._next_sequence_id(),
                "sequence_start": True,
                "sequence_end": True,
            }
        self._sent += 1
        try:
            probe = await self._client.infer(
                cfg.model,
                self._inputs,
                outputs=self._outputs,
                version=cfg.version,
                parameters=cfg.parameters or None,
                **probe_kwargs,
            )
        except BaseException:
            self._errors += 1
            raise
        self._completed += 1
        sizes = []
        for output in probe.outputs:
            if output.data is None:
                sizes.append(cfg.output_shm_size or 1 << 20)
            elif output.datatype == "BYTES":
                sizes.append(cfg.output_shm_size or max(4096, 4 * output.data.size * 64))
            else:
                sizes.append(cfg.output_shm_size or max(int(output.data.nbytes), 1))
        self._output_sizes = sizes
        self._output_names = [t.name for t in probe.outputs]
        wire = [memoryview(t.wire_bytes()).nbytes for t in self._inputs]
        region = SystemSharedMemoryRegion.create(
            f"{self._tag}_in", max(sum(wire) + 64 * len(wire), 64)
        )
        self._regions.append(region)
        placed, offset = [], 0
        for tensor, nbytes in zip(self._inputs, wire, strict=True):
            region.write(tensor.wire_bytes(), offset)
            placed.append(
                InferInput(
                    tensor.name,
                    datatype=tensor.datatype,
                    shape=tensor.shape,
                    shared_memory=region.placement(nbytes, offset),
                )
            )
            offset += (nbytes + 63) // 64 * 64
        await self._client.register_region(region)
        self._inputs = placed

    async def _output_region(self) -> SystemSharedMemoryRegion:
        from kserve_v2.shm import SystemSharedMemoryRegion

        assert self._client is not None
        size = sum((n + 63) // 64 * 64 for n in self._output_sizes)
        region = SystemSharedMemoryRegion.create(f"{self._tag}_out{next(self._next_region)}", size)
        self._regions.append(region)
        await self._client.register_region(region)
        return region

    def _shm_outputs(self, region: SystemSharedMemoryRegion) -> list[RequestedOutput]:
        from kserve_v2 import RequestedOutput

        classes = dict(self.config.outputs)
        outputs, offset = [], 0
        for name, size in zip(self._output_names, self._output_sizes, strict=True):
            outputs.append(
                RequestedOutput(
                    name,
                    class_count=classes.get(name, 0),
                    shared_memory=region.placement(size, offset),
                )
            )
            offset += (size + 63) // 64 * 64
        return outputs

    async def close(self) -> None:
        if self._client is None:
            return
        try:
            for region in self._regions:
                # Best effort at the end: the server may be gone.
                with contextlib.suppress(Exception):
                    await self._client.unregister_region(region)
        finally:
            for region in self._regions:
                region.close()
            self._regions.clear()
            await self._client.aclose()
            self._client = None

    # -- requests -------------------------------------------------------------------------------

    def _next_sequence_id(self) -> int:
        cfg = self.config
        n = next(self._seq_counter) * cfg.workers + cfg.worker_index
        if cfg.sequence_id_end > cfg.sequence_id_start:
            n %= cfg.sequence_id_end - cfg.sequence_id_start + 1
        return cfg.sequence_id_start + n

    def _record(self, started: int, stamps: list[int], responses: int = 1) -> None:
        end = time.perf_counter_ns()
        window = self._window
        window.histogram.record(end - started)
        window.completed += 1
        window.responses += responses
        if len(stamps) >= 2:
            window.send_ns += stamps[0] - started
            window.recv_ns += end - stamps[-1]
            window.timed += 1
        self._completed += 1

    def _failed(self, exc: BaseException) -> None:
        self._window.errors += 1
        self._errors += 1
        if not self._window.first_error:
            self._window.first_error = f"{type(exc).__name__}: {exc}"

    async def _one(
        self,
        seq_flags: dict[str, Any],
        outputs: list[RequestedOutput] | None,
        stamps: list[int],
    ) -> None:
        """One request (unary), recorded."""
        from kserve_v2.errors import KServeError

        assert self._client is not None
        cfg = self.config
        stamps.clear()
        self._sent += 1
        started = time.perf_counter_ns()
        try:
            await self._client.infer(
                cfg.model,
                self._inputs,
                outputs=outputs,
                version=cfg.version,
                parameters=cfg.parameters or None,
                binary=cfg.binary,
                **seq_flags,
            )
        except KServeError as exc:
            self._failed(exc)
            return
        self._record(started, stamps)

    async def _one_streamed(self, stream: Any, seq_flags: dict[str, Any]) -> None:
        """One request on a gRPC stream: latency until its final response."""
        from kserve_v2.errors import KServeError

        cfg = self.config
        self._sent += 1
        started = time.perf_counter_ns()
        responses = 0
        try:
            request = await stream.send(
                cfg.model,
                self._inputs,
                outputs=self._outputs,
                version=cfg.version,
                parameters=cfg.parameters or None,
                **seq_flags,
            )
            async for _ in request:
                responses += 1
        except KServeError as exc:
            self._failed(exc)
            return
        self._record(started, [], responses)

    async def _slot(self, index: int) -> None:
        """Concurrency mode: one request after another while the step runs."""
        assert self._client is not None
        cfg = self.config
        stamps: list[int] = []
        _CURRENT.set(stamps)
        sequence = (
            _Sequence(self._next_sequence_id, cfg.sequence_length) if cfg.sequence_length else None
        )
        outputs = self._outputs
        if cfg.shared_memory == "system":
            region = self._slot_regions.get(index)
            if region is None:
                region = self._slot_regions[index] = await self._output_region()
            outputs = self._shm_outputs(region)
        if cfg.streaming:
            async with self._client.stream() as stream:
                while self._running:
                    await self._one_streamed(stream, sequence.flags() if sequence else {})
            return
        while self._running:
            await self._one(sequence.flags() if sequence else {}, outputs, stamps)

    async def _rate_request(self, stream: Any, sequence: _Sequence | None, scheduled: int) -> None:
        stamps: list[int] = []
        _CURRENT.set(stamps)
        if time.perf_counter_ns() - scheduled > 1_000_000:
            self._window.late += 1
        region = None
        outputs = self._outputs
        try:
            if self._output_regions is not None:
                region = await self._output_regions.get()
                outputs = self._shm_outputs(region)
            if sequence is not None:
                async with sequence.lock:
                    flags = sequence.flags()
                    if stream is not None:
                        await self._one_streamed(stream, flags)
                    else:
                        await self._one(flags, outputs, stamps)
            elif stream is not None:
                await self._one_streamed(stream, {})
            else:
                await self._one({}, outputs, stamps)
        finally:
            if region is not None and self._output_regions is not None:
                self._output_regions.put_nowait(region)

    async def _scheduler(self, step: Step) -> None:
        """Request-rate mode: start requests at their times (constant or Poisson gaps)."""
        assert self._client is not None
        cfg = self.config
        rate = step.rate / cfg.workers
        rng = random.Random(step.seed * 1000 + cfg.worker_index)
        sequences = (
            [
                _Sequence(self._next_sequence_id, cfg.sequence_length)
                for _ in range(max(1, cfg.num_sequences))
            ]
            if cfg.sequence_length
            else []
        )
        if cfg.shared_memory == "system" and self._output_regions is None:
            self._output_regions = asyncio.Queue()
            for _ in range(_RATE_MODE_OUTPUT_REGIONS):
                self._output_regions.put_nowait(await self._output_region())
        stream_cm = self._client.stream() if cfg.streaming else None
        stream = await stream_cm.__aenter__() if stream_cm is not None else None
        try:
            next_at = time.perf_counter_ns()
            count = 0
            while self._running:
                gap = rng.expovariate(rate) if step.distribution == "poisson" else 1.0 / rate
                next_at += int(gap * 1e9)
                delay = (next_at - time.perf_counter_ns()) / 1e9
                if delay > 0:
                    await asyncio.sleep(delay)
                if self._stopped():  # stop() came during the sleep
                    break
                while len(self._inflight) >= cfg.max_inflight:
                    await asyncio.wait(self._inflight, return_when=asyncio.FIRST_COMPLETED)
                sequence = sequences[count % len(sequences)] if sequences else None
                count += 1
                task = asyncio.get_running_loop().create_task(
                    self._rate_request(stream, sequence, next_at)
                )
                self._inflight.add(task)
                task.add_done_callback(self._inflight.discard)
            if self._inflight:
                await asyncio.gather(*self._inflight, return_exceptions=True)
        finally:
            if stream_cm is not None:
                await stream_cm.__aexit__(None, None, None)

    # -- control --------------------------------------------------------------------------------

    def start(self, step: Step) -> None:
        """Start the load of ``step`` (in the running loop)."""
        loop = asyncio.get_running_loop()
        self._running = True
        self._window = WindowStats()
        if step.rate:
            self._tasks = [loop.create_task(self._scheduler(step))]
            return
        cfg = self.config
        # This process's share of the concurrency (the first processes take the remainder).
        share = step.concurrency // cfg.workers + (
            1 if cfg.worker_index < step.concurrency % cfg.workers else 0
        )
        self._tasks = [loop.create_task(self._slot(i)) for i in range(share)]

    def _stopped(self) -> bool:
        return not self._running

    def completed_in_window(self) -> int:
        return self._window.completed + self._window.errors

    def snapshot(self) -> WindowStats:
        """The window so far, and a new window from now."""
        window, self._window = self._window, WindowStats()
        window.sent_total = self._sent
        window.completed_total = self._completed
        window.errors_total = self._errors
        return window

    async def stop(self) -> WindowStats:
        """Stop the step: wait for every request in flight; the requests since the last
        snapshot (with the totals)."""
        self._running = False
        if self._tasks:
            results = await asyncio.gather(*self._tasks, return_exceptions=True)
            self._tasks = []
            for result in results:
                if isinstance(result, BaseException) and not isinstance(
                    result, asyncio.CancelledError
                ):
                    self._failed(result)
        return self.snapshot()
