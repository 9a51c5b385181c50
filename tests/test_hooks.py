"""The wire hook's message and printer: what they show of credentials and bodies."""

from __future__ import annotations

import io

from kserve_v2.hooks import WireMessage, print_hook, redact_headers

SECRET = "Bearer s3cret"


def _message(body: tuple[bytes, ...] = (b"{}",)) -> WireMessage:
    return WireMessage(
        "send",
        "http",
        "POST",
        "/v2/models/m/infer",
        (("Authorization", SECRET), ("X-API-Key", "k3y"), ("Content-Type", "application/json")),
        body,
    )


def test_redact_headers_keeps_names_and_other_values() -> None:
    assert redact_headers([("Cookie", "a=b"), ("Accept", "*/*")]) == [
        ("Cookie", "<redacted>"),
        ("Accept", "*/*"),
    ]


def test_repr_redacts_credentials() -> None:
    text = repr(_message())
    assert SECRET not in text
    assert "k3y" not in text
    assert "('Authorization', '<redacted>')" in text
    assert "('Content-Type', 'application/json')" in text
    # The fields keep what went over the wire: only printing redacts.
    assert _message().headers[0] == ("Authorization", SECRET)


def test_repr_gives_the_body_size_not_its_bytes() -> None:
    body = (b"\x00" * 3_000_000, memoryview(b"tail"))
    text = repr(_message(body))
    assert "body=<3000004 bytes in 2 buffer(s)>" in text
    assert len(text) < 500
    assert str(_message()) == repr(_message())


def test_print_hook_redacts_and_previews() -> None:
    out = io.StringIO()
    print_hook(out, body_limit=4)(_message((b"0123456789",)))
    printed = out.getvalue()
    assert SECRET not in printed
    assert "authorization: <redacted>" in printed.lower()
    assert "0123... (10 bytes)" in printed
