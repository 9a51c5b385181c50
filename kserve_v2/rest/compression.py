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
    compressor = zlib.compressobj(level, zlib.DEFLATED, wbits)
    chunks = [compressor.compress(part) for part in parts]
    chunks.append(compressor.flush())
    return b"".join(chunks)


def decompress(body: BytesLike, encoding: str, *, max_size: int | None = None) -> bytes:
    """Undo a ``Content-Encoding``; ``identity`` (or empty) returns the body unchanged.

    A body that does not decode, or that would inflate past ``max_size`` bytes, raises
    :class:`ProtocolError`.
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
        decompressor = zlib.decompressobj(bits)
        try:
            out = decompressor.decompress(body, max_size or 0)
        except zlib.error as exc:
            last = exc
            continue
        if decompressor.unconsumed_tail:
            raise ProtocolError(
                f"{coding} body inflates past the {max_size}-byte limit", value=max_size
            )
        if not decompressor.eof:
            raise ProtocolError(f"{coding} body is truncated")
        return out
    raise ProtocolError(f"{coding} body does not decode: {last}") from last
