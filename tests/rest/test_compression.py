"""gzip and deflate bodies: round trips, interoperability, broken bodies, the size guard."""

from __future__ import annotations

import contextlib
import gzip
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kserve_v2.errors import InvalidInputError, ProtocolError
from kserve_v2.rest.compression import SUPPORTED_ENCODINGS, compress, decompress

# Bodies as lists of buffers of any kind, some empty.
BODY_PARTS = st.lists(
    st.one_of(st.binary(max_size=300), st.binary(max_size=300).map(bytearray)), max_size=4
)
# Compressible bodies: runs of a few bytes.
REPETITIVE = st.binary(min_size=1, max_size=4).flatmap(
    lambda chunk: st.integers(0, 2000).map(lambda n: chunk * n)
)
ENCODINGS = st.sampled_from(SUPPORTED_ENCODINGS)


def _raw_deflate(data: bytes) -> bytes:
    compressor = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
    return compressor.compress(data) + compressor.flush()


def test_supported_encodings() -> None:
    assert SUPPORTED_ENCODINGS == ("gzip", "deflate")


@settings(max_examples=150, deadline=None)
@given(BODY_PARTS, ENCODINGS)
def test_round_trip_of_a_body_given_in_parts(parts: list[bytes], encoding: str) -> None:
    body = compress(parts, encoding)
    assert decompress(body, encoding) == b"".join(parts)
    assert decompress(memoryview(body), encoding) == b"".join(parts)


@settings(max_examples=100, deadline=None)
@given(REPETITIVE, ENCODINGS, st.integers(0, 9))
def test_round_trip_at_every_level(data: bytes, encoding: str, level: int) -> None:
    assert decompress(compress([data], encoding, level), encoding) == data


def test_gzip_output_is_readable_by_the_gzip_module() -> None:
    assert gzip.decompress(compress([b"abc", b"def"], "gzip")) == b"abcdef"


def test_deflate_output_is_the_zlib_container() -> None:
    assert zlib.decompress(compress([b"abc", memoryview(b"def")], "deflate")) == b"abcdef"


def test_bodies_from_the_standard_library_decode() -> None:
    assert decompress(gzip.compress(b"hello"), "gzip") == b"hello"
    assert decompress(zlib.compress(b"hello"), "deflate") == b"hello"


def test_raw_deflate_is_accepted_for_deflate() -> None:
    assert decompress(_raw_deflate(b"hello" * 50), "deflate") == b"hello" * 50


def test_raw_deflate_is_not_gzip() -> None:
    with pytest.raises(ProtocolError):
        decompress(_raw_deflate(b"hello"), "gzip")


def test_several_gzip_members_decode_to_their_concatenation() -> None:
    body = gzip.compress(b"first ") + gzip.compress(b"") + gzip.compress(b"second")
    assert decompress(body, "gzip") == b"first second"


@pytest.mark.parametrize("encoding", SUPPORTED_ENCODINGS)
def test_trailing_garbage_after_the_stream_is_a_protocol_error(encoding: str) -> None:
    with pytest.raises(ProtocolError):
        decompress(compress([b"hello"], encoding) + b"garbage", encoding)


@pytest.mark.parametrize("encoding", ["GZIP", "Deflate"])
def test_encoding_names_are_case_insensitive(encoding: str) -> None:
    assert decompress(compress([b"x"], encoding), encoding) == b"x"


def test_content_encoding_header_value_may_carry_spaces() -> None:
    assert decompress(compress([b"x"], "gzip"), " gzip ") == b"x"


@pytest.mark.parametrize("encoding", ["", "identity", "Identity"])
def test_identity_returns_the_body_unchanged(encoding: str) -> None:
    assert decompress(bytearray(b"\x1f\x8b not compressed"), encoding) == b"\x1f\x8b not compressed"


def test_compressing_with_an_unsupported_encoding_is_invalid_input() -> None:
    with pytest.raises(InvalidInputError, match="unsupported compression"):
        compress([b"x"], "br")


@pytest.mark.parametrize("level", [-2, 10, 100])
def test_compressing_at_an_impossible_level_is_invalid_input(level: int) -> None:
    with pytest.raises(InvalidInputError, match="level"):
        compress([b"x"], "gzip", level)


def test_decompressing_an_unsupported_encoding_is_a_protocol_error() -> None:
    with pytest.raises(ProtocolError, match="unsupported Content-Encoding"):
        decompress(b"x", "br")


@pytest.mark.parametrize("encoding", SUPPORTED_ENCODINGS)
def test_every_truncation_is_a_protocol_error(encoding: str) -> None:
    body = compress([b"some body that is long enough " * 10], encoding)
    for cut in range(len(body)):
        with pytest.raises(ProtocolError):
            decompress(body[:cut], encoding)


@pytest.mark.parametrize("encoding", SUPPORTED_ENCODINGS)
def test_garbage_is_a_protocol_error(encoding: str) -> None:
    with pytest.raises(ProtocolError, match="does not decode"):
        decompress(b"\x00\x01 definitely not compressed \xff" * 3, encoding)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200), ENCODINGS, st.none() | st.integers(0, 1000))
def test_arbitrary_bytes_decode_or_raise_protocol_error(
    body: bytes, encoding: str, max_size: int | None
) -> None:
    try:
        out = decompress(body, encoding, max_size=max_size)
    except ProtocolError:
        return
    assert isinstance(out, bytes)
    assert max_size is None or len(out) <= max_size


@settings(max_examples=200, deadline=None)
@given(BODY_PARTS, ENCODINGS, st.integers(0, 3), st.data())
def test_flipped_byte_decodes_or_raises_protocol_error(
    parts: list[bytes], encoding: str, xor: int, data: st.DataObject
) -> None:
    body = bytearray(compress(parts, encoding))
    index = data.draw(st.integers(0, len(body) - 1))
    body[index] ^= 1 << xor
    with contextlib.suppress(ProtocolError):
        decompress(bytes(body), encoding)


# ---------------------------------------------------------------------------------------------
# the size guard


@pytest.mark.parametrize("encoding", SUPPORTED_ENCODINGS)
def test_decompression_bomb_stops_at_max_size(encoding: str) -> None:
    bomb = compress([bytes(64 << 20)], encoding)  # 64 MiB of zeros in about 64 KiB
    assert len(bomb) < 100_000
    with pytest.raises(ProtocolError, match="limit"):
        decompress(bomb, encoding, max_size=1 << 20)


@settings(max_examples=100, deadline=None)
@given(st.one_of(REPETITIVE, st.binary(max_size=3000)), ENCODINGS)
def test_body_of_exactly_max_size_passes_and_one_byte_less_does_not(
    data: bytes, encoding: str
) -> None:
    body = compress([data], encoding)
    assert decompress(body, encoding, max_size=len(data)) == data
    if data:
        with pytest.raises(ProtocolError, match="limit"):
            decompress(body, encoding, max_size=len(data) - 1)


def test_max_size_counts_every_gzip_member() -> None:
    body = gzip.compress(b"a" * 600) + gzip.compress(b"b" * 600)
    assert len(decompress(body, "gzip", max_size=1200)) == 1200
    with pytest.raises(ProtocolError, match="limit"):
        decompress(body, "gzip", max_size=1000)
