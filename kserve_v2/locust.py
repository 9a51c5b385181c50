"""Locust users for KServe v2 / Open Inference Protocol servers (extra ``kserve-v2[locust]``).

Locust runs many simulated users per process on gevent, and many processes on many machines
(one master, any number of workers), with its web UI, CSV/JSON statistics and ramp-up. The
users here give each simulated user a :class:`kserve_v2.Client` whose calls are reported
to Locust's statistics: one entry per protocol, method and model (``grpc infer`` /
``simple``), the
response time, the response's size in bytes (as received), and failures with the server's
own message.

Example (``examples/locustfile.py``)::

    import numpy as np
    from locust import task
    from kserve_v2.locust import GRPCUser, HTTPUser

    INPUTS = {"INPUT0": np.zeros((1, 16), np.int32), "INPUT1": np.ones((1, 16), np.int32)}

    class SimpleOverHTTP(HTTPUser):
        host = "http://localhost:8000"

        @task
        def simple(self):
            self.client.infer("simple", INPUTS)

    # locust -f examples/locustfile.py --headless -u 32 -r 8 -t 1m

gevent: importing this module imports Locust, which monkey-patches the standard library.
The default transports are then cooperative: the HTTP transport and the native gRPC
transport use only patched sockets, locks and ``select`` (no threads per call), so a waiting
request lets the other users run (``tests/locust`` checks it). grpcio is not cooperative
without ``grpc.experimental.gevent.init_gevent()``, so :class:`GRPCUser` refuses
``grpc_transport="grpcio"``. Streams (``client.stream()``) read in a thread, which gevent
turns into a greenlet; they work, but each stream's reader polls its socket.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, ClassVar

from locust import User
from locust.exception import LocustError

from kserve_v2.client.sync import Client
from kserve_v2.errors import KServeError
from kserve_v2.hooks import WireMessage

__all__ = ["GRPCUser", "HTTPUser", "KServeUser", "LocustClient"]

#: Methods whose first argument is a model name: their statistics entry is named after it.
_MODEL_METHODS = frozenset(
    {
        "infer",
        "is_model_ready",
        "model_metadata",
        "model_config",
        "model_statistics",
        "load_model",
        "unload_model",
        "generate",
    }
)


class LocustClient:
    """A :class:`kserve_v2.Client` that reports every call to Locust's ``request`` event.

    Each call is one statistics entry: ``request_type`` is the protocol and method
    (``"grpc infer"``), ``name`` the model for calls about a model, else the method;
    ``response_time`` in milliseconds; ``response_length`` the bytes of the response body
    received; a failure carries the native exception (:class:`kserve_v2.ServerError` with
    the server's message, a timeout, a connection error). A failed call returns ``None``,
    or raises its exception into the task with ``raise_errors=True``.

    Any client method can be called (``client.infer``, ``client.model_metadata``, ...);
    ``client.native`` is the underlying client, whose calls are not reported.
    """

    def __init__(
        self,
        url: str,
        request_event: Any,
        *,
        raise_errors: bool = False,
        **client_options: Any,
    ) -> None:
        self._fire: Callable[..., None] = request_event.fire
        self._raise = raise_errors
        self._received = 0
        self.native = Client(url, wire_hook=self._hook, **client_options)
        self._protocol = self.native.protocol

    def _hook(self, message: WireMessage) -> None:
        if message.direction == "receive":
            self._received = message.body_length

    def __getattr__(self, method: str) -> Callable[..., Any]:
        target = getattr(self.native, method)
        if not callable(target) or method.startswith("_") or method in ("close", "stream"):
            return target  # type: ignore[no-any-return]

        def reported(*args: Any, **kwargs: Any) -> Any:
            return self._call(method, target, args, kwargs)

        reported.__name__ = method
        return reported

    def _call(
        self, method: str, target: Callable[..., Any], args: Any, kwargs: dict[str, Any]
    ) -> Any:
        name = method
        if method in _MODEL_METHODS:
            name = args[0] if args else kwargs.get("model", method)
        self._received = 0
        started = time.perf_counter()
        error: KServeError | None = None
        result: Any = None
        try:
            result = target(*args, **kwargs)
        except KServeError as exc:
            error = exc
        elapsed_ms = (time.perf_counter() - started) * 1000.0
        self._fire(
            request_type=f"{self._protocol} {method}",
            name=name,
            response_time=elapsed_ms,
            response_length=self._received,
            exception=error,
            context={},
        )
        if error is not None and self._raise:
            raise error
        return result

    def close(self) -> None:
        """Close the client's connections."""
        self.native.close()


class KServeUser(User):  # type: ignore[misc]  # locust ships no type information
    """A Locust user with a reporting :class:`LocustClient` in ``self.client``.

    ``host`` (or Locust's ``--host``) is the server URL; ``client_options`` are further
    :class:`kserve_v2.Client` arguments (``{"timeout": 5}``, ``{"headers": {...}}``).
    Subclasses that define ``on_stop`` call ``super().on_stop()`` (it closes the client).
    """

    abstract = True
    #: Further arguments of :class:`kserve_v2.Client`.
    client_options: ClassVar[dict[str, Any]] = {}
    #: Raise failed calls into the task (they are reported either way).
    raise_errors: ClassVar[bool] = False
    #: The URL schemes this user accepts.
    schemes: ClassVar[tuple[str, ...]] = ("http", "https", "grpc", "grpcs")

    def __init__(self, environment: Any) -> None:
        super().__init__(environment)
        if not self.host:
            raise LocustError(
                f"{type(self).__name__} needs a server URL: set its host or pass --host"
            )
        scheme = self.host.split("://", 1)[0] if "://" in self.host else "http"
        if scheme not in self.schemes:
            raise LocustError(
                f"{type(self).__name__} takes {'/'.join(self.schemes)} URLs, got {self.host!r}"
            )
        self.client = LocustClient(
            self.host,
            environment.events.request,
            raise_errors=self.raise_errors,
            **self._options(),
        )

    def _options(self) -> dict[str, Any]:
        return dict(self.client_options)

    def on_stop(self) -> None:
        self.client.close()


class HTTPUser(KServeUser):
    """A user talking HTTP/REST (``http://`` / ``https://`` host) through the standard
    library transport: one keep-alive connection per user."""

    abstract = True
    schemes = ("http", "https")

    def _options(self) -> dict[str, Any]:
        options = dict(self.client_options)
        options.setdefault("pool_size", 1)  # one user makes one call at a time
        return options


class GRPCUser(KServeUser):
    """A user talking gRPC (``grpc://`` / ``grpcs://`` host) through the native transport
    (cooperative under gevent; grpcio is not, and is refused)."""

    abstract = True
    schemes = ("grpc", "grpcs")

    def _options(self) -> dict[str, Any]:
        options = dict(self.client_options)
        if options.get("grpc_transport", "native") != "native":
            raise LocustError(
                "GRPCUser needs grpc_transport='native': grpcio blocks gevent's event loop"
            )
        return options
