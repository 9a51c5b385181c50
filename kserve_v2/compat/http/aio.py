"""tritonclient.http.aio on kserve-v2: ``import kserve_v2.compat.http.aio as aiohttpclient``.

Example::

    import kserve_v2.compat.http.aio as aiohttpclient

    async def main():
        client = aiohttpclient.InferenceServerClient("localhost:8000")
        x = aiohttpclient.InferInput("INPUT0", [1, 16], "INT32")
        ...
        result = await client.infer("simple", [x, y])
        await client.close()

The client is a :class:`kserve_v2.AsyncClient`: any number of tasks of one event loop may
use it at once (``conn_limit`` connections).
"""

from __future__ import annotations

from types import TracebackType
from typing import Any

from kserve_v2.compat._base import InferenceServerClientPlugin, PluginHost, Request
from kserve_v2.compat.http import InferAsyncRequest
from kserve_v2.compat.http._methods_aio import AsyncHTTPMethods
from kserve_v2.compat.http._shared import (
    InferInput,
    InferRequestedOutput,
    InferResult,
    base_url,
    tls_options,
)
from kserve_v2.compat.utils import InferenceServerException
from kserve_v2.concurrency import AsyncLock

__all__ = [
    "InferAsyncRequest",
    "InferInput",
    "InferRequestedOutput",
    "InferResult",
    "InferenceServerClient",
    "InferenceServerClientBase",
    "InferenceServerClientPlugin",
    "InferenceServerException",
    "Request",
]

#: The clients' base class (plugin registration), under tritonclient's name.
InferenceServerClientBase = PluginHost


class InferenceServerClient(AsyncHTTPMethods):
    """An asyncio client for Triton's HTTP/REST endpoint (``url`` is ``host:port``).

    Args:
        url: the server's ``host:port`` (optionally with a base path).
        verbose: print every request and response.
        conn_limit: most connections kept to the server.
        conn_timeout: timeout of each request in seconds.
        ssl: use HTTPS.
        ssl_context: the ``ssl.SSLContext`` to use.
    """

    def __init__(
        self,
        url: str,
        verbose: bool = False,
        conn_limit: int = 100,
        conn_timeout: float = 60.0,
        ssl: bool = False,
        ssl_context: Any = None,
    ) -> None:
        super().__init__()
        self._verbose = verbose
        self._lock = AsyncLock()
        self._open(
            {
                "url": base_url(url, ssl),
                "timeout": conn_timeout,
                "pool_size": max(1, int(conn_limit)),
                "tls": tls_options(ssl, None, None, False, ssl_context),
                "verbose": verbose,
            }
        )

    async def close(self) -> None:
        """Close the client's connections."""
        await self._close_clients()

    async def __aenter__(self) -> InferenceServerClient:
        return self

    async def __aexit__(
        self,
        type: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()
