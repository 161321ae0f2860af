"""Big bodies (issue #22, item 3): an upload without a token is refused before its body is
read, a body over its limit is refused unread (or cut off when it gives no length), a file
over the per-file limit is refused by name while it streams, and nothing is echoed back.

Before the fix, a 1 GB body with no token was written to temporary storage in full before
its 401, and a 200 MB file was refused only after it had been read."""

from __future__ import annotations

import re
import socket
import time
from urllib.parse import urlparse

import httpx

PASSWORD = "password-789"
GIB = 1024**3
# a well-formed start of a form with one file (a server that reads bodies goes on reading)
FORM_START = (
    b'--xyz\r\nContent-Disposition: form-data; name="files"; filename="big.bin"\r\n'
    b"Content-Type: application/octet-stream\r\n\r\n" + b"x" * 65536
)


def _send_head(base: str, path: str, headers: dict[str, str], body: bytes = b"") -> socket.socket:
    """Open a connection and send a request head (and the start of a body) only."""
    url = urlparse(base)
    sock = socket.create_connection((url.hostname, url.port), timeout=10)
    lines = [f"POST {path} HTTP/1.1", f"Host: {url.netloc}"]
    lines += [f"{k}: {v}" for k, v in headers.items()]
    sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
    return sock


def _status(sock: socket.socket, timeout: float = 5.0) -> tuple[int, bytes]:
    """The status the server answers with, and what came with it, within ``timeout``."""
    sock.settimeout(timeout)
    data = b""
    try:
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
        # the body may come in a later packet than the head: read as much as it says
        head, _, body = data.partition(b"\r\n\r\n")
        length = re.search(rb"(?im)^content-length:\s*(\d+)", head)
        while length and len(body) < int(length.group(1)):
            chunk = sock.recv(65536)
            if not chunk:
                break
            body += chunk
            data += chunk
    except OSError:
        pass  # the server closed early; what came is what we judge
    finally:
        sock.close()
    return int(data.split(b" ", 2)[1]), data


def _token(site, name: str) -> str:  # noqa: ANN001
    r = httpx.post(site.base + "/api/login", json={"username": name, "password": PASSWORD})
    return r.json()["token"]


def test_a_1gb_upload_without_a_token_is_refused_before_it_is_read(site) -> None:  # noqa: ANN001
    """The head says 1 GB is coming and only 64 KB of it is sent: the 401 comes at once (the
    server read no further), for the admin API and for the console's Gradio upload route."""
    for path in ("/api/admin/documents", "/admin/gradio_api/upload"):
        head = {
            "Content-Type": "multipart/form-data; boundary=xyz",
            "Content-Length": str(GIB),
        }
        started = time.monotonic()
        status, _ = _status(_send_head(site.base, path, head, FORM_START))
        assert status == 401, path
        assert time.monotonic() - started < 3, path


def test_a_staff_token_gets_403_before_the_body(site) -> None:  # noqa: ANN001
    head = {
        "Content-Type": "multipart/form-data; boundary=xyz",
        "Content-Length": str(GIB),
        "Authorization": f"Bearer {_token(site, 'alice')}",
    }
    status, _ = _status(_send_head(site.base, "/api/admin/documents", head, FORM_START))
    assert status == 403


def test_an_admin_upload_over_the_batch_limit_is_refused_unread(site) -> None:  # noqa: ANN001
    """Even an admin's 1 GB request is 413 from its head alone."""
    head = {
        "Content-Type": "multipart/form-data; boundary=xyz",
        "Content-Length": str(GIB),
        "Authorization": f"Bearer {_token(site, 'root')}",
    }
    status, data = _status(_send_head(site.base, "/api/admin/documents", head, FORM_START))
    assert status == 413 and b"too large" in data


def test_a_chunked_body_is_cut_off_at_the_limit(site) -> None:  # noqa: ANN001
    """Without a length, the body is counted as it comes: past the limit, 413, while the
    client is still sending."""
    head = {
        "Content-Type": "application/json",
        "Transfer-Encoding": "chunked",
        "Authorization": f"Bearer {_token(site, 'alice')}",
    }
    sock = _send_head(site.base, "/api/chat", head)
    chunk = b"a" * 65536
    sent = 0
    try:
        for _ in range(64):  # up to 4 MB, over the 1 MB default
            sock.sendall(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
            sent += len(chunk)
    except OSError:
        pass  # the server answered and closed while we were still sending
    status, _ = _status(sock)
    assert status == 413


def test_a_big_json_body_is_refused_and_not_echoed(site) -> None:  # noqa: ANN001
    """A 5 MB body of the wrong shape (a JSON string, not an object) gets a short 413; it
    used to get a 422 that carried the whole 5 MB back as the error's ``input``."""
    token = _token(site, "alice")
    r = httpx.post(
        site.base + "/api/chat",
        json="x" * 5_000_000,
        headers={"authorization": f"Bearer {token}"},
        timeout=30,
    )
    assert r.status_code == 413 and len(r.content) < 2000


def test_a_file_over_the_per_file_limit_is_refused_by_name_as_it_streams(own_site) -> None:  # noqa: ANN001
    """1 MB per file: a 3 MB file is refused by name and the small one in the same batch lands
    (that no more than the limit of it is kept: tests/appliance/api/test_multipart.py)."""
    with own_site(rag={"max_upload_mb": 1, "max_upload_batch_mb": 8}) as s:
        token = _token(s, "root")
        files = [
            ("files", ("big.txt", b"word " * 600_000, "text/plain")),
            ("files", ("small.md", b"# Plants\n\nThe office plants are watered on Fridays.\n")),
        ]
        r = httpx.post(
            s.base + "/api/admin/documents",
            files=files,
            data={"collection": "default"},
            headers={"authorization": f"Bearer {token}"},
            timeout=120,
        )
        assert r.status_code == 200, r.text
        outcome = {f["name"]: f for f in r.json()}
        assert outcome["big.txt"]["status"] == "error"
        assert "1 MB limit" in outcome["big.txt"]["error"]
        assert outcome["small.md"]["status"] == "indexed"
        # a batch over its own limit: 413 from the head (httpx sends the length)
        big = [("files", (f"f{i}.txt", b"x" * 1_000_000)) for i in range(9)]
        r = httpx.post(
            s.base + "/api/admin/documents",
            files=big,
            headers={"authorization": f"Bearer {token}"},
            timeout=120,
        )
        assert r.status_code == 413


def test_gradio_validation_errors_do_not_echo_the_body(site) -> None:  # noqa: ANN001
    """The chat page's Gradio app answered a malformed call with FastAPI's default 422, which
    repeats the input: 900 KB in, 900 KB out."""
    with httpx.Client(base_url=site.base, timeout=30) as http:
        http.post("/login", data={"username": "alice", "password": PASSWORD})
        r = http.post("/gradio_api/queue/join", json={"data": "x" * 900_000, "fn_index": "x"})
    assert r.status_code == 422 and len(r.content) < 4000
