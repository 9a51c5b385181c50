"""Saved HTTP messages (``curl -i``, ``curl -v --trace``-free captures, proxy dumps): the head
and the body, dechunked."""

from __future__ import annotations

from dataclasses import dataclass

from kserve_v2.cli._common import CLIError

__all__ = ["HTTPMessage", "looks_like_http", "parse_http_message"]

_STARTS = (b"HTTP/", b"POST ", b"PUT ", b"GET ")


@dataclass
class HTTPMessage:
    """A parsed message: its first line, headers (names lower-cased) and body."""

    first_line: str
    headers: dict[str, str]
    body: bytes

    @property
    def is_request(self) -> bool:
        return not self.first_line.startswith("HTTP/")


def looks_like_http(data: bytes) -> bool:
    return data.startswith(_STARTS)


def _dechunk(data: bytes) -> bytes:
    out, pos = bytearray(), 0
    while True:
        end = data.find(b"\r\n", pos)
        if end < 0:
            raise CLIError("chunked body ends in the middle of a chunk size")
        try:
            size = int(data[pos:end].split(b";")[0].strip() or b"0", 16)
        except ValueError:
            raise CLIError(f"bad chunk size {bytes(data[pos:end][:20])!r} in the body") from None
        pos = end + 2
        if size == 0:
            return bytes(out)
        out += data[pos : pos + size]
        pos += size + 2


def parse_http_message(data: bytes) -> HTTPMessage:
    """The last message of a capture (``curl -i`` prints ``100 Continue`` heads first)."""
    while True:
        for sep in (b"\r\n\r\n", b"\n\n"):
            cut = data.find(sep)
            if cut >= 0:
                break
        else:
            raise CLIError("the saved HTTP message has no blank line after its head")
        head, body = data[:cut].decode("latin-1"), data[cut + len(sep) :]
        lines = head.splitlines()
        if lines[0].startswith("HTTP/1.1 100") and looks_like_http(body):
            data = body
            continue
        headers = {}
        for line in lines[1:]:
            name, colon, value = line.partition(":")
            if colon:
                headers[name.strip().lower()] = value.strip()
        if "chunked" in headers.get("transfer-encoding", "").lower():
            body = _dechunk(body)
        elif "content-length" in headers and headers["content-length"].isdigit():
            body = body[: int(headers["content-length"])]
        return HTTPMessage(lines[0], headers, body)
