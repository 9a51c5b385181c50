"""One benchmark run of one client, in a process of its own (started by ``run.py``).

    python benchmarks/workers.py '{"scenario": "http-small", "client": "kserve-v2",
        "http_url": "http://127.0.0.1:8000", "grpc_url": "127.0.0.1:8001",
        "requests": 2000, "warmup": 100}'

prints one JSON object on stdout (or writes it to RESULT-FILE, a second argument, as run.py
asks): the timed operations, wall and CPU seconds, per-operation latencies, RSS before the first
request and the process's peak RSS. Only the client library
under test is imported, so a worker's memory and CPU are that client's alone.

Both clients do the same work per operation: build the inputs from numpy arrays (as application
code does for every request), request the same outputs in binary form, and turn every output into
a numpy array. The outputs are checked against the expected values outside the timed region
(after the warm-up and after the last timed operation).

In the shared-memory scenarios both clients create and register one input and one output
system shared-memory region per worker (untimed), and per operation copy the input array into
the input region (one copy), infer with the input and the output placed in the regions, and
take the output as a zero-copy numpy view of the output region; after the warm-up check the
output region is zeroed, so the final check sees what the timed requests wrote. The regions
are unregistered and destroyed at the end.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import os
import queue
import resource
import sys
import time
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scenarios import Scenario, scenario_by_name

Arrays = list[npt.NDArray[Any]]
SyncOp = Callable[[], Arrays]
Hook = Callable[[], None]
AsyncOp = Callable[[], Awaitable[Arrays]]

# -- inputs and expected outputs ------------------------------------------------------------------


def _inputs(scenario: Scenario) -> dict[str, npt.NDArray[Any]]:
    if scenario.kind == "small":
        return {
            "INPUT0": np.arange(16, dtype=np.int32).reshape(1, 16),
            "INPUT1": np.ones((1, 16), dtype=np.int32),
        }
    if scenario.kind == "identity":
        count = scenario.tensor_bytes // 4
        return {"INPUT0": np.arange(count, dtype=np.float32).reshape(1, count)}
    return {
        "IN": np.arange(16, dtype=np.int32),
        "REPEAT": np.array([scenario.stream_repeat], dtype=np.int32),
    }


def _output_names(scenario: Scenario) -> list[str]:
    return {"small": ["OUTPUT0", "OUTPUT1"], "identity": ["OUTPUT0"], "stream": ["OUT", "IDX"]}[
        scenario.kind
    ]


def _expected(scenario: Scenario, inputs: dict[str, npt.NDArray[Any]]) -> Arrays:
    if scenario.kind == "small":
        return [inputs["INPUT0"] + inputs["INPUT1"], inputs["INPUT0"] - inputs["INPUT1"]]
    if scenario.kind == "identity":
        return [inputs["INPUT0"]]
    # stream ops return [number of data responses, the last OUT, the last IDX]
    repeat = scenario.stream_repeat
    return [np.array([repeat]), inputs["IN"], np.array([repeat - 1], dtype=np.int32)]


def _check(scenario: Scenario, got: Arrays | None, expected: Arrays) -> None:
    if got is None or len(got) != len(expected):
        raise AssertionError(f"{scenario.name}: expected {len(expected)} arrays, got {got!r}")
    for index, (value, want) in enumerate(zip(got, expected, strict=True)):
        if not isinstance(value, np.ndarray):
            raise AssertionError(f"{scenario.name}: output {index} is {type(value).__name__}")
        if value.shape != want.shape or not np.array_equal(value, want):
            raise AssertionError(
                f"{scenario.name}: output {index} differs (shape {value.shape}, "
                f"expected {want.shape})"
            )


# -- kserve-v2 ------------------------------------------------------------------------------------


def _kserve_kwargs(url: str) -> dict[str, Any]:
    """Client arguments: the gRPC transport ``run.py --grpc-transport`` chose (via the
    environment), for grpc:// URLs."""
    if url.startswith("grpc"):
        return {"grpc_transport": os.environ.get("KSERVE_V2_BENCH_GRPC_TRANSPORT", "native")}
    return {}


def _kserve_sync(
    scenario: Scenario, inputs: dict[str, npt.NDArray[Any]], url: str
) -> tuple[SyncOp, Callable[[], None]]:
    import kserve_v2

    client = kserve_v2.Client(url, **_kserve_kwargs(url))
    model, names = scenario.model, _output_names(scenario)

    if scenario.kind == "stream":
        # One stream for the whole run, like tritonclient's start_stream(); each operation
        # sends one request on it and reads that request's responses (the stream ends each
        # request's iteration at Triton's final flag).
        stream = client.stream()

        def stream_op() -> Arrays:
            count, last = 0, None
            for result in stream.send(model, inputs, outputs=names):
                if result.outputs:
                    last = [result.as_numpy(name) for name in names]
                    count += 1
            assert last is not None
            return [np.array([count]), *last]

        def close() -> None:
            stream.close()
            client.close()

        return stream_op, close

    def op() -> Arrays:
        result = client.infer(model, inputs, outputs=names)
        return [result.as_numpy(name) for name in names]

    return op, client.close


def _region_names(prefix: str) -> tuple[str, str]:
    """Region names of this worker: unique on the server shared by all the workers."""
    return f"{prefix}_in_{os.getpid()}", f"{prefix}_out_{os.getpid()}"


def _kserve_shm(
    scenario: Scenario, inputs: dict[str, npt.NDArray[Any]], url: str
) -> tuple[SyncOp, Hook, Hook]:
    """The operation, the close and the reset (zero the output region) of a shared-memory
    scenario: one input and one output system region, created and registered here."""
    import kserve_v2
    from kserve_v2.datatypes import datatype_of
    from kserve_v2.extensions import read_shared_memory_output
    from kserve_v2.shm import SystemSharedMemoryRegion

    ((name, array),) = inputs.items()
    (output,) = _output_names(scenario)
    datatype, shape, model = datatype_of(array), array.shape, scenario.model
    infer_input, requested_output = kserve_v2.InferInput, kserve_v2.RequestedOutput

    client = kserve_v2.Client(url, **_kserve_kwargs(url))
    in_name, out_name = _region_names("kserve")
    in_region = SystemSharedMemoryRegion.create(in_name, array.nbytes)
    out_region = SystemSharedMemoryRegion.create(out_name, array.nbytes)
    registered: list[SystemSharedMemoryRegion] = []

    def close() -> None:
        try:
            for region in registered:
                client.unregister_region(region)
        finally:
            in_region.close()
            out_region.close()
            client.close()

    try:
        for region in (in_region, out_region):
            client.register_region(region)
            registered.append(region)
    except BaseException:
        close()
        raise

    def op() -> Arrays:
        n = in_region.write(array)
        placed = in_region.placement(n)
        tensor = infer_input(name, datatype=datatype, shape=shape, shared_memory=placed)
        requested = requested_output(output, shared_memory=out_region.placement(n))
        result = client.infer(model, [tensor], outputs=[requested])
        return [read_shared_memory_output(result, output, out_region)]

    def reset() -> None:
        out_region.ndarray(np.uint8, out_region.byte_size).fill(0)

    return op, close, reset


async def _kserve_async(
    scenario: Scenario, inputs: dict[str, npt.NDArray[Any]], url: str
) -> tuple[AsyncOp, Callable[[], Any]]:
    import kserve_v2

    client = kserve_v2.AsyncClient(url, **_kserve_kwargs(url))
    model, names = scenario.model, _output_names(scenario)

    if scenario.kind == "stream":
        # As in _kserve_sync: one stream for the whole run, one request per operation.
        stream = client.stream()

        async def stream_op() -> Arrays:
            count, last = 0, None
            async for result in await stream.send(model, inputs, outputs=names):
                if result.outputs:
                    last = [result.as_numpy(name) for name in names]
                    count += 1
            assert last is not None
            return [np.array([count]), *last]

        async def close() -> None:
            await stream.aclose()
            await client.aclose()

        return stream_op, close

    async def op() -> Arrays:
        result = await client.infer(model, inputs, outputs=names)
        return [result.as_numpy(name) for name in names]

    return op, client.aclose


# -- tritonclient ---------------------------------------------------------------------------------


def _triton_module(protocol: str) -> Any:
    if protocol == "http":
        import tritonclient.http as module
    else:
        import tritonclient.grpc as module
    return module


def _triton_request_factory(
    module: Any, scenario: Scenario, inputs: dict[str, npt.NDArray[Any]]
) -> Callable[[], tuple[list[Any], list[Any]]]:
    """A function building tritonclient's InferInput / InferRequestedOutput objects for one
    request, the way application code does (shapes and datatype names known up front; binary
    data, which HTTP's InferInput and InferRequestedOutput default to)."""
    from tritonclient.utils import np_to_triton_dtype

    specs = [
        (name, list(array.shape), np_to_triton_dtype(array.dtype), array)
        for name, array in inputs.items()
    ]
    names = _output_names(scenario)
    infer_input, requested_output = module.InferInput, module.InferRequestedOutput

    def build() -> tuple[list[Any], list[Any]]:
        infer_inputs = []
        for name, shape, datatype, array in specs:
            tensor = infer_input(name, shape, datatype)
            tensor.set_data_from_numpy(array)
            infer_inputs.append(tensor)
        return infer_inputs, [requested_output(name) for name in names]

    return build


def _triton_sync(
    scenario: Scenario, inputs: dict[str, npt.NDArray[Any]], http_url: str, grpc_url: str
) -> tuple[SyncOp, Callable[[], None]]:
    module = _triton_module(scenario.protocol)
    address = http_url.removeprefix("http://") if scenario.protocol == "http" else grpc_url
    client = module.InferenceServerClient(address)
    build_request = _triton_request_factory(module, scenario, inputs)
    model, names = scenario.model, _output_names(scenario)

    if scenario.kind == "stream":
        responses: queue.SimpleQueue[tuple[Any, Any]] = queue.SimpleQueue()
        client.start_stream(callback=lambda result, error: responses.put((result, error)))

        def stream_op() -> Arrays:
            infer_inputs, outputs = build_request()
            client.async_stream_infer(
                model, infer_inputs, outputs=outputs, enable_empty_final_response=True
            )
            count, last = 0, None
            while True:
                result, error = responses.get()
                if error is not None:
                    raise error
                response = result.get_response()
                if response.outputs:
                    last = [result.as_numpy(name) for name in names]
                    count += 1
                if response.parameters["triton_final_response"].bool_param:
                    break
            assert last is not None
            return [np.array([count]), *last]

        def close() -> None:
            client.stop_stream()
            client.close()

        return stream_op, close

    def op() -> Arrays:
        infer_inputs, outputs = build_request()
        result = client.infer(model, infer_inputs, outputs=outputs)
        return [result.as_numpy(name) for name in names]

    return op, client.close


def _triton_shm(
    scenario: Scenario, inputs: dict[str, npt.NDArray[Any]], http_url: str, grpc_url: str
) -> tuple[SyncOp, Hook, Hook]:
    """tritonclient's side of :func:`_kserve_shm`, with ``tritonclient.utils.shared_memory``
    and the calls of tritonclient's own ``simple_{http,grpc}_shm_client.py`` examples."""
    import tritonclient.utils.shared_memory as shm
    from tritonclient.utils import np_to_triton_dtype, triton_to_np_dtype

    module = _triton_module(scenario.protocol)
    http = scenario.protocol == "http"
    ((name, array),) = inputs.items()
    (output,) = _output_names(scenario)
    shape, datatype, nbytes = list(array.shape), np_to_triton_dtype(array.dtype), array.nbytes
    model = scenario.model
    infer_input, requested_output = module.InferInput, module.InferRequestedOutput

    client = module.InferenceServerClient(http_url.removeprefix("http://") if http else grpc_url)
    in_name, out_name = _region_names("triton")
    in_handle = shm.create_shared_memory_region(in_name, f"/{in_name}", nbytes, create_only=True)
    out_handle = shm.create_shared_memory_region(out_name, f"/{out_name}", nbytes, create_only=True)
    registered: list[str] = []

    def close() -> None:
        try:
            for region in registered:
                client.unregister_system_shared_memory(region)
        finally:
            shm.destroy_shared_memory_region(in_handle)
            shm.destroy_shared_memory_region(out_handle)
            client.close()

    try:
        for region in (in_name, out_name):
            client.register_system_shared_memory(region, f"/{region}", nbytes)
            registered.append(region)
    except BaseException:
        close()
        raise

    def op() -> Arrays:
        shm.set_shared_memory_region(in_handle, [array])
        tensor = infer_input(name, shape, datatype)
        tensor.set_shared_memory(in_name, nbytes)
        requested = requested_output(output)
        requested.set_shared_memory(out_name, nbytes)
        result = client.infer(model, [tensor], outputs=[requested])
        meta = result.get_output(output)
        out_type, out_shape = (
            (meta["datatype"], meta["shape"]) if http else (meta.datatype, meta.shape)
        )
        return [shm.get_contents_as_numpy(out_handle, triton_to_np_dtype(out_type), out_shape)]

    def reset() -> None:
        shm.get_contents_as_numpy(out_handle, np.uint8, [nbytes]).fill(0)

    return op, close, reset


async def _triton_async(
    scenario: Scenario, inputs: dict[str, npt.NDArray[Any]], http_url: str, grpc_url: str
) -> tuple[AsyncOp, Callable[[], Any]]:
    module = _triton_module(scenario.protocol)
    if scenario.protocol == "http":
        import tritonclient.http.aio as aio

        client = aio.InferenceServerClient(http_url.removeprefix("http://"))
    else:
        import tritonclient.grpc.aio as aio

        client = aio.InferenceServerClient(grpc_url)
    build_request = _triton_request_factory(module, scenario, inputs)
    model, names = scenario.model, _output_names(scenario)

    if scenario.kind == "stream":
        return _triton_async_stream(client, build_request, model, names, scenario.stream_repeat)

    async def op() -> Arrays:
        infer_inputs, outputs = build_request()
        result = await client.infer(model, infer_inputs, outputs=outputs)
        return [result.as_numpy(name) for name in names]

    return op, client.close


def _triton_async_stream(
    client: Any,
    build_request: Callable[[], tuple[list[Any], list[Any]]],
    model: str,
    names: list[str],
    repeat: int,
) -> tuple[AsyncOp, Callable[[], Any]]:
    """tritonclient.grpc.aio's side of an async stream scenario: one ``stream_infer`` for the
    whole run, fed from a queue; each operation queues one request and reads its ``repeat``
    responses. (``stream_infer`` cannot ask for Triton's empty final response, which
    ``_triton_sync`` waits for: its ``parameters`` refuse the reserved name.)"""
    requests: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()

    async def request_iterator() -> Any:
        while (request := await requests.get()) is not None:
            yield request

    responses = client.stream_infer(request_iterator()).__aiter__()

    async def stream_op() -> Arrays:
        infer_inputs, outputs = build_request()
        requests.put_nowait({"model_name": model, "inputs": infer_inputs, "outputs": outputs})
        count, last = 0, None
        while count < repeat:
            result, error = await responses.__anext__()
            if error is not None:
                raise error
            if result.get_response().outputs:
                last = [result.as_numpy(name) for name in names]
                count += 1
        assert last is not None
        return [np.array([count]), *last]

    async def close() -> None:
        requests.put_nowait(None)  # ends the request iterator: the stream half-closes
        with contextlib.suppress(StopAsyncIteration):
            await responses.__anext__()
        await client.close()

    return stream_op, close


# -- drivers --------------------------------------------------------------------------------------


def _rss_bytes() -> int:
    import psutil

    return int(psutil.Process().memory_info().rss)


def _peak_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux


class _Clock:
    """Wall time and the process's CPU time (all threads): ``process_time`` for the total,
    ``getrusage`` for its split into user and system (``os.times`` ticks only every 10 ms)
    and the context switches: voluntary ones (a thread went to sleep waiting) and involuntary
    ones (the kernel preempted a thread that could have run on, for the server here)."""

    def __init__(self) -> None:
        self._usage = resource.getrusage(resource.RUSAGE_SELF)
        self._cpu = time.process_time()
        self._wall = time.perf_counter()

    def stop(self) -> dict[str, float]:
        wall = time.perf_counter() - self._wall
        cpu = time.process_time() - self._cpu
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return {
            "wall_s": wall,
            "cpu_s": cpu,
            "user_s": usage.ru_utime - self._usage.ru_utime,
            "system_s": usage.ru_stime - self._usage.ru_stime,
            "sleeps": usage.ru_nvcsw - self._usage.ru_nvcsw,
            "preemptions": usage.ru_nivcsw - self._usage.ru_nivcsw,
        }


def _measure_sync(
    scenario: Scenario,
    op: SyncOp,
    requests: int,
    warmup: int,
    expected: Arrays,
    reset: Hook | None = None,
) -> dict[str, Any]:
    baseline = _rss_bytes()
    last: Arrays | None = None
    for _ in range(max(warmup, 1)):
        last = None
        last = op()
    _check(scenario, last, expected)
    if reset is not None:
        # e.g. zero the output region, so that the last check sees the timed requests' data
        reset()
    latencies: list[float] = []
    gc.collect()
    perf = time.perf_counter
    clock = _Clock()
    for _ in range(requests):
        # Drop the previous result first: holding it would keep a second response (of a large
        # tensor) alive during the next request and inflate both clients' peak RSS alike.
        last = None
        started = perf()
        last = op()
        latencies.append(perf() - started)
    times = clock.stop()
    _check(scenario, last, expected)
    return {**times, "latencies_s": latencies, "baseline_rss": baseline}


async def _pool(op: AsyncOp, count: int, concurrency: int, latencies: list[float]) -> Arrays:
    """Run ``count`` operations with ``concurrency`` in flight; the last result."""
    remaining = count
    last: Arrays = []

    async def worker() -> None:
        nonlocal remaining, last
        while remaining > 0:
            remaining -= 1
            started = time.perf_counter()
            last = await op()
            latencies.append(time.perf_counter() - started)

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return last


async def _measure_async(
    scenario: Scenario,
    make: Callable[[], Awaitable[tuple[AsyncOp, Callable[[], Any]]]],
    requests: int,
    warmup: int,
    expected: Arrays,
) -> dict[str, Any]:
    op, close = await make()
    try:
        baseline = _rss_bytes()
        last = await _pool(op, max(warmup, scenario.concurrency), scenario.concurrency, [])
        _check(scenario, last, expected)
        latencies: list[float] = []
        gc.collect()
        clock = _Clock()
        last = await _pool(op, requests, scenario.concurrency, latencies)
        times = clock.stop()
        _check(scenario, last, expected)
    finally:
        closing = close()
        if asyncio.iscoroutine(closing):
            await closing
    return {**times, "latencies_s": latencies, "baseline_rss": baseline}


def _run_on_loop(main: Coroutine[Any, Any, dict[str, Any]], loop: str) -> dict[str, Any]:
    """``asyncio.run(main)`` on the scenario's event loop: asyncio's, or uvloop's."""
    if loop == "uvloop":
        import uvloop

        new_loop: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
    else:
        new_loop = asyncio.new_event_loop
    event_loop = new_loop()
    try:
        return event_loop.run_until_complete(main)
    finally:
        event_loop.run_until_complete(event_loop.shutdown_asyncgens())
        event_loop.close()


def _versions(client: str) -> dict[str, str]:
    from importlib.metadata import version

    package = "kserve-v2" if client == "kserve-v2" else "tritonclient"
    return {"client_version": version(package), "numpy": np.__version__}


def run(spec: dict[str, Any]) -> dict[str, Any]:
    scenario = scenario_by_name(spec["scenario"])
    client, requests, warmup = spec["client"], int(spec["requests"]), int(spec["warmup"])
    http_url, grpc_url = spec["http_url"], spec["grpc_url"]
    inputs = _inputs(scenario)
    expected = _expected(scenario, inputs)  # views of the inputs where possible: no extra RSS

    if scenario.is_async:
        if client == "kserve-v2":
            url = http_url if scenario.protocol == "http" else f"grpc://{grpc_url}"

            async def make() -> tuple[AsyncOp, Callable[[], Any]]:
                return await _kserve_async(scenario, inputs, url)

        else:

            async def make() -> tuple[AsyncOp, Callable[[], Any]]:
                return await _triton_async(scenario, inputs, http_url, grpc_url)

        result = _run_on_loop(
            _measure_async(scenario, make, requests, warmup, expected), scenario.loop
        )
    else:
        reset: Hook | None = None
        if client == "kserve-v2":
            url = http_url if scenario.protocol == "http" else f"grpc://{grpc_url}"
            if scenario.shared_memory:
                op, close, reset = _kserve_shm(scenario, inputs, url)
            else:
                op, close = _kserve_sync(scenario, inputs, url)
        elif scenario.shared_memory:
            op, close, reset = _triton_shm(scenario, inputs, http_url, grpc_url)
        else:
            op, close = _triton_sync(scenario, inputs, http_url, grpc_url)
        try:
            result = _measure_sync(scenario, op, requests, warmup, expected, reset)
        finally:
            close()

    units = requests * (scenario.stream_repeat if scenario.kind == "stream" else 1)
    result.update(
        scenario=scenario.name,
        client=client,
        requests=requests,
        units=units,
        # tensor bytes sent and received per request (identity: the tensor, both ways, over
        # the socket or through the shared-memory regions)
        bytes_moved=2 * scenario.tensor_bytes * requests,
        peak_rss=_peak_rss_bytes(),
        **_versions(client),
    )
    return result


def main() -> None:
    if len(sys.argv) not in (2, 3):
        sys.exit(f"usage: {sys.argv[0]} JSON-SPEC [RESULT-FILE] (started by benchmarks/run.py)")
    result = json.dumps(run(json.loads(sys.argv[1])))
    if len(sys.argv) == 3:
        # Written whole, then renamed: run.py never reads half a result.
        partial = Path(sys.argv[2] + ".partial")
        partial.write_text(result)
        partial.replace(sys.argv[2])
    else:
        print(result)


if __name__ == "__main__":
    main()
