"""What the scripted servers of the hostile kits share: a loopback TCP server that runs a
handler on each connection it accepts, in a thread of its own, and reports the handlers'
exceptions (and handlers that never finish) when the test ends.

:class:`ThreadedServer` is specialised by the kits (``h2_server``, ``http1_server``) with
their own peer (the server side of one connection) and URL scheme; :func:`serving` is their
``scripted_servers`` fixture body.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import traceback
from collections.abc import Callable, Iterator
from typing import ClassVar, Generic, Protocol, TypeVar

import pytest

#: How long a server-side socket waits for the client (and close() for a handler).
IO_TIMEOUT = 5.0


class Connection(Protocol):
    """What the server needs of a peer: its socket and which connection it is."""

    sock: socket.socket
    index: int


P = TypeVar("P", bound=Connection)
S = TypeVar("S", bound="ThreadedServer")  # type: ignore[type-arg]


class ThreadedServer(Generic[P]):
    """A loopback TCP server running ``handler`` on each connection, in a thread per
    connection; handler exceptions are collected and reported by :meth:`close`.

    Subclasses say how a connection becomes a peer (:meth:`peer`), the URL ``scheme``, a
    ``name`` for the threads, and which handler exceptions are ``expected`` (not errors)."""

    scheme: ClassVar[str]
    name: ClassVar[str]
    expected: ClassVar[tuple[type[BaseException], ...]] = ()

    def __init__(self, handler: Callable[[P], None]) -> None:
        self._handler = handler
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.05)
        self.port: int = self._listener.getsockname()[1]
        self.url = f"{self.scheme}://127.0.0.1:{self.port}"
        self.peers: list[P] = []
        self.errors: list[str] = []
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._acceptor = threading.Thread(target=self._accept, name=f"{self.name} accept")
        self._acceptor.start()

    def peer(self, sock: socket.socket, index: int) -> P:
        """The server side of accepted connection number ``index``."""
        raise NotImplementedError

    @property
    def accepted(self) -> int:
        """Connections accepted so far."""
        return len(self.peers)

    def finished(self, index: int, timeout: float = IO_TIMEOUT) -> bool:
        """Wait until connection ``index``'s handler has returned; whether it has."""
        with self._lock:
            thread = self._threads[index]
        thread.join(timeout)
        return not thread.is_alive()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                sock, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            sock.settimeout(IO_TIMEOUT)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                peer = self.peer(sock, len(self.peers))
                thread = threading.Thread(
                    target=self._serve, args=(peer,), name=f"{self.name} conn {peer.index}"
                )
                self.peers.append(peer)
                self._threads.append(thread)
            thread.start()

    def _serve(self, peer: P) -> None:
        try:
            self._handler(peer)
        except self.expected:
            pass
        except BaseException as exc:
            self.errors.append(
                f"handler of connection {peer.index}: "
                + "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
            )
        finally:
            peer.sock.close()

    def close(self) -> list[str]:
        """Stop accepting, end every handler, close every socket; returns the problems."""
        self._stop.set()
        self._acceptor.join(IO_TIMEOUT)
        self._listener.close()
        problems: list[str] = []
        with self._lock:
            pairs = list(zip(self._threads, self.peers, strict=True))
        for thread, peer in pairs:
            thread.join(2.0)
            if thread.is_alive():  # the client left it waiting: wake it up
                with contextlib.suppress(OSError):
                    peer.sock.shutdown(socket.SHUT_RDWR)
                thread.join(IO_TIMEOUT)
                if thread.is_alive():
                    problems.append(f"handler of connection {peer.index} did not finish")
            peer.sock.close()
        return self.errors + problems


@contextlib.contextmanager
def serving(
    make: Callable[[Callable[[P], None]], S],
) -> Iterator[Callable[[Callable[[P], None]], S]]:
    """Starts servers with ``make(handler)``; at the end closes them and fails the test on
    any handler's error. A test that failed closes them too (no threads left behind) and
    keeps its own failure."""
    servers: list[S] = []

    def start(handler: Callable[[P], None]) -> S:
        server = make(handler)
        servers.append(server)
        return server

    try:
        yield start
    except BaseException:
        for server in servers:
            server.close()
        raise
    problems = [problem for server in servers for problem in server.close()]
    if problems:
        pytest.fail("scripted server:\n" + "\n".join(problems), pytrace=False)
