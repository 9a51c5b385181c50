"""Byte-level mutations, libFuzzer-style, for the plain driver and the hypothesis tests.

:func:`mutate` applies a few random edits (bit flips, interesting bytes and integers, inserts,
deletions, duplicated ranges, numbers in text swapped for edge values, protocol tokens,
splices with another seed) to a seed. Given the same ``random.Random`` state it makes the same
input, so hypothesis can replay and shrink what it draws.

Example::

    >>> import random
    >>> len(mutate(b'{"a":1}', random.Random(0), [b"[]"])) > 0
    True
"""

from __future__ import annotations

import random
import re
import struct
from collections.abc import Callable, Sequence
from typing import Final

__all__ = ["mutate"]

_BYTES: Final = (0x00, 0x01, 0x0A, 0x0D, 0x20, 0x22, 0x30, 0x3A, 0x7F, 0x80, 0xC0, 0xFF)
_INTEGERS: Final = (0, 1, 0x7F, 0x80, 0xFF, 0x7FFF, 0xFFFF, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF)
#: Text that matters to one decoder or another: JSON, HTTP, SSE, numbers at the edges.
_TOKENS: Final = (
    b'"',
    b"{",
    b"}",
    b"[",
    b"]",
    b",",
    b":",
    b"null",
    b"true",
    b"-1",
    b"1e999",
    b"NaN",
    b"9" * 30,
    b"\\u0000",
    b"\\ud800",
    b"\r\n",
    b"\r\n\r\n",
    b"\n\n",
    b"\r",
    b"data:",
    b"chunked",
    b"gzip",
    b"Content-Length: ",
    b'"binary_data_size":',
    b'"shape":[',
    b'"datatype":"BYTES"',
    b"\xef\xbb\xbf",
    b"\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x01",  # an overlong varint
)
_NUMBERS: Final = (b"0", b"-1", b"1", b"65536", b"4294967296", b"9" * 25, b"1e308", b"0x10")
_DIGITS: Final = re.compile(rb"\d+")


def _flip_bit(data: bytearray, rng: random.Random, others: Sequence[bytes]) -> None:
    if data:
        data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)


def _set_byte(data: bytearray, rng: random.Random, others: Sequence[bytes]) -> None:
    if data:
        data[rng.randrange(len(data))] = (
            rng.choice(_BYTES) if rng.random() < 0.7 else rng.randrange(256)
        )


def _set_integer(data: bytearray, rng: random.Random, others: Sequence[bytes]) -> None:
    size = rng.choice((1, 2, 4))
    if len(data) < size:
        return
    value = rng.choice(_INTEGERS) & ((1 << (8 * size)) - 1)
    at = rng.randrange(len(data) - size + 1)
    data[at : at + size] = struct.pack({1: ">B", 2: ">H", 4: ">L"}[size], value)


def _insert(data: bytearray, rng: random.Random, others: Sequence[bytes]) -> None:
    at = rng.randrange(len(data) + 1)
    data[at:at] = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 9)))


def _token(data: bytearray, rng: random.Random, others: Sequence[bytes]) -> None:
    at = rng.randrange(len(data) + 1)
    data[at:at] = rng.choice(_TOKENS)


def _delete(data: bytearray, rng: random.Random, others: Sequence[bytes]) -> None:
    if data:
        start = rng.randrange(len(data))
        del data[start : start + rng.randrange(1, 17)]


def _duplicate(data: bytearray, rng: random.Random, others: Sequence[bytes]) -> None:
    if data:
        start = rng.randrange(len(data))
        piece = data[start : start + rng.randrange(1, 65)]
        at = rng.randrange(len(data) + 1)
        data[at:at] = piece * rng.choice((1, 1, 2, 8))


def _truncate(data: bytearray, rng: random.Random, others: Sequence[bytes]) -> None:
    if data:
        del data[rng.randrange(len(data)) :]


def _number(data: bytearray, rng: random.Random, others: Sequence[bytes]) -> None:
    found = list(_DIGITS.finditer(data))
    if found:
        match = rng.choice(found)
        data[match.start() : match.end()] = rng.choice(_NUMBERS)


def _splice(data: bytearray, rng: random.Random, others: Sequence[bytes]) -> None:
    if others:
        other = rng.choice(others)
        data[rng.randrange(len(data) + 1) :] = other[rng.randrange(len(other) + 1) :]


_MUTATIONS: Final[tuple[Callable[[bytearray, random.Random, Sequence[bytes]], None], ...]] = (
    _flip_bit,
    _set_byte,
    _set_integer,
    _insert,
    _token,
    _delete,
    _duplicate,
    _truncate,
    _number,
    _splice,
)


def mutate(seed: bytes, rng: random.Random, others: Sequence[bytes] = ()) -> bytes:
    """``seed`` with one to four random edits; ``others`` are inputs to splice with."""
    data = bytearray(seed)
    for _ in range(rng.choice((1, 1, 2, 3, 4))):
        rng.choice(_MUTATIONS)(data, rng, others)
    return bytes(data)
