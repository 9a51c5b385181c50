"""The client option objects: checked when built, frozen."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from kserve_v2 import GRPCOptions, InvalidInputError
from kserve_v2.options import GRPCKeepAlive


def test_grpc_options_defaults_to_the_native_transport() -> None:
    options = GRPCOptions()
    assert (options.transport, options.channel_options) == ("native", ())
    assert (options.credentials, options.keepalive) == (None, None)


def test_channel_options_are_kept_as_pairs() -> None:
    from_mapping = GRPCOptions(channel_options={"grpc.max_receive_message_length": 10})
    from_pairs = GRPCOptions(channel_options=[("grpc.max_receive_message_length", 10)])
    assert from_mapping.channel_options == (("grpc.max_receive_message_length", 10),)
    assert from_mapping == from_pairs
    grpcio = GRPCOptions(transport="grpcio", channel_options={"grpc.enable_retries": 0})
    assert grpcio.channel_options == (("grpc.enable_retries", 0),)


def test_grpc_options_are_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        GRPCOptions().transport = "grpcio"  # type: ignore[misc]


def test_grpcio_settings_need_the_grpcio_transport() -> None:
    keepalive = GRPCKeepAlive(time_ms=30_000)
    assert GRPCOptions(transport="grpcio", keepalive=keepalive).keepalive is keepalive
    # Keepalive PINGs and their channel options: the native transport has them too.
    assert GRPCOptions(keepalive=keepalive).keepalive is keepalive
    assert GRPCOptions(channel_options=keepalive.channel_options()).channel_options
    for settings in (
        {"credentials": object()},
        {"channel_options": {"grpc.enable_retries": 0}},
    ):
        with pytest.raises(InvalidInputError, match='transport="grpcio"'):
            GRPCOptions(**settings)


@pytest.mark.parametrize(
    ("settings", "problem"),
    [
        ({"transport": "h2"}, "transport must be one of"),
        ({"transport": None}, "transport must be one of"),
        ({"transport": "grpcio", "keepalive": {"time_ms": 1}}, "GRPCKeepAlive"),
        ({"channel_options": 5}, "mapping or a sequence"),
        ({"channel_options": "grpc.x=1"}, "mapping or a sequence"),
        ({"channel_options": [("a", 1, 2)]}, "pairs"),
        ({"channel_options": {"": 1}}, "option names"),
        ({"channel_options": [(1, 1)]}, "option names"),
    ],
)
def test_bad_grpc_options(settings: dict[str, Any], problem: str) -> None:
    with pytest.raises(InvalidInputError, match=problem):
        GRPCOptions(**settings)
