"""Tiny HTTP/1.1 servers for tests: a ``BaseHTTPRequestHandler`` served on loopback by a
thread (stand-ins for servers that are not, or only partly, KServe v2 ones).

Example::

    class Handler(JSONHandler):
        def do_GET(self) -> None:
            self._send(200, b'{"name": "stub"}')

    with serving(Handler) as url:
        ...
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class JSONHandler(BaseHTTPRequestHandler):
    """A quiet keep-alive handler with :meth:`_send` (a whole response, JSON by default)."""

    protocol_version = "HTTP/1.1"

    def _send(self, status: int, body: bytes = b"", content_type: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@contextlib.contextmanager
def serving(handler: Callable[..., BaseHTTPRequestHandler]) -> Iterator[str]:
    """Serve ``handler`` (a class, or a ``functools.partial`` of one) on a free loopback
    port; its ``http://127.0.0.1:PORT`` URL, until the block ends."""
    server: ThreadingHTTPServer = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    address: Any = server.server_address
    try:
        yield f"http://127.0.0.1:{address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
