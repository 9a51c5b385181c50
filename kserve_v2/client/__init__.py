"""The client facade: :class:`Client` and :class:`AsyncClient` over HTTP/REST or gRPC."""

from kserve_v2.client.aio import AsyncClient
from kserve_v2.client.sync import Client
from kserve_v2.hooks import WireMessage

__all__ = ["AsyncClient", "Client", "WireMessage"]
