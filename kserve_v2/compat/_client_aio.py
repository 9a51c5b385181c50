"""The asyncio compat clients' base: one native call, its errors translated.

``_client_sync.py`` is generated from ``_client_aio.py`` by ``scripts/unasync.py``: edit the
latter, then run the script. Each protocol's methods (``http/_methods_aio.py``,
``grpc/_methods_aio.py``) are written once on top of :meth:`AsyncCompatClient._call`; what
differs between the protocols (how their extra arguments map to the native ones, what a
result looks like) is in their :class:`Protocol` (non-I/O, shared by sync and asyncio).
"""

from __future__ import annotations

from collections.abc import (
    Awaitable,  # unasync: sync:
    Callable,
    Mapping,
)
from typing import Any, TypeVar

from kserve_v2.client.aio import AsyncClient
from kserve_v2.compat._base import PluginHost, infer_arguments_of, translated

__all__ = ["AsyncCompatClient", "Protocol"]

T = TypeVar("T")


class Protocol:
    """What a protocol's compat clients do around a native call."""

    #: The protocol's name, for :func:`kserve_v2.compat._base.translate`.
    _protocol = "compat"
    _verbose = False

    def _native_options(self, method: Callable[..., Any], options: dict[str, Any]) -> None:
        """Turn tritonclient's options of a call (``query_params``, ``client_timeout``...)
        into the native method's keywords, in place."""

    def _returned(self, result: Any) -> None:
        """See a native call's result (e.g. print it when verbose)."""

    def _infer_arguments(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """The native infer keywords for a tritonclient method's ``locals()``."""
        with translated(self._protocol):
            return infer_arguments_of(values)


class AsyncCompatClient(Protocol, PluginHost):
    """The asyncio compat clients' base: the native :class:`AsyncClient`, ``_call``."""

    _client: AsyncClient

    async def _call(
        self,
        method: Callable[..., Awaitable[T]],  # unasync: sync: method: Callable[..., T],
        *args: Any,
        headers: Mapping[str, str] | None = None,
        **options: Any,
    ) -> T:
        """``method(*args, ...)`` with the plugin's headers and the protocol's options; a
        native error leaves as :class:`InferenceServerException`."""
        self._native_options(method, options)
        with translated(self._protocol):
            result = await method(*args, headers=self._headers(headers), **options)
        self._returned(result)
        return result
