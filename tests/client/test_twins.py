"""Client and AsyncClient are hand-written twins: this keeps their public surface in step."""

from __future__ import annotations

import inspect

from kserve_v2 import AsyncClient, Client

# Names that differ on purpose: sync name -> async name.
RENAMED = {"close": "aclose", "__enter__": "__aenter__", "__exit__": "__aexit__"}
# Async methods that return an (async) object at once instead of being coroutines.
NOT_COROUTINES = {"stream", "generate_stream", "__init__", "url", "protocol"}


def _public(cls: type) -> dict[str, object]:
    return {
        name: member
        for name, member in vars(cls).items()
        if not name.startswith("_") or name in ("__init__", *RENAMED, *RENAMED.values())
    }


def test_every_method_has_a_twin() -> None:
    sync = {RENAMED.get(name, name) for name in _public(Client)}
    assert sync == set(_public(AsyncClient))


def test_twins_take_the_same_parameters() -> None:
    sync = _public(Client)
    for name, member in _public(AsyncClient).items():
        twin = sync[next(k for k in sync if RENAMED.get(k, k) == name)]
        if isinstance(member, property):
            continue
        async_params = dict(inspect.signature(member).parameters)  # type: ignore[arg-type]
        sync_params = dict(inspect.signature(twin).parameters)  # type: ignore[arg-type]
        if name == "__init__":
            # The async client alone caps requests in flight.
            assert async_params.pop("max_concurrency").default is None
        assert [(p.name, p.kind, p.default) for p in async_params.values()] == [
            (p.name, p.kind, p.default) for p in sync_params.values()
        ], name


def test_async_methods_are_coroutines() -> None:
    for name, member in _public(AsyncClient).items():
        if isinstance(member, property) or name in NOT_COROUTINES:
            continue
        assert inspect.iscoroutinefunction(member), name
