"""What every gRPC channel shares, whichever library carries its bytes (grpcio in
:mod:`kserve_v2.transport.grpcio`, the library's own HTTP/2 client in
:mod:`kserve_v2.transport.native`): its configuration, its closed state, the event loop an
asyncio channel is bound to, and its repr.
"""

from __future__ import annotations

import asyncio

from kserve_v2.errors import TransportError
from kserve_v2.grpc.config import ChannelConfig

__all__ = ["GRPCChannelBase"]


class GRPCChannelBase:
    """The state of a gRPC channel made from ``config``; subclasses add the calls."""

    def __init__(self, config: ChannelConfig) -> None:
        self.config = config
        self._closed = False
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def closed(self) -> bool:
        return self._closed

    def check_open(self) -> None:
        """Raise :class:`TransportError` once the channel is closed."""
        if self._closed:
            raise TransportError("the gRPC channel is closed", url=self.config.url)

    def bind_loop(self) -> asyncio.AbstractEventLoop:
        """The running event loop, which must be the one the channel was first used in: an
        asyncio channel's connections belong to that loop."""
        loop = asyncio.get_running_loop()
        if self._loop is None:
            self._loop = loop
        elif loop is not self._loop:
            raise TransportError(
                "this AsyncClient's gRPC channel belongs to another event loop; "
                "make one client per loop",
                url=self.config.url,
            )
        return loop

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.config.url!r}{', closed' if self._closed else ''})"
