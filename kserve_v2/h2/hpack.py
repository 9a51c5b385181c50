"""HPACK, the header compression of HTTP/2 (RFC 7541), without I/O.

* :class:`Encoder` turns a header list into a header block. It never adds to the dynamic
  table (so the peer's ``SETTINGS_HEADER_TABLE_SIZE`` never matters to it) and never uses
  Huffman coding: a client's request headers are few and mostly the same on every call,
  CPU matters more than bytes, and encoded fields are cached.
* :class:`Decoder` implements all of RFC 7541 for the peer's blocks: static and dynamic
  table with eviction, table size updates, every literal form and Huffman coding. It is
  total: malformed input of any kind raises :class:`HPACKError` (the connection must then
  be closed with ``COMPRESSION_ERROR``), with bounded work and memory for every block.
* :func:`huffman_encode` / :func:`huffman_decode`: the string code of Appendix B.

Names and values are ``str`` decoded and encoded as latin-1, so every octet round-trips.

The decoder is tuned for gRPC responses: after the first call on a connection a server's
header and trailer blocks are mostly one-octet references to the tables, so those take a
short path, and the Huffman decoder runs an octet-at-a-time state machine whose rows are
built on first use, behind a small cache of decoded strings.

Example::

    from kserve_v2.h2.hpack import Decoder, Encoder

    block = Encoder().encode([(":method", "POST"), ("content-type", "application/grpc")])
    assert Decoder().decode(block) == [(":method", "POST"), ("content-type", "application/grpc")]
"""

from __future__ import annotations

from collections import deque
from collections.abc import Container, Iterable
from typing import Final

from kserve_v2.errors import InvalidInputError, ProtocolError
from kserve_v2.h2._huffman import CODES, EOS

__all__ = [
    "DEFAULT_TABLE_SIZE",
    "ENTRY_OVERHEAD",
    "STATIC_TABLE",
    "Decoder",
    "Encoder",
    "HPACKError",
    "huffman_decode",
    "huffman_encode",
]

#: The default dynamic table size of HTTP/2 (SETTINGS_HEADER_TABLE_SIZE).
DEFAULT_TABLE_SIZE: Final = 4096
#: What an entry costs in the dynamic table and in the header list size, besides its octets.
ENTRY_OVERHEAD: Final = 32

#: RFC 7541 Appendix A; the entry at index i (1-based) is ``STATIC_TABLE[i - 1]``.
STATIC_TABLE: Final[tuple[tuple[str, str], ...]] = (
    (":authority", ""),
    (":method", "GET"),
    (":method", "POST"),
    (":path", "/"),
    (":path", "/index.html"),
    (":scheme", "http"),
    (":scheme", "https"),
    (":status", "200"),
    (":status", "204"),
    (":status", "206"),
    (":status", "304"),
    (":status", "400"),
    (":status", "404"),
    (":status", "500"),
    ("accept-charset", ""),
    ("accept-encoding", "gzip, deflate"),
    ("accept-language", ""),
    ("accept-ranges", ""),
    ("accept", ""),
    ("access-control-allow-origin", ""),
    ("age", ""),
    ("allow", ""),
    ("authorization", ""),
    ("cache-control", ""),
    ("content-disposition", ""),
    ("content-encoding", ""),
    ("content-language", ""),
    ("content-length", ""),
    ("content-location", ""),
    ("content-range", ""),
    ("content-type", ""),
    ("cookie", ""),
    ("date", ""),
    ("etag", ""),
    ("expect", ""),
    ("expires", ""),
    ("from", ""),
    ("host", ""),
    ("if-match", ""),
    ("if-modified-since", ""),
    ("if-none-match", ""),
    ("if-range", ""),
    ("if-unmodified-since", ""),
    ("last-modified", ""),
    ("link", ""),
    ("location", ""),
    ("max-forwards", ""),
    ("proxy-authenticate", ""),
    ("proxy-authorization", ""),
    ("range", ""),
    ("referer", ""),
    ("refresh", ""),
    ("retry-after", ""),
    ("server", ""),
    ("set-cookie", ""),
    ("strict-transport-security", ""),
    ("transfer-encoding", ""),
    ("user-agent", ""),
    ("vary", ""),
    ("via", ""),
    ("www-authenticate", ""),
)
_STATIC_COUNT: Final = len(STATIC_TABLE)
# 1-based, so that an index needs no arithmetic on the hot path; slot 0 is never read.
_STATIC: Final = (("", ""), *STATIC_TABLE)

# An integer may take this many continuation octets: values up to 2**28 plus the prefix,
# far above any table size or string length a header block can hold. Longer encodings
# (also zero-padded ones) are an "implementation limit" error (RFC 7541 section 5.1).
_MAX_INT_CONTINUATIONS: Final = 4


class HPACKError(ProtocolError):
    """A header block that cannot be decoded (the connection must be closed with
    COMPRESSION_ERROR: the peer's and our dynamic tables may no longer agree)."""


# --------------------------------------------------------------------------------- Huffman


def huffman_encode(data: bytes) -> bytes:
    """The Huffman code of ``data`` (RFC 7541 section 5.2), padded with the start of EOS.

    Example::

        assert huffman_encode(b"no-cache") == bytes.fromhex("a8eb10649cbf")
    """
    out = bytearray()
    bits = 0  # pending bits, right-aligned; at most 7 + 30 of them
    count = 0
    codes = CODES
    for octet in data:
        code, length = codes[octet]
        bits = (bits << length) | code
        count += length
        while count >= 8:
            count -= 8
            out.append((bits >> count) & 0xFF)
        bits &= (1 << count) - 1
    if count:
        out.append(((bits << (8 - count)) | (0xFF >> count)) & 0xFF)
    return bytes(out)


def _build_tree() -> tuple[list[list[int]], frozenset[int]]:
    """Internal nodes of the code tree (root 0): ``children[node][bit]`` is another node,
    or ``~symbol`` for a leaf. Also the nodes where a string may end: the root, and the
    all-ones path of up to 7 bits (padding is the most significant bits of EOS)."""
    unset = -(1 << 20)
    children = [[unset, unset]]
    for symbol, (code, length) in enumerate(CODES):
        node = 0
        for shift in range(length - 1, 0, -1):
            bit = (code >> shift) & 1
            child = children[node][bit]
            if child == unset:
                child = len(children)
                children.append([unset, unset])
                children[node][bit] = child
            elif child < 0:
                raise AssertionError(f"Huffman code of {symbol} has a prefix that is a code")
            node = child
        if children[node][code & 1] != unset:
            raise AssertionError(f"Huffman code of {symbol} is a prefix of another code")
        children[node][code & 1] = ~symbol
    if any(unset in pair for pair in children):
        raise AssertionError("the Huffman code is not complete")
    accepting = [0]
    for _ in range(7):
        accepting.append(children[accepting[-1]][1])
    return children, frozenset(accepting)


_CHILDREN, _ACCEPTING = _build_tree()
# After EOS was decoded: every octet leads back here and nothing is accepted.
_DEAD: Final = len(_CHILDREN)


class _Rows(dict[int, tuple[tuple[int, bytes], ...]]):
    """state -> the 256 transitions ``(next state, octets emitted)`` of the octet-at-a-time
    decoder. A row is built the first time its state is reached (about 0.6 ms each); typical
    header text touches a few dozen of the 257 states, so import stays cheap."""

    def __missing__(self, state: int) -> tuple[tuple[int, bytes], ...]:
        children = _CHILDREN
        row = []
        for octet in range(256):
            node = state
            emitted = bytearray()
            if node != _DEAD:
                for shift in range(7, -1, -1):
                    child = children[node][(octet >> shift) & 1]
                    if child >= 0:
                        node = child
                    elif ~child == EOS:
                        node = _DEAD
                        break
                    else:
                        emitted.append(~child)
                        node = 0
            row.append((node, bytes(emitted)))
        transitions = tuple(row)
        self[state] = transitions
        return transitions


_ROWS: Final = _Rows()


def huffman_decode(data: bytes | bytearray | memoryview) -> bytes:
    """Decode a Huffman-coded string; :class:`HPACKError` if it contains EOS or its padding
    is not 0-7 one bits.

    Example::

        assert huffman_decode(bytes.fromhex("a8eb10649cbf")) == b"no-cache"
    """
    if type(data) is not bytes:
        data = bytes(data)  # a memoryview of another format would iterate over wider items
    rows = _ROWS
    state = 0
    out = bytearray()
    for octet in data:
        state, emitted = rows[state][octet]
        out += emitted
    if state not in _ACCEPTING:
        if state == _DEAD:
            raise HPACKError("Huffman-coded string contains EOS")
        raise HPACKError("Huffman-coded string ends in a partial code or in more than 7 bits")
    return bytes(out)


# Decoded Huffman strings by their code: gRPC servers send the same few values (content
# types, statuses, grpc-encoding) over and over. Shared by all decoders (the code has no
# state); cleared when full rather than evicting one by one, which keeps it thread-safe.
_HUFFMAN_CACHE: Final[dict[bytes, str]] = {}
_HUFFMAN_CACHE_ENTRIES: Final = 512
_HUFFMAN_CACHE_MAX_OCTETS: Final = 64


def _huffman_text(raw: bytes) -> str:
    text = _HUFFMAN_CACHE.get(raw)
    if text is None:
        text = huffman_decode(raw).decode("latin-1")
        if len(raw) <= _HUFFMAN_CACHE_MAX_OCTETS:
            if len(_HUFFMAN_CACHE) >= _HUFFMAN_CACHE_ENTRIES:
                _HUFFMAN_CACHE.clear()
            _HUFFMAN_CACHE[raw] = text
    return text


# --------------------------------------------------------------------------------- decoder


def _continue_int(data: bytes, pos: int, end: int, value: int) -> tuple[int, int]:
    """The rest of an integer whose prefix was all ones (``value``): continuation octets
    from ``pos``; returns the value and the position after it."""
    shift = 0
    for _ in range(_MAX_INT_CONTINUATIONS):
        if pos >= end:
            raise HPACKError(f"header block ends inside an integer (offset {pos})")
        octet = data[pos]
        pos += 1
        value += (octet & 0x7F) << shift
        if not octet & 0x80:
            return value, pos
        shift += 7
    raise HPACKError(
        f"integer longer than {_MAX_INT_CONTINUATIONS + 1} octets in the header block "
        f"(offset {pos - 1})"
    )


def _read_string(data: bytes, pos: int, end: int) -> tuple[str, int]:
    """A string literal at ``pos``; returns it and the position after it."""
    if pos >= end:
        raise HPACKError(f"header block ends where a string literal should start (offset {pos})")
    first = data[pos]
    length = first & 0x7F
    pos += 1
    if length == 0x7F:
        length, pos = _continue_int(data, pos, end, length)
    stop = pos + length
    if stop > end:
        raise HPACKError(
            f"string literal of {length} octets at offset {pos} overruns the header block "
            f"of {end} octets"
        )
    if first & 0x80:
        return _huffman_text(data[pos:stop]), stop
    return data[pos:stop].decode("latin-1"), stop


#: Bounds of a decoder's cache of decoded blocks (see Decoder.decode): at most this many
#: blocks of at most this many octets each.
_DECODED_ENTRIES: Final = 64
_DECODED_MAX_OCTETS: Final = 512


class Decoder:
    """Decodes the header blocks of one connection (it owns the peer encoder's dynamic table).

    ``max_table_size`` is the SETTINGS_HEADER_TABLE_SIZE this side advertises: the dynamic
    table starts at that size, and a size update above it is an error. Lowering it (once
    the peer acknowledged the new setting) makes the next block start with a size update,
    as RFC 7541 section 4.2 requires of the peer's encoder. ``max_header_list_size`` bounds
    the decoded size of one block (RFC 9113: octets of name and value plus 32 per field).

    After an :class:`HPACKError` the dynamic table may have taken part of the block: the
    decoder must not be used again (nor the connection).

    Example::

        decoder = Decoder()
        decoder.decode(bytes.fromhex("88"))  # [(":status", "200")]
    """

    def __init__(
        self,
        max_table_size: int = DEFAULT_TABLE_SIZE,
        max_header_list_size: int = 1 << 20,
    ) -> None:
        self._max_table_size = _non_negative(max_table_size, "max_table_size")
        self.max_header_list_size = _non_negative(max_header_list_size, "max_header_list_size")
        # Newest first: dynamic index 62 is _table[0].
        self._table: deque[tuple[str, str]] = deque()
        self._size = 0
        self._capacity = self._max_table_size
        self._update_required = False
        # Decoded blocks that left the dynamic table as it was (a warm connection's blocks
        # are mostly such: indexed fields), by their octets, with their list size. Valid
        # while the table stays as it is: every change of the table empties it.
        self._decoded: dict[bytes, tuple[tuple[tuple[str, str], ...], int]] = {}

    @property
    def max_table_size(self) -> int:
        """The largest dynamic table size the peer may choose (our SETTINGS_HEADER_TABLE_SIZE)."""
        return self._max_table_size

    @max_table_size.setter
    def max_table_size(self, value: int) -> None:
        self._max_table_size = _non_negative(value, "max_table_size")
        if self._capacity > self._max_table_size:
            self._update_required = True
            self._decoded.clear()  # the next block must start with a size update

    @property
    def dynamic_table(self) -> tuple[tuple[str, str], ...]:
        """The dynamic table, newest entry (index 62) first."""
        return tuple(self._table)

    @property
    def dynamic_table_size(self) -> int:
        """The size of the dynamic table's entries (octets plus 32 each)."""
        return self._size

    @property
    def dynamic_table_capacity(self) -> int:
        """The dynamic table's current maximum size, as last set by the peer's encoder."""
        return self._capacity

    def decode(self, block: bytes | bytearray | memoryview) -> list[tuple[str, str]]:
        """Decode one complete header block (the HEADERS and CONTINUATION payloads joined).

        Returns the ``(name, value)`` pairs in order. Raises :class:`HPACKError` for any
        malformed block: unknown indices, truncation, oversized integers, Huffman errors, a
        misplaced or too large table size update, or a header list over
        ``max_header_list_size``.

        Example::

            Decoder().decode(bytes.fromhex("8286"))  # [(":method", "GET"), (":scheme", "http")]
        """
        if type(block) is bytes:
            data = block
        elif isinstance(block, (bytearray, memoryview)):
            data = bytes(block)
        else:
            raise TypeError(f"a header block is bytes-like, not {type(block).__name__}")
        limit = self.max_header_list_size
        known = self._decoded.get(data)
        if known is not None and known[1] <= limit:
            return list(known[0])
        end = len(data)
        table = self._table
        static = _STATIC
        decoded = self._decoded
        headers: list[tuple[str, str]] = []
        total = 0
        pos = 0
        if self._update_required and (not end or (data[0] & 0xE0) != 0x20):
            raise HPACKError(
                "header block does not start with the dynamic table size update that the "
                f"lowered limit of {self._max_table_size} requires"
            )
        while pos < end:
            first = data[pos]
            pos += 1
            if first & 0x80:  # indexed field: the common case once the tables are warm
                index = first & 0x7F
                if index == 0x7F:
                    index, pos = _continue_int(data, pos, end, index)
                if index <= _STATIC_COUNT:
                    if not index:
                        raise HPACKError(f"indexed header field with index 0 (offset {pos - 1})")
                    field = static[index]
                elif index - 62 < len(table):
                    field = table[index - 62]
                else:
                    raise self._bad_index(index, pos)
            elif first & 0x40:  # literal with incremental indexing
                index = first & 0x3F
                if index == 0x3F:
                    index, pos = _continue_int(data, pos, end, index)
                if index:
                    name = self._name(index, pos)
                else:
                    name, pos = _read_string(data, pos, end)
                value, pos = _read_string(data, pos, end)
                field = (name, value)
                self._insert(field)
            elif first & 0x20:  # dynamic table size update
                if headers:
                    raise HPACKError(
                        f"dynamic table size update after a header field (offset {pos - 1})"
                    )
                size = first & 0x1F
                if size == 0x1F:
                    size, pos = _continue_int(data, pos, end, size)
                if size > self._max_table_size:
                    raise HPACKError(
                        f"dynamic table size update to {size} exceeds the limit of "
                        f"{self._max_table_size} (offset {pos - 1})"
                    )
                self._capacity = size
                self._evict(size)
                self._update_required = False
                self._decoded = {}
                continue
            else:  # literal without indexing (0000) or never indexed (0001)
                index = first & 0x0F
                if index == 0x0F:
                    index, pos = _continue_int(data, pos, end, index)
                if index:
                    name = self._name(index, pos)
                else:
                    name, pos = _read_string(data, pos, end)
                value, pos = _read_string(data, pos, end)
                field = (name, value)
            total += len(field[0]) + len(field[1]) + ENTRY_OVERHEAD
            if total > limit:
                raise HPACKError(
                    f"header list is larger than the limit of {limit} octets "
                    f"(name and value octets plus {ENTRY_OVERHEAD} per field)"
                )
            headers.append(field)
        if decoded is self._decoded and end <= _DECODED_MAX_OCTETS:
            # The table did not change (a change replaces the cache), so the same octets
            # decode to the same list while it stays so.
            if len(decoded) >= _DECODED_ENTRIES:
                decoded.clear()
            decoded[data] = (tuple(headers), total)
        return headers

    def _name(self, index: int, pos: int) -> str:
        if index <= _STATIC_COUNT:
            return _STATIC[index][0]
        if index - 62 < len(self._table):
            return self._table[index - 62][0]
        raise self._bad_index(index, pos)

    def _bad_index(self, index: int, pos: int) -> HPACKError:
        return HPACKError(
            f"header field index {index} is beyond the {_STATIC_COUNT} static and "
            f"{len(self._table)} dynamic table entries (before offset {pos})"
        )

    def _insert(self, field: tuple[str, str]) -> None:
        self._decoded = {}
        size = len(field[0]) + len(field[1]) + ENTRY_OVERHEAD
        if size > self._capacity:
            # Not an error: the entry empties the table and is not added (section 4.4).
            self._table.clear()
            self._size = 0
            return
        self._evict(self._capacity - size)
        self._table.appendleft(field)
        self._size += size

    def _evict(self, room: int) -> None:
        """Drop the oldest entries until the table's size is at most ``room``."""
        table = self._table
        while self._size > room:
            name, value = table.pop()
            self._size -= len(name) + len(value) + ENTRY_OVERHEAD


def _non_negative(value: int, what: str) -> int:
    if type(value) is not int or value < 0:
        raise InvalidInputError(f"{what} must be a non-negative int, not {value!r}", value=value)
    return value


# --------------------------------------------------------------------------------- encoder

_STATIC_FIELD_INDEX: Final[dict[tuple[str, str], int]] = {}
_STATIC_NAME_INDEX: Final[dict[str, int]] = {}
for _index, _field in enumerate(STATIC_TABLE, 1):
    _STATIC_FIELD_INDEX.setdefault(_field, _index)
    _STATIC_NAME_INDEX.setdefault(_field[0], _index)
del _index, _field

# Encoded fields by (name, value): request headers repeat on every call. Shared by all
# encoders (the encoder keeps no state); sensitive fields are never kept here.
_FIELD_CACHE: Final[dict[tuple[str, str], bytes]] = {}
_FIELD_CACHE_ENTRIES: Final = 512
_FIELD_CACHE_MAX_OCTETS: Final = 256


def _encode_int(value: int, prefix_bits: int, flags: int) -> bytes:
    """An integer with an N-bit prefix (RFC 7541 section 5.1), ``flags`` in the high bits."""
    limit = (1 << prefix_bits) - 1
    if value < limit:
        return bytes((flags | value,))
    out = bytearray((flags | limit,))
    value -= limit
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _latin1(text: object, name: object, what: str) -> bytes:
    if not isinstance(text, str):
        raise InvalidInputError(
            f"header {name!r}: the {what} must be a str, not {type(text).__name__}", value=text
        )
    try:
        return text.encode("latin-1")
    except UnicodeEncodeError as exc:
        raise InvalidInputError(
            f"header {name!r}: the {what} has a character beyond U+00FF at position "
            f"{exc.start}, which an HTTP/2 header field cannot carry",
            value=text,
        ) from exc


def _encode_field(name: str, value: str, never_indexed: bool) -> bytes:
    name_octets = _latin1(name, name, "name")
    value_octets = _latin1(value, name, "value")
    if not never_indexed:
        index = _STATIC_FIELD_INDEX.get((name, value))
        if index is not None:
            return bytes((0x80 | index,))
    flags = 0x10 if never_indexed else 0x00
    name_index = _STATIC_NAME_INDEX.get(name)
    if name_index is not None:
        head = _encode_int(name_index, 4, flags)
    else:
        head = bytes((flags,)) + _encode_int(len(name_octets), 7, 0) + name_octets
    return head + _encode_int(len(value_octets), 7, 0) + value_octets


class Encoder:
    """Encodes header lists into header blocks, statelessly.

    A field equal to a static table entry becomes a one-octet reference; any other field is
    a literal "without indexing" (its name a static reference when the table has it),
    never Huffman-coded. Nothing is added to the dynamic table, so the peer's
    SETTINGS_HEADER_TABLE_SIZE never matters and blocks may be encoded in any order.

    Example::

        Encoder().encode([(":method", "POST"), ("te", "trailers")])
        # b'\\x83\\x00\\x02te\\x08trailers'
    """

    def encode(
        self, headers: Iterable[tuple[str, str]], *, sensitive: Container[str] = ()
    ) -> bytes:
        """The header block for these ``(name, value)`` pairs, in order.

        Names must be lower-case already. Fields whose name is in ``sensitive`` (e.g.
        ``{"authorization"}``) use the "never indexed" literal, which tells intermediaries
        not to compress them either (RFC 7541 section 7.1), and are not cached. Raises
        :class:`~kserve_v2.errors.InvalidInputError` for a name or value that is not a
        ``str`` or has a character beyond U+00FF.

        Example::

            Encoder().encode([("authorization", "Bearer x")], sensitive={"authorization"})
            # b'\\x1f\\x08\\x08Bearer x'
        """
        cache = _FIELD_CACHE
        parts = []
        for name, value in headers:
            if sensitive and name in sensitive:
                parts.append(_encode_field(name, value, True))
                continue
            try:
                encoded = cache.get((name, value))
            except TypeError:  # unhashable: let _encode_field name the problem
                encoded = None
            if encoded is None:
                encoded = _encode_field(name, value, False)
                if len(encoded) <= _FIELD_CACHE_MAX_OCTETS:
                    if len(cache) >= _FIELD_CACHE_ENTRIES:
                        cache.clear()
                    cache[(name, value)] = encoded
            parts.append(encoded)
        return b"".join(parts)
