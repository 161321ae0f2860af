"""A streaming ``multipart/form-data`` reader that never holds more of a file than its limit.

Starlette's form parser spools every file to disk in full before the endpoint sees it, so a
200 MB file over a 50 MB limit is read and written before it is refused. Here each file keeps
at most ``max_file_bytes + 1`` bytes (one past the limit, so the ingest service refuses it by
name, as too large) and the rest of it is counted and dropped as it arrives. The request's
total size is bounded before this runs (``appliance.wiring.body_guard``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from python_multipart.exceptions import FormParserError
from python_multipart.multipart import MultipartParser, parse_options_header
from starlette.requests import Request

# the text fields of an upload form (collection): small, and there are few of them
MAX_FIELD_BYTES = 4096
MAX_PARTS = 1000


class MultipartError(ValueError):
    """The body is not a well-formed ``multipart/form-data`` form (message says why)."""


@dataclass
class FilePart:
    """One uploaded file: its name as the client gave it, and at most the limit + 1 bytes."""

    field: str
    filename: str
    data: bytearray = field(default_factory=bytearray)
    size: int = 0  # every byte the client sent for it, kept or not


@dataclass
class Form:
    files: list[FilePart]
    fields: dict[str, str]


class _Collector:
    """The parser's callbacks: headers per part, then its data, capped per file."""

    def __init__(self, max_file_bytes: int) -> None:
        self.keep = max_file_bytes + 1
        self.files: list[FilePart] = []
        self.fields: dict[str, bytearray] = {}
        self._header_field = bytearray()
        self._header_value = bytearray()
        self._headers: dict[bytes, bytes] = {}
        self._current: FilePart | bytearray | None = None
        self._parts = 0

    def part_begin(self) -> None:
        self._parts += 1
        if self._parts > MAX_PARTS:
            raise MultipartError(f"more than {MAX_PARTS} parts in one form")
        self._headers = {}
        self._current = None

    def header_field(self, data: bytes, start: int, end: int) -> None:
        self._header_field += data[start:end]

    def header_value(self, data: bytes, start: int, end: int) -> None:
        self._header_value += data[start:end]

    def header_end(self) -> None:
        self._headers[bytes(self._header_field).lower()] = bytes(self._header_value)
        self._header_field.clear()
        self._header_value.clear()

    def headers_finished(self) -> None:
        _, options = parse_options_header(self._headers.get(b"content-disposition"))
        name = options.get(b"name", b"").decode("utf-8", "replace")
        if b"filename" in options:
            filename = options[b"filename"].decode("utf-8", "replace")
            self._current = FilePart(name, filename)
            self.files.append(self._current)
        else:
            self._current = self.fields.setdefault(name, bytearray())

    def part_data(self, data: bytes, start: int, end: int) -> None:
        part = self._current
        if isinstance(part, FilePart):
            room = self.keep - len(part.data)
            if room > 0:
                part.data += data[start : min(end, start + room)]
            part.size += end - start
        elif part is not None:
            if len(part) + end - start > MAX_FIELD_BYTES:
                raise MultipartError(f"a form field is longer than {MAX_FIELD_BYTES} bytes")
            part += data[start:end]


async def read_form(request: Request, max_file_bytes: int) -> Form:
    """Parse the request's multipart body as it streams in; raises ``MultipartError``."""
    content_type, params = parse_options_header(request.headers.get("content-type"))
    boundary = params.get(b"boundary")
    if content_type != b"multipart/form-data" or not boundary:
        raise MultipartError("expected a multipart/form-data body with a boundary")
    c = _Collector(max_file_bytes)
    parser = MultipartParser(
        boundary,
        {
            "on_part_begin": c.part_begin,
            "on_header_field": c.header_field,
            "on_header_value": c.header_value,
            "on_header_end": c.header_end,
            "on_headers_finished": c.headers_finished,
            "on_part_data": c.part_data,
        },
    )
    try:
        async for chunk in request.stream():
            parser.write(chunk)
        parser.finalize()
    except FormParserError as exc:  # the parser's own errors: a malformed body
        raise MultipartError(f"malformed multipart body: {exc}") from exc
    fields = {k: v.decode("utf-8", "replace") for k, v in c.fields.items()}
    return Form(c.files, fields)
