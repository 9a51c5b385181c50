"""The client facade: :class:`Client` and :class:`AsyncClient` over HTTP/REST or gRPC.

Each is loaded on first use, so that importing one does not import the other (the sync
client needs no asyncio).
"""

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kserve_v2.client.aio import AsyncClient
    from kserve_v2.client.sync import Client
    from kserve_v2.hooks import WireMessage
else:
    from kserve_v2._lazy import lazy_exports

    __getattr__, __dir__ = lazy_exports(
        globals(),
        {
            "AsyncClient": "kserve_v2.client.aio",
            "Client": "kserve_v2.client.sync",
            "WireMessage": "kserve_v2.hooks",
        },
    )

__all__ = ["AsyncClient", "Client", "WireMessage"]
