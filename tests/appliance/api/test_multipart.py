"""The streaming multipart reader keeps at most the limit + 1 byte of each file, counts the
rest, reads the text fields, and refuses a malformed body with a clear message."""

from __future__ import annotations

import asyncio

import pytest
from starlette.requests import Request

from appliance.api.multipart import MultipartError, read_form

BOUNDARY = "b0undary"


def _body(parts: list[tuple[str, str | None, bytes]]) -> bytes:
    out = b""
    for name, filename, data in parts:
        disposition = f'form-data; name="{name}"'
        if filename is not None:
            disposition += f'; filename="{filename}"'
        out += f"--{BOUNDARY}\r\nContent-Disposition: {disposition}\r\n\r\n".encode()
        out += data + b"\r\n"
    return out + f"--{BOUNDARY}--\r\n".encode()


def _request(body: bytes, chunk: int = 7919, content_type: str | None = None) -> Request:
    """A request whose body arrives in ``chunk``-byte pieces, as from a socket."""
    pieces = [body[i : i + chunk] for i in range(0, len(body), chunk)] or [b""]
    messages = [
        {"type": "http.request", "body": p, "more_body": i < len(pieces) - 1}
        for i, p in enumerate(pieces)
    ]

    async def receive() -> dict:
        return messages.pop(0)

    ctype = content_type or f"multipart/form-data; boundary={BOUNDARY}"
    scope = {"type": "http", "method": "POST", "headers": [(b"content-type", ctype.encode())]}
    return Request(scope, receive)


def test_each_file_keeps_at_most_the_limit_plus_one_byte() -> None:
    big = bytes(range(256)) * 4000  # 1,024,000 bytes
    body = _body(
        [
            ("files", "big.bin", big),
            ("files", "small.txt", b"hello"),
            ("collection", None, "인사팀".encode()),
        ]
    )
    form = asyncio.run(read_form(_request(body), max_file_bytes=1000))
    big_part, small_part = form.files
    assert (big_part.filename, len(big_part.data), big_part.size) == ("big.bin", 1001, len(big))
    assert bytes(big_part.data) == big[:1001]
    assert (small_part.filename, bytes(small_part.data), small_part.size) == (
        "small.txt",
        b"hello",
        5,
    )
    assert form.fields == {"collection": "인사팀"}


def test_a_body_that_is_not_a_form_is_refused() -> None:
    with pytest.raises(MultipartError, match="multipart/form-data"):
        asyncio.run(read_form(_request(b"{}", content_type="application/json"), 10))
    with pytest.raises(MultipartError, match="malformed"):
        asyncio.run(read_form(_request(b"--other\r\ngarbage"), 10))


def test_an_oversized_text_field_is_refused() -> None:
    body = _body([("collection", None, b"x" * 5000)])
    with pytest.raises(MultipartError, match="longer than"):
        asyncio.run(read_form(_request(body), 10))
