"""Local HTTP/1.1 test servers for the transport tests: raw sockets, one thread per connection.

The servers speak just enough HTTP to exercise the client: they parse requests themselves, so
that a test can answer with exactly the bytes it wants (malformed ones included).
"""

from __future__ import annotations

import contextlib
import datetime
import ipaddress
import socket
import ssl
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Request:
    method: str
    target: str
    headers: dict[str, str]
    body: bytearray


class ServerConn:
    """The server side of one connection."""

    def __init__(self, sock: socket.socket, server: RawServer) -> None:
        self.sock = sock
        self.server = server
        self.buf = bytearray()

    def _fill(self) -> bool:
        data = self.sock.recv(65536)
        if not data:
            return False
        self.buf += data
        return True

    def read_request(self) -> Request | None:
        """Read one request; ``None`` when the client closed the connection."""
        try:
            while b"\r\n\r\n" not in self.buf:
                if not self._fill():
                    return None
        except (ConnectionError, OSError):
            return None
        idx = self.buf.index(b"\r\n\r\n")
        head = bytes(self.buf[:idx]).decode("latin-1").split("\r\n")
        del self.buf[: idx + 4]
        method, target, _version = head[0].split(" ")
        headers: dict[str, str] = {}
        for line in head[1:]:
            name, _, value = line.partition(":")
            assert name.lower() not in headers, f"duplicate header {name}"
            headers[name.lower()] = value.strip()
        assert "transfer-encoding" not in headers
        length = int(headers.get("content-length", "0"))
        body = bytearray(length)
        got = min(length, len(self.buf))
        body[:got] = self.buf[:got]
        del self.buf[:got]
        view = memoryview(body)
        while got < length:
            n = self.sock.recv_into(view[got:])
            if not n:
                return None
            got += n
        request = Request(method, target, headers, body)
        self.server.requests.append(request)
        return request

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def sleep(self, seconds: float) -> None:
        """Sleep, but wake up at once when the server shuts down (keeps teardown fast)."""
        self.server.stopping.wait(seconds)

    def respond(
        self,
        status: int = 200,
        body: bytes | bytearray = b"",
        headers: Iterable[tuple[str, str]] = (),
        reason: str = "OK",
    ) -> None:
        head = [f"HTTP/1.1 {status} {reason}", f"Content-Length: {len(body)}"]
        head += [f"{k}: {v}" for k, v in headers]
        self.sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + bytes(body))

    def respond_chunked(
        self, pieces: Iterable[bytes], headers: Iterable[tuple[str, str]] = ()
    ) -> None:
        head = ["HTTP/1.1 200 OK", "Transfer-Encoding: chunked"]
        head += [f"{k}: {v}" for k, v in headers]
        self.sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode("latin-1"))
        for piece in pieces:
            if piece:
                self.sock.sendall(b"%x\r\n%s\r\n" % (len(piece), piece))
        self.sock.sendall(b"0\r\n\r\n")


Handler = Callable[[ServerConn], None]


def keep_alive(app: Callable[[Request, ServerConn], None]) -> Handler:
    """A connection handler that serves requests until the client goes away."""

    def handler(conn: ServerConn) -> None:
        while True:
            request = conn.read_request()
            if request is None:
                return
            app(request, conn)

    return handler


def echo_app(request: Request, conn: ServerConn) -> None:
    """Answers with the request body and a few facts about the request in headers."""
    conn.respond(
        200,
        bytes(request.body),
        [
            ("X-Method", request.method),
            ("X-Target", request.target),
            ("X-Conn", str(id(conn))),
        ],
    )


@dataclass
class RawServer:
    """A threaded TCP server on 127.0.0.1 with a free port; optionally TLS."""

    handler: Handler
    ssl_context: ssl.SSLContext | None = None
    connections: int = 0
    requests: list[Request] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.2)
        self.port = self._listener.getsockname()[1]
        self._socks: list[socket.socket] = []
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.stopping = self._stop
        self._accepter = threading.Thread(target=self._accept_loop, daemon=True)
        self._accepter.start()

    @property
    def url(self) -> str:
        return f"{'https' if self.ssl_context else 'http'}://127.0.0.1:{self.port}"

    def _accept_loop(self) -> None:
        while not self._stop.is_set():
            try:
                sock, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with self._lock:
                self.connections += 1
                self._socks.append(sock)
            thread = threading.Thread(target=self._serve, args=(sock,), daemon=True)
            with self._lock:
                self._threads.append(thread)
            thread.start()

    def _serve(self, sock: socket.socket) -> None:
        sock.settimeout(30)
        try:
            if self.ssl_context is not None:
                try:
                    tls = self.ssl_context.wrap_socket(sock, server_side=True)
                except (ssl.SSLError, OSError):
                    return
                with self._lock:
                    self._socks.append(tls)
                sock = tls
            self.handler(ServerConn(sock, self))
        except (ConnectionError, OSError, ssl.SSLError):
            pass
        finally:
            sock.close()

    def close(self) -> None:
        self._stop.set()
        self._listener.close()
        self._accepter.join()
        with self._lock:
            socks = list(self._socks)
            threads = list(self._threads)
        for sock in socks:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
        for thread in threads:
            thread.join(5)

    def __enter__(self) -> RawServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# -- certificates -------------------------------------------------------------------------------


@dataclass
class Certs:
    ca_file: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    other_ca_file: Path


def make_certs(directory: Path) -> Certs:
    """A CA, a server certificate for 127.0.0.1/localhost and a client certificate."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.timezone.utc)

    def name(cn: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])

    def write_key(key: ec.EllipticCurvePrivateKey, path: Path) -> None:
        path.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )

    def make_ca(cn: str) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
        key = ec.generate_private_key(ec.SECP256R1())
        cert = (
            x509.CertificateBuilder()
            .subject_name(name(cn))
            .issuer_name(name(cn))
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=30))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(
                x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False
            )
            .sign(key, hashes.SHA256())
        )
        return key, cert

    def make_leaf(
        ca_key: ec.EllipticCurvePrivateKey,
        ca_cert: x509.Certificate,
        cn: str,
        usage: x509.ObjectIdentifier,
        san: list[x509.GeneralName] | None,
    ) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
        key = ec.generate_private_key(ec.SECP256R1())
        builder = (
            x509.CertificateBuilder()
            .subject_name(name(cn))
            .issuer_name(ca_cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=30))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
            .add_extension(
                x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False
            )
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
                critical=False,
            )
        )
        if san:
            builder = builder.add_extension(x509.SubjectAlternativeName(san), critical=False)
        return key, builder.sign(ca_key, hashes.SHA256())

    pem = serialization.Encoding.PEM
    ca_key, ca_cert = make_ca("kserve-v2 test CA")
    server_key, server_cert = make_leaf(
        ca_key,
        ca_cert,
        "localhost",
        ExtendedKeyUsageOID.SERVER_AUTH,
        [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))],
    )
    client_key, client_cert = make_leaf(
        ca_key, ca_cert, "client", ExtendedKeyUsageOID.CLIENT_AUTH, None
    )
    _, other_ca = make_ca("some other CA")
    certs = Certs(
        ca_file=directory / "ca.pem",
        server_cert=directory / "server.pem",
        server_key=directory / "server.key",
        client_cert=directory / "client.pem",
        client_key=directory / "client.key",
        other_ca_file=directory / "other-ca.pem",
    )
    certs.ca_file.write_bytes(ca_cert.public_bytes(pem))
    certs.other_ca_file.write_bytes(other_ca.public_bytes(pem))
    certs.server_cert.write_bytes(server_cert.public_bytes(pem))
    write_key(server_key, certs.server_key)
    certs.client_cert.write_bytes(client_cert.public_bytes(pem))
    write_key(client_key, certs.client_key)
    return certs


def server_ssl_context(certs: Certs, *, require_client_cert: bool = False) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(certs.server_cert, certs.server_key)
    if require_client_cert:
        ctx.verify_mode = ssl.CERT_REQUIRED
        ctx.load_verify_locations(certs.ca_file)
    return ctx
