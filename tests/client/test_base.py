"""What both clients share (ClientBase): the gRPC settings, as one GRPCOptions or as keywords."""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from kserve_v2 import AsyncClient, Client, GRPCOptions, InvalidInputError
from kserve_v2.options import GRPCKeepAlive

KEEPALIVE = GRPCKeepAlive(time_ms=30_000)


@pytest.mark.parametrize("cls", [Client, AsyncClient])
def test_grpc_keywords_fill_the_same_options_object(cls: type[Client | AsyncClient]) -> None:
    expected = GRPCOptions(
        transport="grpcio",
        channel_options={"grpc.enable_retries": 0},
        keepalive=KEEPALIVE,
    )
    by_keywords = cls(
        "grpc://127.0.0.1:1",
        grpc_transport="grpcio",
        grpc_options={"grpc.enable_retries": 0},
        grpc_keepalive=KEEPALIVE,
    )
    by_object = cls("grpc://127.0.0.1:1", grpc=expected)
    for client in (by_keywords, by_object):
        assert client._grpc == expected
        assert client.grpc_transport == "grpcio"
        assert ("grpc.keepalive_time_ms", 30_000) in client._grpc_config.options
        assert ("grpc.enable_retries", 0) in client._grpc_config.options
    assert Client("grpc://127.0.0.1:1")._grpc == GRPCOptions()


@pytest.mark.parametrize("cls", [Client, AsyncClient])
def test_keepalive_reaches_the_native_transport(cls: type[Client | AsyncClient]) -> None:
    client = cls("grpc://127.0.0.1:1", grpc_keepalive=KEEPALIVE)
    assert client.grpc_transport == "native"
    options = dict(client._grpc_config.options)
    assert options["grpc.keepalive_time_ms"] == 30_000
    assert options["grpc.keepalive_timeout_ms"] == 20_000


def test_max_response_size_yields_to_explicit_channel_options() -> None:
    limit = "grpc.max_receive_message_length"
    client = Client("grpc://127.0.0.1:1", max_response_size=100)
    assert dict(client._grpc_config.options)[limit] == 100
    explicit = GRPCOptions(channel_options={limit: 50})
    client = Client("grpc://127.0.0.1:1", max_response_size=100, grpc=explicit)
    assert dict(client._grpc_config.options)[limit] == 50


@pytest.mark.parametrize(
    ("url", "options", "problem"),
    [
        ("grpc://h:1", {"grpc": GRPCOptions(), "grpc_transport": "grpcio"}, "not both"),
        ("grpc://h:1", {"grpc": GRPCOptions(), "grpc_keepalive": KEEPALIVE}, "not both"),
        ("grpc://h:1", {"grpc": {"transport": "grpcio"}}, "GRPCOptions"),
        ("grpc://h:1", {"grpc_credentials": object()}, 'transport="grpcio"'),
        ("grpc://h:1", {"grpc_transport": "h2"}, "transport must be one of"),
        ("http://h:1", {"grpc": GRPCOptions(transport="grpcio")}, "grpc:// and grpcs://"),
        ("http://h:1", {"grpc_transport": "grpcio"}, "grpc:// and grpcs://"),
        ("http://h:1", {"timeout": 0}, "timeout"),
        ("http://h:1", {"connect_timeout": True}, "connect_timeout"),
        ("http://h:1", {"binary": "yes"}, "binary"),
        ("grpc://h:1", {"timeout": -1}, "timeout"),
    ],
)
def test_option_checks(url: str, options: dict[str, Any], problem: str) -> None:
    with pytest.raises(InvalidInputError, match=problem):
        Client(url, **options)


def test_default_grpc_options_are_accepted_with_http() -> None:
    # Shared settings objects may meet HTTP clients: only settings that would be ignored fail.
    Client("http://h:1", grpc=GRPCOptions(), grpc_options={}).close()


@pytest.mark.parametrize("cls", [Client, AsyncClient])
def test_every_request_method_takes_query(cls: type) -> None:
    """``query=`` is on every method that sends a request: only closing and opening a gRPC
    stream (which has no URL) are without it."""
    lacking = {
        name
        for name, member in inspect.getmembers(cls, inspect.isfunction)
        if not name.startswith("_") and "query" not in inspect.signature(member).parameters
    }
    assert lacking == {"close" if cls is Client else "aclose", "stream"}
