"""kserve_v2.h2.hpack: RFC 7541's examples, a reference model of the dynamic table, totality.

The oracles are the RFC itself (Appendix C, byte for byte), a bit-at-a-time Huffman decoder
written here from Appendix B, and a test-only encoder that emits every representation the
RFC allows while a plain list models the dynamic table it implies.
"""

from __future__ import annotations

import itertools
import time
import tracemalloc
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kserve_v2.errors import InvalidInputError, ProtocolError
from kserve_v2.h2 import hpack
from kserve_v2.h2._huffman import CODES, EOS
from kserve_v2.h2.hpack import (
    STATIC_TABLE,
    Decoder,
    Encoder,
    HPACKError,
    huffman_decode,
    huffman_encode,
)

# Property tests run on a small shared machine: no deadline, sizes kept small.
FAST = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])

Field = tuple[str, str]
# st.DrawFn, or st.DataObject.draw for tests that draw as they go.
Draw = Callable[[st.SearchStrategy[Any]], Any]


def h(text: str) -> bytes:
    """Bytes from the RFC's hex dumps (spaces and line breaks ignored)."""
    return bytes.fromhex("".join(text.split()))


def entry_size(field: Field) -> int:
    return len(field[0]) + len(field[1]) + 32


# -------------------------------------------------------------------------- static table

# Appendix A, transcribed again: the names in order, then the entries that have a value.
_RFC_STATIC_NAMES_TEXT = """
    :authority :method :method :path :path :scheme :scheme :status :status :status :status
    :status :status :status accept-charset accept-encoding accept-language accept-ranges accept
    access-control-allow-origin age allow authorization cache-control content-disposition
    content-encoding content-language content-length content-location content-range
    content-type cookie date etag expect expires from host if-match if-modified-since
    if-none-match if-range if-unmodified-since last-modified link location max-forwards
    proxy-authenticate proxy-authorization range referer refresh retry-after server set-cookie
    strict-transport-security transfer-encoding user-agent vary via www-authenticate
"""
RFC_STATIC_NAMES = _RFC_STATIC_NAMES_TEXT.split()
RFC_STATIC_VALUES = {
    2: "GET",
    3: "POST",
    4: "/",
    5: "/index.html",
    6: "http",
    7: "https",
    8: "200",
    9: "204",
    10: "206",
    11: "304",
    12: "400",
    13: "404",
    14: "500",
    16: "gzip, deflate",
}


def test_static_table() -> None:
    expected = [
        (name, RFC_STATIC_VALUES.get(index, "")) for index, name in enumerate(RFC_STATIC_NAMES, 1)
    ]
    assert list(STATIC_TABLE) == expected
    assert len(STATIC_TABLE) == 61
    decoder = Decoder()
    assert decoder.decode(bytes(0x80 | i for i in range(1, 62))) == expected


# ------------------------------------------------------------------------- Huffman table


def test_huffman_code_is_complete_and_prefix_free() -> None:
    assert len(CODES) == 257
    assert sum(Fraction(1, 2**length) for _, length in CODES) == 1  # Kraft: complete
    words = sorted(format(code, f"0{length}b") for code, length in CODES)
    assert all(code < 2**length for code, length in CODES)
    for shorter, longer in itertools.pairwise(words):
        assert not longer.startswith(shorter), (shorter, longer)


def test_huffman_code_is_canonical() -> None:
    # Appendix B's code is canonical: sorted by (length, symbol), each code is the previous
    # one plus one, shifted left by the growth in length. So the lengths alone determine it,
    # and a mistyped code shows up here.
    code = 0
    previous = min(length for _, length in CODES)
    for symbol in sorted(range(257), key=lambda s: (CODES[s][1], s)):
        length = CODES[symbol][1]
        code <<= length - previous
        previous = length
        assert CODES[symbol] == (code, length), symbol
        code += 1
    assert CODES[EOS] == (2**30 - 1, 30)


@pytest.mark.parametrize(
    ("symbol", "bits"),
    [
        (0, "11111111|11000"),
        (10, "11111111|11111111|11111111|111100"),
        (ord(" "), "010100"),
        (ord("0"), "00000"),
        (ord("a"), "00011"),
        (ord("\\"), "11111111|11111110|000"),
        (127, "11111111|11111111|11111111|1100"),
        (192, "11111111|11111111|11111000|00"),
        (255, "11111111|11111111|11111011|10"),
        (256, "11111111|11111111|11111111|111111"),
    ],
)
def test_huffman_rows_as_printed_in_the_rfc(symbol: int, bits: str) -> None:
    word = bits.replace("|", "")
    assert CODES[symbol] == (int(word, 2), len(word))


# ---------------------------------------------------------------------- Huffman strings

_DECODE_BY_WORD = {
    format(code, f"0{length}b"): symbol for symbol, (code, length) in enumerate(CODES)
}


def reference_huffman_decode(data: bytes) -> bytes | None:
    """Bit at a time, straight from section 5.2; None where the string is invalid."""
    out = bytearray()
    word = ""
    for bit in "".join(format(octet, "08b") for octet in data):
        word += bit
        symbol = _DECODE_BY_WORD.get(word)
        if symbol is not None:
            if symbol == EOS:
                return None
            out.append(symbol)
            word = ""
    if len(word) > 7 or word != "1" * len(word):
        return None
    return bytes(out)


# Every Huffman-coded string of Appendix C.4 and C.6.
RFC_HUFFMAN = [
    ("f1e3 c2e5 f23a 6ba0 ab90 f4ff", b"www.example.com"),
    ("a8eb 1064 9cbf", b"no-cache"),
    ("25a8 49e9 5ba9 7d7f", b"custom-key"),
    ("25a8 49e9 5bb8 e8b4 bf", b"custom-value"),
    ("6402", b"302"),
    ("aec3 771a 4b", b"private"),
    ("d07a be94 1054 d444 a820 0595 040b 8166 e082 a62d 1bff", b"Mon, 21 Oct 2013 20:13:21 GMT"),
    ("9d29 ad17 1863 c78f 0b97 c8e9 ae82 ae43 d3", b"https://www.example.com"),
    ("640e ff", b"307"),
    ("d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff", b"Mon, 21 Oct 2013 20:13:22 GMT"),
    ("9bd9 ab", b"gzip"),
    (
        "94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f 9587"
        "3160 65c0 03ed 4ee5 b106 3d50 07",
        b"foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1",
    ),
]


@pytest.mark.parametrize(("coded", "text"), RFC_HUFFMAN)
def test_huffman_rfc_strings(coded: str, text: bytes) -> None:
    assert huffman_encode(text) == h(coded)
    assert huffman_decode(h(coded)) == text
    assert huffman_decode(bytearray(h(coded))) == text
    assert huffman_decode(memoryview(h(coded))) == text


def bits_to_bytes(bits: str) -> bytes:
    assert len(bits) % 8 == 0
    return int(bits, 2).to_bytes(len(bits) // 8, "big") if bits else b""


@pytest.mark.parametrize(
    ("bits", "problem"),
    [
        ("00011" + "1" * 30 + "1" * 5, "contains EOS"),  # 'a', EOS, padding
        ("1" * 30 + "11", "contains EOS"),  # EOS alone
        ("11111111", "partial code or in more than 7 bits"),  # 8 bits of padding
        ("00011" + "111" + "11111111", "partial code or in more than 7 bits"),  # 'a' + 11 ones
        ("00011" + "000", "partial code"),  # padding of zeros
        ("00011" + "101", "partial code"),  # padding not all ones
        ("00000000", "partial code"),  # '0' then three zero bits
        ("11111110", "partial code"),  # a prefix of '!' (10 bits) that is not all ones
    ],
)
def test_huffman_invalid_strings(bits: str, problem: str) -> None:
    data = bits_to_bytes(bits)
    assert reference_huffman_decode(data) is None
    with pytest.raises(HPACKError, match=problem):
        huffman_decode(data)


def test_huffman_empty_and_boundary_strings() -> None:
    assert huffman_encode(b"") == b""
    assert huffman_decode(b"") == b""
    assert huffman_decode(b"\x1f") == b"a"  # 00011 + 3 bits of padding
    assert huffman_decode(b"\x07") == b"0"  # 00000 + 111
    assert huffman_decode(b"\xff\xff\xff\xf3") == b"\n"  # a 30-bit code + 11


def test_huffman_decoder_agrees_with_the_reference_on_every_short_input() -> None:
    # Exhaustive over 1 and 2 octets: every transition of the state machine's root rows
    # and the states they lead to, compared with the bit-at-a-time decoder.
    for length in (1, 2):
        for value in range(256**length):
            data = value.to_bytes(length, "big")
            expected = reference_huffman_decode(data)
            try:
                got: bytes | None = huffman_decode(data)
            except HPACKError:
                got = None
            assert got == expected, data.hex()


@FAST
@given(st.binary(max_size=200))
def test_huffman_round_trip(data: bytes) -> None:
    coded = huffman_encode(data)
    assert len(coded) == (sum(CODES[octet][1] for octet in data) + 7) // 8
    assert huffman_decode(coded) == data
    assert reference_huffman_decode(coded) == data


@settings(FAST, max_examples=500)
@given(st.binary(max_size=40))
def test_huffman_decode_agrees_with_the_reference(data: bytes) -> None:
    expected = reference_huffman_decode(data)
    try:
        got: bytes | None = huffman_decode(data)
    except HPACKError:
        got = None
    assert got == expected


def test_huffman_cache_is_bounded() -> None:
    hpack._HUFFMAN_CACHE.clear()
    decoder = Decoder()
    for n in range(hpack._HUFFMAN_CACHE_ENTRIES + 10):
        value = huffman_encode(str(n).encode())
        block = b"\x00\x01x" + bytes([0x80 | len(value)]) + value  # literal, new name "x"
        assert decoder.decode(block) == [("x", str(n))]
        assert len(hpack._HUFFMAN_CACHE) <= hpack._HUFFMAN_CACHE_ENTRIES
    long_value = huffman_encode(b"y" * 200)
    block = b"\x00\x01x\xff" + bytes([len(long_value) - 127]) + long_value
    assert decoder.decode(block) == [("x", "y" * 200)]
    assert long_value not in hpack._HUFFMAN_CACHE  # long strings are decoded, not kept


# ---------------------------------------------------------------- integers (Appendix C.1)


@pytest.mark.parametrize(
    ("value", "prefix", "encoded"),
    [(10, 5, "0a"), (1337, 5, "1f9a0a"), (42, 8, "2a"), (31, 5, "1f00"), (30, 5, "1e")],
)
def test_integer_examples(value: int, prefix: int, encoded: str) -> None:
    assert hpack._encode_int(value, prefix, 0) == h(encoded)


def test_integers_decode_through_table_size_updates() -> None:
    # A size update carries an integer with a 5-bit prefix, as in C.1.1 and C.1.2.
    decoder = Decoder(max_table_size=4096)
    assert decoder.decode(bytes([0x20 | 10])) == []
    assert decoder.dynamic_table_capacity == 10
    assert decoder.decode(bytes([0x20 | 0x1F, 0x9A, 0x0A])) == []
    assert decoder.dynamic_table_capacity == 1337
    # Redundant zero groups are valid integers, within the 5-octet limit.
    assert decoder.decode(bytes([0x3F, 0x80, 0x80, 0x80, 0x00])) == []
    assert decoder.dynamic_table_capacity == 31


# ----------------------------------------------------------------- representations (C.2)


@pytest.mark.parametrize(
    ("block", "field", "table"),
    [
        # C.2.1 Literal Header Field with Indexing
        (
            "400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572",
            ("custom-key", "custom-header"),
            [("custom-key", "custom-header")],
        ),
        # C.2.2 Literal Header Field without Indexing
        ("040c 2f73 616d 706c 652f 7061 7468", (":path", "/sample/path"), []),
        # C.2.3 Literal Header Field Never Indexed
        ("1008 7061 7373 776f 7264 0673 6563 7265 74", ("password", "secret"), []),
        # C.2.4 Indexed Header Field
        ("82", (":method", "GET"), []),
    ],
)
def test_rfc_single_representations(block: str, field: Field, table: list[Field]) -> None:
    decoder = Decoder()
    assert decoder.decode(h(block)) == [field]
    assert list(decoder.dynamic_table) == table
    assert decoder.dynamic_table_size == sum(entry_size(f) for f in table)
    assert decoder.dynamic_table_size == (55 if table else 0)


def test_rfc_representations_from_the_encoder() -> None:
    encoder = Encoder()
    assert encoder.encode([(":path", "/sample/path")]) == h("040c 2f73 616d 706c 652f 7061 7468")
    assert encoder.encode([(":method", "GET")]) == h("82")
    assert encoder.encode([("password", "secret")], sensitive={"password"}) == h(
        "1008 7061 7373 776f 7264 0673 6563 7265 74"
    )


# ----------------------------------------------------------- header lists (C.3 to C.6)

REQUEST_1 = [
    (":method", "GET"),
    (":scheme", "http"),
    (":path", "/"),
    (":authority", "www.example.com"),
]
REQUEST_2 = [*REQUEST_1, ("cache-control", "no-cache")]
REQUEST_3 = [
    (":method", "GET"),
    (":scheme", "https"),
    (":path", "/index.html"),
    (":authority", "www.example.com"),
    ("custom-key", "custom-value"),
]
REQUEST_TABLES = [
    ([(":authority", "www.example.com")], 57),
    ([("cache-control", "no-cache"), (":authority", "www.example.com")], 110),
    (
        [
            ("custom-key", "custom-value"),
            ("cache-control", "no-cache"),
            (":authority", "www.example.com"),
        ],
        164,
    ),
]

DATE_1 = ("date", "Mon, 21 Oct 2013 20:13:21 GMT")
DATE_2 = ("date", "Mon, 21 Oct 2013 20:13:22 GMT")
LOCATION = ("location", "https://www.example.com")
PRIVATE = ("cache-control", "private")
COOKIE = ("set-cookie", "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1")
RESPONSES = [
    [(":status", "302"), PRIVATE, DATE_1, LOCATION],
    [(":status", "307"), PRIVATE, DATE_1, LOCATION],
    [(":status", "200"), PRIVATE, DATE_2, LOCATION, ("content-encoding", "gzip"), COOKIE],
]
RESPONSE_TABLES = [
    ([LOCATION, DATE_1, PRIVATE, (":status", "302")], 222),
    ([(":status", "307"), LOCATION, DATE_1, PRIVATE], 222),
    ([COOKIE, ("content-encoding", "gzip"), DATE_2], 215),
]

RFC_SEQUENCES = {
    "C.3 requests without Huffman": (
        4096,
        [
            "8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d",
            "8286 84be 5808 6e6f 2d63 6163 6865",
            "8287 85bf 400a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 65",
        ],
        [REQUEST_1, REQUEST_2, REQUEST_3],
        REQUEST_TABLES,
    ),
    "C.4 requests with Huffman": (
        4096,
        [
            "8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff",
            "8286 84be 5886 a8eb 1064 9cbf",
            "8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf",
        ],
        [REQUEST_1, REQUEST_2, REQUEST_3],
        REQUEST_TABLES,
    ),
    "C.5 responses without Huffman": (
        256,
        [
            "4803 3330 3258 0770 7269 7661 7465 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133"
            "2032 303a 3133 3a32 3120 474d 546e 1768 7474 7073 3a2f 2f77 7777 2e65 7861 6d70"
            "6c65 2e63 6f6d",
            "4803 3330 37c1 c0bf",
            "88c1 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32 3220 474d"
            "54c0 5a04 677a 6970 7738 666f 6f3d 4153 444a 4b48 514b 425a 584f 5157 454f 5049"
            "5541 5851 5745 4f49 553b 206d 6178 2d61 6765 3d33 3630 303b 2076 6572 7369 6f6e"
            "3d31",
        ],
        RESPONSES,
        RESPONSE_TABLES,
    ),
    "C.6 responses with Huffman": (
        256,
        [
            "4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 82a6"
            "2d1b ff6e 919d 29ad 1718 63c7 8f0b 97c8 e9ae 82ae 43d3",
            "4883 640e ffc1 c0bf",
            "88c1 6196 d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff c05a 839b d9ab"
            "77ad 94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f"
            "9587 3160 65c0 03ed 4ee5 b106 3d50 07",
        ],
        RESPONSES,
        RESPONSE_TABLES,
    ),
}


@pytest.mark.parametrize("name", list(RFC_SEQUENCES))
def test_rfc_header_list_sequences(name: str) -> None:
    table_size, blocks, header_lists, tables = RFC_SEQUENCES[name]
    decoder = Decoder(max_table_size=table_size)
    for block, expected, (table, size) in zip(blocks, header_lists, tables, strict=True):
        assert decoder.decode(h(block)) == expected
        assert list(decoder.dynamic_table) == table
        assert decoder.dynamic_table_size == size == sum(entry_size(f) for f in table)


# ------------------------------------------------------------------------------ encoder


def test_encoder_representations() -> None:
    encoder = Encoder()
    assert encoder.encode([]) == b""
    assert encoder.encode([(":status", "200"), ("accept-encoding", "gzip, deflate")]) == h("88 90")
    # Name in the static table, index >= 15: the 4-bit prefix continues.
    assert encoder.encode([("content-type", "application/grpc")]) == (
        b"\x0f\x10\x10application/grpc"
    )
    assert encoder.encode([("te", "trailers")]) == b"\x00\x02te\x08trailers"
    assert encoder.encode([("x", "é\xff")]) == b"\x00\x01x\x02\xe9\xff"  # latin-1 octets
    long_value = "v" * 300
    assert encoder.encode([("x", long_value)]) == (
        b"\x00\x01x\x7f" + bytes([(300 - 127) & 0x7F | 0x80, (300 - 127) >> 7]) + b"v" * 300
    )
    # Never indexed, even for a field that the static table has in full.
    assert encoder.encode([(":method", "GET")], sensitive={":method"}) == b"\x12\x03GET"
    assert encoder.encode([("authorization", "x")], sensitive={"authorization"}) == (
        b"\x1f\x08\x01x"
    )


def test_encoder_never_indexes_and_never_uses_huffman() -> None:
    headers = [(":path", "/inference.GRPCInferenceService/ModelInfer"), ("grpc-timeout", "1S")]
    block = Encoder().encode(headers)
    first_octets = [block[0], block[block.index(b"\x00\x0cgrpc-timeout")]]
    assert all(octet & 0xF0 == 0 for octet in first_octets)  # without indexing
    decoder = Decoder()
    assert decoder.decode(block) == headers
    assert decoder.dynamic_table == ()


@pytest.mark.parametrize(
    ("field", "problem"),
    [
        (("x-name", "snow \u2603"), r"header 'x-name': the value has a character beyond U\+00FF"),
        (("x-\u0100", "v"), r"the name has a character beyond U\+00FF"),
        (("x-name", b"bytes"), "the value must be a str, not bytes"),
        (("x-name", ["list"]), "the value must be a str, not list"),
        ((None, "v"), "the name must be a str, not NoneType"),
    ],
)
def test_encoder_rejects_what_http2_cannot_carry(
    field: tuple[object, object], problem: str
) -> None:
    with pytest.raises(InvalidInputError, match=problem):
        Encoder().encode([field])  # type: ignore[list-item]
    with pytest.raises(InvalidInputError, match=problem):
        Encoder().encode([field], sensitive={field[0]})  # type: ignore[list-item, arg-type]


def test_encoder_cache_is_bounded_and_keeps_no_secrets() -> None:
    hpack._FIELD_CACHE.clear()
    encoder = Encoder()
    encoder.encode([("authorization", "Bearer secret")], sensitive={"authorization"})
    assert not hpack._FIELD_CACHE
    for n in range(hpack._FIELD_CACHE_ENTRIES + 10):
        assert encoder.encode([("x-n", str(n))]) == b"\x00\x03x-n" + bytes([len(str(n))]) + str(
            n
        ).encode("ascii")
        assert len(hpack._FIELD_CACHE) <= hpack._FIELD_CACHE_ENTRIES
    assert encoder.encode([("x-n", "7")]) == encoder.encode([("x-n", "7")])


# --------------------------------------------------------------- decoder: table handling


def test_entry_larger_than_the_table_empties_it() -> None:
    decoder = Decoder(max_table_size=100)
    decoder.decode(b"\x40\x01a\x01b")  # 34 octets
    assert list(decoder.dynamic_table) == [("a", "b")]
    big = "v" * 70  # 1 + 70 + 32 = 103 > 100
    assert decoder.decode(b"\x40\x01a\x46" + big.encode()) == [("a", big)]
    assert not decoder.dynamic_table
    assert decoder.dynamic_table_size == 0


def test_indexed_name_survives_the_eviction_of_its_entry() -> None:
    # Section 4.4: the new entry may reference the name of an entry that adding it evicts.
    decoder = Decoder(max_table_size=80)
    decoder.decode(b"\x40\x04name\x05value")  # 4 + 5 + 32 = 41
    block = b"\x7e" + b"\x0a" + b"0123456789"  # name of index 62, 4 + 10 + 32 = 46
    assert decoder.decode(block) == [("name", "0123456789")]
    assert decoder.dynamic_table == (("name", "0123456789"),)
    assert decoder.dynamic_table_size == 46


def test_large_indices_continue_past_the_prefix() -> None:
    decoder = Decoder()
    fill = b"".join(b"\x40\x01k\x02" + b"%02d" % n for n in range(100))  # 35 octets each
    decoder.decode(fill)
    assert len(decoder.dynamic_table) == 100
    assert decoder.decode(b"\xff\x22") == [("k", "00")]  # index 127 + 34 = 161: the oldest
    assert decoder.decode(b"\x7f\x02\x01v") == [("k", "v")]  # name of index 63 + 2 = 65
    assert decoder.decode(b"\x0f\x32\x01w") == [("k", "w")]  # name of index 15 + 50 = 65
    assert decoder.dynamic_table[0] == ("k", "v")


def test_table_size_updates() -> None:
    decoder = Decoder()
    decoder.decode(b"\x40\x01a\x01b\x40\x01c\x01d")
    assert list(decoder.dynamic_table) == [("c", "d"), ("a", "b")]
    # Two updates at the start of a block (section 4.2): down to 0, then back up.
    assert decoder.decode(b"\x20\x3f\xe1\x1f\x82") == [(":method", "GET")]
    assert not decoder.dynamic_table
    assert decoder.dynamic_table_capacity == 4096
    decoder.decode(b"\x40\x01a\x01b\x40\x01c\x01d")
    assert decoder.decode(b"\x3f\x04") == []  # 35: room for one entry
    assert list(decoder.dynamic_table) == [("c", "d")]
    assert decoder.dynamic_table_size == 34
    assert decoder.decode(b"\x3f\x03") == []  # 34: still room
    assert list(decoder.dynamic_table) == [("c", "d")]
    assert decoder.decode(b"\x3f\x02") == []  # 33: none
    assert not decoder.dynamic_table
    assert decoder.dynamic_table_size == 0


def test_lowered_limit_requires_a_size_update() -> None:
    decoder = Decoder()
    decoder.decode(b"\x40\x01a\x01b")
    decoder.max_table_size = 4096  # not lowered below the table's size: nothing required
    assert decoder.decode(b"\x82") == [(":method", "GET")]
    decoder.max_table_size = 40
    with pytest.raises(HPACKError, match="does not start with the dynamic table size update"):
        decoder.decode(b"\x82")
    with pytest.raises(HPACKError, match="exceeds the limit of 40"):
        decoder.decode(b"\x3f\x0a\x82")  # 31 + 10 = 41 > 40

    decoder = Decoder()
    decoder.decode(b"\x40\x01a\x01b")
    decoder.max_table_size = 40
    assert decoder.decode(b"\x3f\x09\xbe") == [("a", "b")]  # 31 + 9 = 40: entry kept
    assert decoder.decode(b"\x82") == [(":method", "GET")]  # satisfied once
    assert decoder.dynamic_table_capacity == 40


def test_decoder_accepts_every_bytes_like_block() -> None:
    block = h("8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff")
    for form in (block, bytearray(block), memoryview(block), memoryview(b"xx" + block)[2:]):
        assert Decoder().decode(form) == REQUEST_1
    with pytest.raises(TypeError, match="bytes-like"):
        Decoder().decode("82")  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [-1, 1.5, "4096", None])
def test_decoder_settings_are_validated(bad: object) -> None:
    with pytest.raises(InvalidInputError):
        Decoder(max_table_size=bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError):
        Decoder(max_header_list_size=bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError):
        Decoder().max_table_size = bad  # type: ignore[assignment]


def test_repeated_blocks_follow_the_table() -> None:
    # A warm connection's blocks repeat (the decoder keeps their decoded lists): a block
    # naming dynamic entries must still decode to what the table holds now.
    decoder = Decoder()
    decoder.decode(b"\x40\x01a\x01b")
    assert decoder.decode(b"\xbe\x82") == [("a", "b"), (":method", "GET")]
    assert decoder.decode(b"\xbe\x82") == [("a", "b"), (":method", "GET")]
    decoder.decode(b"\x40\x01c\x01d")  # index 62 is ("c", "d") now
    assert decoder.decode(b"\xbe\x82") == [("c", "d"), (":method", "GET")]
    assert decoder.decode(b"\x3f\xe1\x1f") == []  # a size update (to 4096) keeps both
    assert decoder.decode(b"\xbe\xbf") == [("c", "d"), ("a", "b")]
    assert decoder.decode(b"\x20") == []  # emptied
    with pytest.raises(HPACKError, match="index 62 is beyond"):
        decoder.decode(b"\xbe\x82")
    headers = decoder.decode(b"\x82")
    headers.append(("x", "y"))  # the caller's list: the next decode is not changed by it
    assert decoder.decode(b"\x82") == [(":method", "GET")]


def test_repeated_blocks_meet_lowered_limits() -> None:
    decoder = Decoder()
    assert decoder.decode(b"\x82\x82") == [(":method", "GET")] * 2
    decoder.max_header_list_size = 83
    with pytest.raises(HPACKError, match="larger than the limit of 83 octets"):
        decoder.decode(b"\x82\x82")
    decoder = Decoder()
    decoder.decode(b"\x40\x01a\x01b")
    assert decoder.decode(b"\xbe") == [("a", "b")]
    decoder.max_table_size = 0
    with pytest.raises(HPACKError, match="does not start with the dynamic table size update"):
        decoder.decode(b"\xbe")


def test_decoded_blocks_kept_are_bounded() -> None:
    decoder = Decoder()
    for n in range(3 * hpack._DECODED_ENTRIES):
        decoder.decode(b"\x0f\x28\x03" + b"%03d" % n)  # x-... literal, not indexed
    assert len(decoder._decoded) <= hpack._DECODED_ENTRIES
    value = b"v" * hpack._DECODED_MAX_OCTETS
    big = b"\x0f\x28" + hpack._encode_int(len(value), 7, 0) + value
    decoder.decode(big)
    assert big not in decoder._decoded


# ----------------------------------------------------------------- decoder: bad blocks

# A 4096-octet table holding one entry, ("a", "b"), as the starting point of the cases below.
PRIMED = b"\x40\x01a\x01b"


@pytest.mark.parametrize(
    ("block", "problem"),
    [
        (b"\x80", "index 0"),
        (b"\xbf", "index 63 is beyond the 61 static and 1 dynamic"),
        (b"\xff\x80\x80\x80\x80\x01", "integer longer than 5 octets"),
        (b"\xff\x80", "ends inside an integer"),
        (b"\xff", "ends inside an integer"),
        (b"\x7f\x01", "index 64 is beyond"),  # incremental, name index 64
        (b"\x0f\x31\x00", "index 64 is beyond"),  # without indexing, name index 64
        (b"\x1f\x31\x00", "index 64 is beyond"),  # never indexed, name index 64
        (b"\x40", "ends where a string literal should start"),
        (b"\x40\x01a", "ends where a string literal should start"),
        (b"\x40\x05ab", "string literal of 5 octets at offset 2 overruns"),
        (b"\x00\x01a\x7f\xff\xff\xff\x7f", "string literal of 268435582 octets"),
        (b"\x00\x01a\x81\xff", "Huffman-coded string ends in a partial code"),
        (b"\x00\x01a\x84\xff\xff\xff\xff", "Huffman-coded string contains EOS"),
        (b"\x82\x20", "size update after a header field"),
        (b"\x3f\xe2\x1f", "size update to 4097 exceeds the limit of 4096"),
    ],
)
def test_malformed_blocks(block: bytes, problem: str) -> None:
    decoder = Decoder()
    decoder.decode(PRIMED)
    with pytest.raises(HPACKError, match=problem) as caught:
        decoder.decode(block)
    assert isinstance(caught.value, ProtocolError)


def test_header_list_size_limit() -> None:
    decoder = Decoder(max_header_list_size=84)
    assert decoder.decode(b"\x82\x82") == [(":method", "GET")] * 2  # 42 + 42 = 84
    with pytest.raises(HPACKError, match="larger than the limit of 84 octets"):
        decoder.decode(b"\x82\x82\x84")
    with pytest.raises(HPACKError, match="larger than the limit of 83 octets"):
        Decoder(max_header_list_size=83).decode(b"\x82\x82")


def test_amplification_is_bounded_by_the_header_list_size() -> None:
    # One octet can name a 4 KiB table entry: a 64 KiB block would expand to 256 MiB.
    decoder = Decoder(max_header_list_size=1 << 20)
    value = b"v" * 4000
    decoder.decode(
        b"\x40\x01x\x7f" + bytes([(4000 - 127) & 0x7F | 0x80, (4000 - 127) >> 7]) + value
    )
    started = time.perf_counter()
    with pytest.raises(HPACKError, match="larger than the limit"):
        decoder.decode(b"\xbe" * 65536)
    assert time.perf_counter() - started < 1.0


def test_huge_lengths_are_refused_without_allocating() -> None:
    # Integers that claim up to 2**28 octets, in a block of a few octets.
    blocks = [
        b"\x00\x7f\xff\xff\xff\x7f",  # name length
        b"\x00\x01a\xff\xff\xff\xff\x7f",  # Huffman value length
        b"\xff\xff\xff\xff\x7f",  # index
        b"\x3f\xff\xff\xff\x7f",  # table size
    ]
    tracemalloc.start()
    try:
        for block in blocks:
            with pytest.raises(HPACKError):
                Decoder().decode(block)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 256 * 1024


# --------------------------------------------------- reference model and test-only encoder


class TableModel:
    """The dynamic table as RFC 7541 section 4 describes it, in the plainest form."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.entries: list[Field] = []  # newest first

    @property
    def size(self) -> int:
        return sum(entry_size(entry) for entry in self.entries)

    def resize(self, capacity: int) -> None:
        self.capacity = capacity
        while self.size > capacity:
            self.entries.pop()

    def add(self, field: Field) -> None:
        while self.entries and self.size + entry_size(field) > self.capacity:
            self.entries.pop()
        if entry_size(field) <= self.capacity:
            self.entries.insert(0, field)

    def indices_of(self, field: Field) -> list[int]:
        static = [i for i, entry in enumerate(STATIC_TABLE, 1) if entry == field]
        return static + [62 + i for i, entry in enumerate(self.entries) if entry == field]

    def name_indices_of(self, name: str) -> list[int]:
        static = [i for i, entry in enumerate(STATIC_TABLE, 1) if entry[0] == name]
        return static + [62 + i for i, entry in enumerate(self.entries) if entry[0] == name]


def ref_int(value: int, prefix_bits: int, flags: int, padding: int = 0) -> bytes:
    """Section 5.1, written out again; ``padding`` adds redundant zero groups at the end."""
    limit = (1 << prefix_bits) - 1
    if value < limit:
        return bytes([flags | value])
    out = [flags | limit]
    value -= limit
    groups = []
    while True:
        groups.append(value & 0x7F)
        value >>= 7
        if not value:
            break
    groups += [0] * padding
    out += [group | 0x80 for group in groups[:-1]] + [groups[-1]]
    return bytes(out)


def ref_string(draw: Draw, text: str) -> bytes:
    octets = text.encode("latin-1")
    if draw(st.booleans()):
        coded = huffman_encode(octets)
        return ref_int(len(coded), 7, 0x80) + coded
    return ref_int(len(octets), 7, 0x00) + octets


_short_latin1 = st.text(st.characters(max_codepoint=0xFF), max_size=12)
# Now and then a string whose length needs more than the 7-bit prefix.
latin1 = st.one_of(
    _short_latin1,
    _short_latin1,
    _short_latin1,
    st.text(st.characters(max_codepoint=0xFF), min_size=120, max_size=200),
)
static_names = st.sampled_from(sorted({name for name, _ in STATIC_TABLE}))
# Fields of every kind: static entries, static names with other values, new names, and a
# few repeated names so that the dynamic table gets referenced.
fields = st.one_of(
    st.sampled_from(STATIC_TABLE),
    st.tuples(static_names, latin1),
    st.tuples(st.sampled_from(["x-a", "x-b", "grpc-status"]), st.sampled_from(["", "0", "1"])),
    st.tuples(latin1, latin1),
)


def ref_block(draw: Draw, model: TableModel, max_table_size: int) -> tuple[bytes, list[Field]]:
    """A header block using any mix of representations; updates ``model`` as decoding must."""
    out = bytearray()
    for _ in range(draw(st.integers(0, 2)) if draw(st.integers(0, 3)) == 0 else 0):
        size = draw(st.integers(0, max_table_size))
        out += ref_int(size, 5, 0x20, padding=draw(st.sampled_from([0, 0, 1])) if size > 30 else 0)
        model.resize(size)
    expected: list[Field] = []
    # Fields already in the tables are likely picks, to exercise references.
    for _ in range(draw(st.integers(0, 8))):
        if model.entries and draw(st.booleans()):
            field = draw(st.sampled_from(model.entries))
        else:
            field = draw(fields)
        kind = draw(st.sampled_from(["indexed", "incremental", "without", "never"]))
        indices = model.indices_of(field)
        if kind == "indexed" and indices:
            index = draw(st.sampled_from(indices))
            out += ref_int(index, 7, 0x80, padding=draw(st.sampled_from([0, 0, 1])))
        else:
            prefix_bits, flags = {
                "incremental": (6, 0x40),
                "without": (4, 0x00),
                "never": (4, 0x10),
                "indexed": (6, 0x40),
            }[kind]
            name_indices = model.name_indices_of(field[0])
            if name_indices and draw(st.booleans()):
                out += ref_int(draw(st.sampled_from(name_indices)), prefix_bits, flags)
            else:
                out += bytes([flags]) + ref_string(draw, field[0])
            out += ref_string(draw, field[1])
            if flags == 0x40:
                model.add(field)
        expected.append(field)
    return bytes(out), expected


@st.composite
def valid_blocks(draw: st.DrawFn) -> bytes:
    return ref_block(draw, TableModel(4096), 4096)[0]


@settings(FAST, max_examples=300)
@given(st.data(), st.sampled_from([0, 64, 256, 4096]))
def test_decoder_matches_the_reference_model(data: st.DataObject, table_size: int) -> None:
    decoder = Decoder(max_table_size=table_size)
    model = TableModel(table_size)
    for _ in range(data.draw(st.integers(1, 4))):
        block, expected = ref_block(data.draw, model, table_size)
        assert decoder.decode(block) == expected
        assert list(decoder.dynamic_table) == model.entries
        assert decoder.dynamic_table_size == model.size
        assert decoder.dynamic_table_capacity == model.capacity


@settings(FAST, max_examples=200)
@given(st.data(), st.sampled_from([0, 64, 256, 4096]))
def test_repeated_blocks_decode_as_without_the_cache(data: st.DataObject, size: int) -> None:
    # Differential: blocks new and replayed (valid or not against the table by then) give
    # what a decoder that keeps nothing gives, and leave the same table.
    decoder, plain = Decoder(max_table_size=size), Decoder(max_table_size=size)
    model = TableModel(size)
    seen: list[bytes] = []
    for _ in range(data.draw(st.integers(1, 8))):
        if seen and data.draw(st.booleans()):
            block = data.draw(st.sampled_from(seen))
        else:
            block = ref_block(data.draw, model, size)[0]
            seen.append(block)
        plain._decoded.clear()
        try:
            expected: object = plain.decode(block)
        except HPACKError as exc:
            expected = str(exc)
        try:
            got: object = decoder.decode(block)
        except HPACKError as exc:
            got = str(exc)
        assert got == expected
        if isinstance(expected, str):
            return  # a decoder is not used after an error
        assert decoder.dynamic_table == plain.dynamic_table
        model.entries = list(plain.dynamic_table)
        model.capacity = plain.dynamic_table_capacity


header_lists = st.lists(fields, max_size=10)


@FAST
@given(header_lists, st.sets(static_names | latin1, max_size=3))
def test_encoder_decoder_round_trip(headers: list[Field], sensitive: set[str]) -> None:
    block = Encoder().encode(headers, sensitive=sensitive)
    decoder = Decoder()
    assert decoder.decode(block) == headers
    assert decoder.decode(bytearray(block)) == headers  # stateless: any order, any times
    assert decoder.dynamic_table == ()


# ------------------------------------------------------------------------------ totality


def check_total(decoder: Decoder, block: bytes) -> None:
    """The block decodes or raises HPACKError, and the table stays consistent."""
    try:
        headers = decoder.decode(block)
    except HPACKError:
        return
    assert all(type(n) is str and type(v) is str for n, v in headers)
    assert sum(entry_size(f) for f in headers) <= decoder.max_header_list_size
    assert decoder.dynamic_table_size == sum(entry_size(f) for f in decoder.dynamic_table)
    assert decoder.dynamic_table_size <= decoder.dynamic_table_capacity <= decoder.max_table_size


def primed_decoder() -> Decoder:
    decoder = Decoder(max_table_size=256, max_header_list_size=2048)
    decoder.decode(h(RFC_SEQUENCES["C.6 responses with Huffman"][1][0]))
    return decoder


@settings(FAST, max_examples=1000)
@given(st.binary(max_size=64))
def test_arbitrary_bytes_decode_or_raise_hpack_error(block: bytes) -> None:
    check_total(Decoder(), block)
    check_total(primed_decoder(), block)


@st.composite
def mutated(draw: st.DrawFn, blocks: st.SearchStrategy[bytes]) -> bytes:
    """A valid block with a few octet-level mutations applied."""
    data = bytearray(draw(blocks))
    for _ in range(draw(st.integers(1, 3))):
        op = draw(st.sampled_from(["flip", "insert", "delete", "truncate"]))
        at = draw(st.integers(0, len(data)))
        if op == "flip" and at < len(data):
            data[at] = draw(st.integers(0, 255))
        elif op == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=4))
        elif op == "delete":
            del data[at : at + draw(st.integers(1, 4))]
        else:
            del data[at:]
    return bytes(data)


rfc_blocks = st.sampled_from(
    [h(block) for _, blocks, _, _ in RFC_SEQUENCES.values() for block in blocks]
)


@settings(FAST, max_examples=1000)
@given(mutated(valid_blocks() | rfc_blocks))
def test_mutated_blocks_decode_or_raise_hpack_error(block: bytes) -> None:
    check_total(Decoder(), block)
    check_total(primed_decoder(), block)
