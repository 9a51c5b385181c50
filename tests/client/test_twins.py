"""The sync classes are generated from the async ones (scripts/unasync.py; that the committed
modules are fresh is tests/scripts/test_unasync.py's check). Here, what generation promises,
seen on the classes themselves: every async member has its sync twin, taking the same
parameters (annotations renamed as the script renames them), and async where the twin blocks.
"""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from kserve_v2 import AsyncClient, Client
from kserve_v2.client.aio import AsyncGenerateStream
from kserve_v2.client.sync import GenerateStream
from kserve_v2.grpc import AsyncGRPCStream, AsyncStreamRequest, GRPCStream, StreamRequest
from tests.scripts import unasync

TWINS = [
    (AsyncClient, Client),
    (AsyncGenerateStream, GenerateStream),
    (AsyncGRPCStream, GRPCStream),
    (AsyncStreamRequest, StreamRequest),
]
IDS = [sync.__name__ for _, sync in TWINS]


#: The dunders that belong to a class's interface (the rest come from Python).
PROTOCOL = {
    *("__init__", "__repr__", "__enter__", "__exit__", "__iter__", "__next__"),
    *("__aenter__", "__aexit__", "__aiter__", "__anext__"),
}


def _members(cls: type) -> dict[str, Any]:
    """Public members and the protocol dunders, as the class defines them."""
    return {n: m for n, m in vars(cls).items() if not n.startswith("_") or n in PROTOCOL}


def _twin_name(name: str) -> str:
    renamed: str = unasync.unasync_line(name + "\n")
    return renamed.rstrip("\n")


@pytest.mark.parametrize(("async_cls", "sync_cls"), TWINS, ids=IDS)
def test_every_member_has_a_twin(async_cls: type, sync_cls: type) -> None:
    assert {_twin_name(name) for name in _members(async_cls)} == set(_members(sync_cls))


@pytest.mark.parametrize(("async_cls", "sync_cls"), TWINS, ids=IDS)
def test_twins_take_the_same_parameters(async_cls: type, sync_cls: type) -> None:
    sync_members = _members(sync_cls)
    for name, member in _members(async_cls).items():
        twin = sync_members[_twin_name(name)]
        if not inspect.isfunction(member):
            assert isinstance(twin, type(member)), name
            continue
        async_sig, sync_sig = inspect.signature(member), inspect.signature(twin)
        assert [
            (p.name, p.kind, p.default, _twin_name(str(p.annotation)))
            for p in async_sig.parameters.values()
        ] == [
            (p.name, p.kind, p.default, str(p.annotation)) for p in sync_sig.parameters.values()
        ], name
        assert _twin_name(str(async_sig.return_annotation)) == str(sync_sig.return_annotation)


@pytest.mark.parametrize(("async_cls", "sync_cls"), TWINS, ids=IDS)
def test_async_where_the_twin_blocks(async_cls: type, sync_cls: type) -> None:
    sync_members = _members(sync_cls)
    for name, member in _members(async_cls).items():
        twin = sync_members[_twin_name(name)]
        if not inspect.isfunction(member):
            continue
        if inspect.isgeneratorfunction(twin):
            assert inspect.isasyncgenfunction(member), name
        elif inspect.iscoroutinefunction(member):
            assert not inspect.iscoroutinefunction(twin), name
        else:  # made at once in both: stream(), generate_stream(), __init__, ...
            assert not inspect.iscoroutinefunction(twin), name


def test_the_clients_have_the_same_options() -> None:
    """max_concurrency too: the sync client caps requests in flight with a semaphore."""
    sync = inspect.signature(Client.__init__).parameters
    assert list(inspect.signature(AsyncClient.__init__).parameters) == list(sync)
    assert sync["max_concurrency"].default is None
