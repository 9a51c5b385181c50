"""Shared memory over HTTP against the live server: regions, placements, errors; CUDA.

Runs in each HTTP set-up of ``conftest.py``. Every test registers regions under names of its
own and unregisters them at the end, so the session server is left as it was found.
"""

from __future__ import annotations

import base64
import itertools
import json
import re
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

from kserve_v2 import (
    InferInput,
    InferResult,
    InvalidInputError,
    OutputTensor,
    ProtocolError,
    RequestedOutput,
    ServerError,
)
from kserve_v2.extensions import read_shared_memory_output
from kserve_v2.rest.codec import decode_infer_response
from kserve_v2.shm import CudaSharedMemoryRegion, SystemSharedMemoryRegion, is_cuda_available
from kserve_v2.tensors import SharedMemoryPlacement
from tests.client.conftest import (
    REUSE_SHAPES,
    ClientUnderTest,
    exchanges,
    joined_body,
    json_header,
    reuse_one_input,
)

Connect = Callable[..., ClientUnderTest]
_names = itertools.count()


def unique(prefix: str) -> str:
    """A region name no other test uses (tests run in four set-ups against one server)."""
    return f"{prefix}_{next(_names)}"


@pytest.fixture
def regions(client: ClientUnderTest) -> Iterator[Callable[..., SystemSharedMemoryRegion]]:
    """``make(byte_size, register=True)``: a new system region, registered with the server;
    all are unregistered and closed after the test."""
    made: list[SystemSharedMemoryRegion] = []

    def make(byte_size: int, register: bool = True) -> SystemSharedMemoryRegion:
        region = SystemSharedMemoryRegion.create(unique("region"), byte_size)
        made.append(region)
        if register:
            client.register_region(region)
        return region

    yield make
    for region in made:
        client.unregister_system_shared_memory(region.name)
        region.close()


def simple_inputs_in(region: SystemSharedMemoryRegion, offset: int = 0) -> list[InferInput]:
    """``simple``'s two inputs written to ``region`` back to back from ``offset``."""
    a = np.arange(16, dtype=np.int32).reshape(1, 16)
    b = np.full((1, 16), 5, dtype=np.int32)
    n = region.write(a, offset)
    region.write(b, offset + n)
    return [
        InferInput(
            "INPUT0", datatype="INT32", shape=(1, 16), shared_memory=region.placement(n, offset)
        ),
        InferInput(
            "INPUT1", datatype="INT32", shape=(1, 16), shared_memory=region.placement(n, offset + n)
        ),
    ]


# -- without a server ----------------------------------------------------------------------------


def test_outputs_in_shared_memory_decode_without_data() -> None:
    # Triton's answer for an output placed in shared memory: no data, no parameters.
    body = b'{"outputs":[{"name":"OUTPUT0","datatype":"FP32","shape":[2]}]}'
    with pytest.raises(ProtocolError, match="carries no data"):
        decode_infer_response(body)
    placement = SharedMemoryPlacement("r", 8, 16)
    result = decode_infer_response(body, shared_memory={"OUTPUT0": placement})
    tensor = result.output("OUTPUT0")
    assert tensor.data is None
    assert tensor.parameters == placement.as_parameters()


def test_read_shared_memory_output_uses_the_placement() -> None:
    with SystemSharedMemoryRegion.create("local", 64) as region:
        region.write(np.array([1.5, 2.5], np.float32), offset=16)
        n = region.write(np.array([b"ab", b"c"], dtype=object), offset=32)
        result = InferResult(
            "m",
            outputs=(
                OutputTensor("Y", "FP32", (2,), None, region.tensor_parameters(8, 16)),
                OutputTensor("S", "BYTES", (2,), None, region.tensor_parameters(n + 8, 32)),
                OutputTensor("Z", "FP32", (2,), np.zeros(2, np.float32)),
            ),
        )
        assert read_shared_memory_output(result, "Y", region).tolist() == [1.5, 2.5]
        assert read_shared_memory_output(result, "S", region).tolist() == [b"ab", b"c"]
        with pytest.raises(InvalidInputError, match="not written to shared memory"):
            read_shared_memory_output(result, "Z", region)
        with pytest.raises(InvalidInputError, match="no output 'W'"):
            read_shared_memory_output(result, "W", region)


# -- the live server -----------------------------------------------------------------------------


def test_register_status_and_unregister(client: ClientUnderTest) -> None:
    with (
        SystemSharedMemoryRegion.create(unique("status_a"), 128) as a,
        SystemSharedMemoryRegion.create(unique("status_b"), 8192) as b,
    ):
        client.register_region(a)
        # Triton maps a registered part with mmap: its offset must be page-aligned.
        client.register_system_shared_memory(b.name, b.key, 64, offset=4096)
        try:
            mine = {
                r["name"]: r
                for r in client.system_shared_memory_status()
                if r["name"] in (a.name, b.name)
            }
            assert mine == {
                a.name: {"name": a.name, "key": a.key, "offset": 0, "byte_size": 128},
                b.name: {"name": b.name, "key": b.key, "offset": 4096, "byte_size": 64},
            }
            assert client.system_shared_memory_status(a.name) == [mine[a.name]]
            client.unregister_region(a)
            with pytest.raises(
                ServerError, match=f"Unable to find system shared memory region: '{a.name}'"
            ):
                client.system_shared_memory_status(a.name)
        finally:
            client.unregister_system_shared_memory(a.name)
            client.unregister_system_shared_memory(b.name)
    targets = [send.target for send, _ in exchanges(client.seen)]
    assert targets[:2] == [
        f"/v2/systemsharedmemory/region/{a.name}/register",
        f"/v2/systemsharedmemory/region/{b.name}/register",
    ]
    assert json_header(client.seen[2]) == {"key": b.key, "offset": 4096, "byte_size": 64}


def test_inputs_and_outputs_in_one_region(
    client: ClientUnderTest, regions: Callable[..., SystemSharedMemoryRegion]
) -> None:
    region = regions(512)
    inputs = simple_inputs_in(region, offset=64)
    outputs = [
        RequestedOutput("OUTPUT0", shared_memory=region.placement(64, offset=256)),
        RequestedOutput("OUTPUT1", shared_memory=region.placement(64, offset=384)),
    ]
    result = client.infer("simple", inputs, outputs=outputs)
    expected_sum = np.arange(16, dtype=np.int32).reshape(1, 16) + 5
    for name, expected in (("OUTPUT0", expected_sum), ("OUTPUT1", expected_sum - 10)):
        tensor = result.output(name)
        assert tensor.data is None
        assert (tensor.datatype, tensor.shape) == ("INT32", (1, 16))
        np.testing.assert_array_equal(read_shared_memory_output(result, name, region), expected)
    np.testing.assert_array_equal(region.ndarray("INT32", (1, 16), offset=256), expected_sum)
    with pytest.raises(InvalidInputError, match="written to shared memory"):
        result.as_numpy("OUTPUT0")
    # Only the JSON header travelled: no tensor bytes in either direction.
    send, receive = exchanges(client.seen)[-1]
    assert json_header(send)["inputs"][1]["parameters"] == {
        "shared_memory_region": region.name,
        "shared_memory_byte_size": 64,
        "shared_memory_offset": 128,
    }
    assert "inference-header-content-length" not in dict(receive.headers)


def test_several_regions_and_mixed_placement(
    client: ClientUnderTest, regions: Callable[..., SystemSharedMemoryRegion]
) -> None:
    inputs_region, outputs_region = regions(128), regions(1024)
    inputs = simple_inputs_in(inputs_region)
    result = client.infer(
        "simple",
        inputs,
        outputs=[
            RequestedOutput("OUTPUT0", shared_memory=outputs_region.placement(offset=960)),
            "OUTPUT1",  # this one comes back in the response
        ],
    )
    expected_sum = np.arange(16, dtype=np.int32).reshape(1, 16) + 5
    np.testing.assert_array_equal(
        read_shared_memory_output(result, "OUTPUT0", outputs_region), expected_sum
    )
    np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), expected_sum - 10)
    with pytest.raises(InvalidInputError, match="not written to shared memory"):
        read_shared_memory_output(result, "OUTPUT1", outputs_region)
    with pytest.raises(InvalidInputError, match=f"not {inputs_region.name!r}"):
        read_shared_memory_output(result, "OUTPUT0", inputs_region)


def test_bytes_tensors_in_shared_memory(
    client: ClientUnderTest, regions: Callable[..., SystemSharedMemoryRegion]
) -> None:
    region = regions(256)
    words = np.array([b"shared", b"", b"memory!"], dtype=object)
    n = region.write(words)
    result = client.infer(
        "bytes_reverse",
        [InferInput("INPUT0", datatype="BYTES", shape=(3,), shared_memory=region.placement(n))],
        outputs=[RequestedOutput("OUTPUT0", shared_memory=region.placement(offset=128))],
    )
    assert list(read_shared_memory_output(result, "OUTPUT0", region)) == [
        b"derahs",
        b"",
        b"!yromem",
    ]


def test_registering_a_system_region_by_hand(client: ClientUnderTest) -> None:
    # A region made by someone else: only its key is known here.
    with SystemSharedMemoryRegion.create(unique("owner"), 64) as owner:
        peer = SystemSharedMemoryRegion.attach(unique("peer"), owner.key)
        with peer:
            client.register_system_shared_memory(peer.name, owner.key, 64)
            try:
                peer.write(np.full((1, 16), 2, np.int32))
                x = InferInput(
                    "INPUT0", datatype="INT32", shape=(1, 16), shared_memory=peer.placement(64)
                )
                y = InferInput("INPUT1", np.ones((1, 16), np.int32))
                result = client.infer("simple", [x, y], outputs=["OUTPUT0"])
                assert result.as_numpy("OUTPUT0").tolist() == [[3] * 16]
            finally:
                client.unregister_system_shared_memory(peer.name)


# (case, how the request goes wrong, the server's message)
SERVER_ERRORS: list[tuple[str, str, str]] = [
    ("unknown region", "unknown", "Unable to find shared memory region: 'no_such_region'"),
    ("input past the end", "input_past_end", "Invalid offset + byte size for shared memory region"),
    ("offset past the end", "offset_past_end", "Invalid offset for shared memory region"),
    ("output region too small", "output_too_small", "should be at least 64 bytes"),
]


@pytest.mark.parametrize(
    ("mistake", "message"), [e[1:] for e in SERVER_ERRORS], ids=[e[0] for e in SERVER_ERRORS]
)
def test_placement_errors_carry_the_servers_message(
    client: ClientUnderTest,
    regions: Callable[..., SystemSharedMemoryRegion],
    mistake: str,
    message: str,
) -> None:
    region = regions(128)
    inputs = simple_inputs_in(region)
    outputs: list[Any] = ["OUTPUT0"]
    # The client checks placements made by region.placement(); hand-made ones reach the server.
    wrong = {
        "unknown": SharedMemoryPlacement("no_such_region", 64),
        "input_past_end": SharedMemoryPlacement(region.name, 64, 100),
        "offset_past_end": SharedMemoryPlacement(region.name, 64, 300),
    }
    if mistake in wrong:
        inputs[1] = InferInput(
            "INPUT1", datatype="INT32", shape=(1, 16), shared_memory=wrong[mistake]
        )
    else:
        outputs = [RequestedOutput("OUTPUT0", shared_memory=SharedMemoryPlacement(region.name, 32))]
    with pytest.raises(ServerError, match=re.escape(message)):
        client.infer("simple", inputs, outputs=outputs)


def test_placement_errors_caught_before_sending(
    regions: Callable[..., SystemSharedMemoryRegion],
) -> None:
    region = regions(128, register=False)
    with pytest.raises(InvalidInputError, match="past the end of region"):
        region.placement(64, offset=100)
    with pytest.raises(InvalidInputError, match="must not be negative"):
        region.placement(offset=129)
    with pytest.raises(InvalidInputError, match="needs an explicit datatype and shape"):
        InferInput("INPUT0", shared_memory=region.placement(64))


def test_registration_errors_carry_the_servers_message(client: ClientUnderTest) -> None:
    name = unique("bad")
    with pytest.raises(ServerError, match="Unable to open shared memory region: '/kserve_v2_nokey"):
        client.register_system_shared_memory(name, "/kserve_v2_nokey", 64)
    with SystemSharedMemoryRegion.create(unique("small"), 64) as region:
        with pytest.raises(ServerError, match=f"{name}|{region.key}"):
            client.register_system_shared_memory(name, region.key, 4096)
        with pytest.raises(ServerError, match=name):
            client.register_system_shared_memory(name, region.key, 64, offset=8)  # unaligned
        client.register_region(region)
        try:
            with pytest.raises(ServerError, match="already in manager"):
                client.register_region(region)
        finally:
            client.unregister_region(region)
    # Unregistering what is not registered is allowed.
    client.unregister_system_shared_memory(unique("never_registered"))


@pytest.mark.parametrize("kind", ["sync-stdlib"])
def test_unregister_all(connect: Connect, triton_factory: Any) -> None:
    # On a server of its own: unregistering everything must not disturb other tests.
    server = triton_factory.start(
        model_control_mode="explicit", load_models=["simple"], metrics=False
    )
    try:
        client = connect(server.http_url)
        with (
            SystemSharedMemoryRegion.create("all_a", 64) as a,
            SystemSharedMemoryRegion.create("all_b", 64) as b,
        ):
            client.register_region(a)
            client.register_region(b)
            assert {r["name"] for r in client.system_shared_memory_status()} == {"all_a", "all_b"}
            client.unregister_system_shared_memory()
            assert client.system_shared_memory_status() == []
        client.unregister_cuda_shared_memory()
        assert client.cuda_shared_memory_status() == []
    finally:
        server.stop()


def test_register_region_refuses_other_objects(client: ClientUnderTest) -> None:
    with pytest.raises(
        InvalidInputError, match="SystemSharedMemoryRegion or CudaSharedMemoryRegion"
    ):
        client.register_region("region_name")


# -- CUDA ----------------------------------------------------------------------------------------


def test_cuda_status_without_regions(client: ClientUnderTest) -> None:
    assert all(isinstance(r, dict) for r in client.cuda_shared_memory_status())


def test_cuda_register_with_an_invalid_handle_is_the_servers_error(client: ClientUnderTest) -> None:
    # No GPU needed: a zero handle is refused (no such allocation, or no CUDA at all).
    with pytest.raises(ServerError):
        client.register_cuda_shared_memory(unique("gpu"), bytes(64), 0, 64)
    send, _ = exchanges(client.seen)[0]
    assert json.loads(b"".join(bytes(p) for p in send.body)) == {
        "raw_handle": {"b64": base64.b64encode(bytes(64)).decode()},
        "device_id": 0,
        "byte_size": 64,
    }


@pytest.mark.cuda
@pytest.mark.skipif(not is_cuda_available(), reason="needs a CUDA GPU and runtime")
def test_cuda_region_round_trip(client: ClientUnderTest) -> None:
    with CudaSharedMemoryRegion.create(unique("gpu"), 256, device_id=0) as region:
        client.register_region(region)
        try:
            (status,) = client.cuda_shared_memory_status(region.name)
            assert status == {"name": region.name, "device_id": 0, "byte_size": 256}
            x = np.arange(16, dtype=np.int32).reshape(1, 16)
            n = region.copy_from_host(x)
            region.copy_from_host(np.ones((1, 16), np.int32), offset=n)
            result = client.infer(
                "simple",
                [
                    InferInput(
                        "INPUT0", datatype="INT32", shape=(1, 16), shared_memory=region.placement(n)
                    ),
                    InferInput(
                        "INPUT1",
                        datatype="INT32",
                        shape=(1, 16),
                        shared_memory=region.placement(n, n),
                    ),
                ],
                outputs=[RequestedOutput("OUTPUT0", shared_memory=region.placement(n, 2 * n))],
            )
            np.testing.assert_array_equal(
                read_shared_memory_output(result, "OUTPUT0", region), x + 1
            )
        finally:
            client.unregister_region(region)
        assert client.cuda_shared_memory_status() == []


def test_one_input_reused_across_calls_and_placements(client: ClientUnderTest) -> None:
    assert reuse_one_input(client, f"reuse-{client.kind}") == 2 * len(REUSE_SHAPES)
    sends = [send for send, _ in exchanges(client.seen) if send.target.endswith("/infer")]
    assert len(sends) == 2 * len(REUSE_SHAPES)
    # Data and shared-memory placements alternate on the wire.
    placed = [b"shared_memory_region" in joined_body(send) for send in sends]
    assert placed == [False, True] * len(REUSE_SHAPES)
