"""gzip and deflate for request and response bodies (``Content-Encoding``).

Example::

    >>> from kserve_v2.rest.compression import compress, decompress
    >>> decompress(compress([b"abc", b"def"], "gzip"), "gzip")
    b'abcdef'
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from typing import Final

from kserve_v2.datatypes import BytesLike
from kserve_v2.errors import InvalidInputError, ProtocolError

__all__ = ["SUPPORTED_ENCODINGS", "compress", "decompress"]

#: Content codings this library can produce and read.
SUPPORTED_ENCODINGS: Final = ("gzip", "deflate")

# zlib's wbits: 16+MAX_WBITS selects the gzip container, MAX_WBITS the zlib container that HTTP
# calls "deflate"; -MAX_WBITS is a raw deflate stream, which some servers send for "deflate".
_WBITS: Final = {"gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}


def compress(parts: Sequence[BytesLike], encoding: str, level: int = 6) -> bytes:
    """Compress a body given as buffers, without joining them first."""
    wbits = _WBITS.get(encoding.lower())
    if wbits is None:
        raise InvalidInputError(
            f"unsupported compression {encoding!r}; use one of {SUPPORTED_ENCODINGS}",
            value=encoding,
        )
    if isinstance(level, bool) or not isinstance(level, int) or not -1 <= level <= 9:
        raise InvalidInputError(
            f"compression level must be an integer from -1 to 9, got {level!r}", value=level
        )
    compressor = zlib.compressobj(level, zlib.DEFLATED, wbits)
    chunks = [compressor.compress(part) for part in parts]
    chunks.append(compressor.flush())
    return b"".join(chunks)


def decompress(body: BytesLike, encoding: str, *, max_size: int | None = None) -> bytes:
    """Undo a ``Content-Encoding``; ``identity`` (or empty) returns the body unchanged.

    A gzip body may hold several members (RFC 1952); they decode to their concatenation.
    A body that does not decode, has bytes after its end, or would inflate past ``max_size``
    bytes raises :class:`ProtocolError`.
    """
    coding = encoding.strip().lower()
    if coding in ("", "identity"):
        return bytes(body)
    wbits = _WBITS.get(coding)
    if wbits is None:
        raise ProtocolError(f"unsupported Content-Encoding {encoding!r}", value=encoding)
    candidates = (wbits, -zlib.MAX_WBITS) if coding == "deflate" else (wbits,)
    last: zlib.error | None = None
    for bits in candidates:
        try:
            return _inflate(body, coding, bits, max_size)
        except zlib.error as exc:
            last = exc
    raise ProtocolError(f"{coding} body does not decode: {last}") from last


def _inflate(body: BytesLike, coding: str, wbits: int, max_size: int | None) -> bytes:
    """Inflate every stream of ``body`` (several only for gzip); zlib.error if one is broken."""
    out: list[bytes] = []
    produced = 0
    rest: BytesLike = body
    while True:
        decompressor = zlib.decompressobj(wbits)
        if max_size is None:
            chunk = decompressor.decompress(rest)
        else:
            # One byte of room past the limit tells "exactly max_size" from "more".
            chunk = decompressor.decompress(rest, max_size - produced + 1)
            if produced + len(chunk) > max_size:
                raise ProtocolError(
                    f"{coding} body inflates past the {max_size}-byte limit", value=max_size
                )
        out.append(chunk)
        produced += len(chunk)
        if not decompressor.eof:
            raise ProtocolError(f"{coding} body is truncated")
        rest = decompressor.unused_data
        if not rest:
            return b"".join(out)
        if coding != "gzip":
            raise ProtocolError(
                f"{coding} body has {len(rest)} byte(s) after the end of its stream",
                value=len(rest),
            )
