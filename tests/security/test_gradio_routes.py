"""Issue #30: Gradio's own routes of the chat page and the admin console.

- Item 4: any signed-in user could store files through the chat page's ``/gradio_api/upload``
  (30 MB in 0.6 s, never cleaned up), though the chat page has no upload.
- Item 5: staff could download the console's files (an audit export, an uploaded document)
  through ``file=``: the role was not checked. And ``file=<URL>`` fetched from the internet.
- Item 8: ``queue/join`` with an unknown event index (9999, -1) was a 500.
- Uploads given to the console are deleted once ingested, and swept when never ingested."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from appliance.wiring.admin import UPLOAD_MAX_AGE_S, UPLOAD_SWEEP_S

PASSWORD = "password-789"


@contextmanager
def _signed_in(site, name: str) -> Iterator[httpx.Client]:  # noqa: ANN001
    with httpx.Client(base_url=site.base, timeout=60) as http:
        form = {"username": name, "password": PASSWORD}
        assert http.post("/login", data=form).status_code == 303
        yield http


def _upload(
    http: httpx.Client, path: str, name: str = "note.md", text: str = "The code is 4471."
) -> httpx.Response:
    # Gradio keeps an upload in a folder named by its content's hash
    return http.post(path, files={"files": (name, f"# Note\n\n{text}\n".encode())})


def _upload_dir(site) -> Path:  # noqa: ANN001
    with _signed_in(site, "root") as admin:
        r = _upload(admin, "/admin/gradio_api/upload")
        assert r.status_code == 200, r.text
        return Path(r.json()[0]).parent.parent  # Gradio's folder: <dir>/<hash>/<name>


def _files_under(folder: Path) -> set[Path]:
    return {p for p in folder.rglob("*") if p.is_file()}


def test_the_chat_page_takes_no_uploads(site) -> None:  # noqa: ANN001
    folder = _upload_dir(site)
    before = _files_under(folder)
    with _signed_in(site, "alice") as staff:
        for _ in range(3):
            r = _upload(staff, "/gradio_api/upload")
            assert r.status_code == 404, r.text
            assert "no uploads" in r.text
    assert _files_under(folder) == before  # nothing was stored


def test_the_consoles_files_are_for_admins_only(site) -> None:  # noqa: ANN001
    with _signed_in(site, "root") as admin:
        stored = _upload(admin, "/admin/gradio_api/upload").json()[0]
        assert admin.get(f"/admin/gradio_api/file={stored}").status_code == 200
    with _signed_in(site, "alice") as staff:
        r = staff.get(f"/admin/gradio_api/file={stored}")
        assert r.status_code == 403 and "4471" not in r.text
        # nor through the chat page's own route, which hands out no files
        r = staff.get(f"/gradio_api/file={stored}")
        assert r.status_code == 404 and "4471" not in r.text
    with httpx.Client(base_url=site.base, timeout=60) as anonymous:
        assert anonymous.get(f"/admin/gradio_api/file={stored}").status_code in (401, 403)


@pytest.mark.parametrize(
    "route",
    [
        "/gradio_api/file=http://example.com/x.png",
        "/admin/gradio_api/file=https://example.com/x.png",
        "/admin/gradio_api/file=HTTPS%3A//example.com/x.png",
        "/admin/gradio_api/file=//example.com/x.png",
        "/admin/gradio_api/proxy=https://example.com/",
    ],
)
def test_nothing_is_fetched_from_elsewhere(site, route: str) -> None:  # noqa: ANN001
    with _signed_in(site, "root") as admin:
        started = time.monotonic()
        r = admin.get(route)
        assert r.status_code == 403, (route, r.status_code)
        assert time.monotonic() - started < 2  # refused, not tried


@pytest.mark.parametrize("index", [9999, -1, "9999", 1e9, 2**70])
def test_an_unknown_event_index_is_a_4xx(site, index) -> None:  # noqa: ANN001
    for name, prefix in (("alice", ""), ("root", "/admin")):
        with _signed_in(site, name) as http:
            for route in ("queue/join", "run/predict", "api/predict"):
                body = {"data": [], "fn_index": index, "session_hash": "probe0001"}
                r = http.post(f"{prefix}/gradio_api/{route}", json=body)
                assert 400 <= r.status_code < 500, (prefix, route, index, r.status_code)
                assert r.status_code != 500
    # a known index still joins the queue
    with _signed_in(site, "alice") as http:
        body = {"data": [None], "fn_index": 0, "session_hash": "probe0002"}
        assert http.post("/gradio_api/queue/join", json=body).status_code == 200


def _call(http: httpx.Client, prefix: str, endpoint: str, data: list) -> str:
    event = http.post(f"{prefix}/gradio_api/call{endpoint}", json={"data": data})
    assert event.status_code == 200, event.text
    return http.get(f"{prefix}/gradio_api/call{endpoint}/{event.json()['event_id']}").text


def test_an_ingested_upload_leaves_no_file_behind(site) -> None:  # noqa: ANN001
    with _signed_in(site, "root") as admin:
        text = f"The gate code is {time.time_ns()}."
        stored = _upload(admin, "/admin/gradio_api/upload", "gone-after.md", text).json()[0]
        assert Path(stored).exists()
        endpoints = admin.get("/admin/gradio_api/info").json()["named_endpoints"]
        (upload,) = [
            name
            for name, spec in endpoints.items()
            if [p["component"] for p in spec["parameters"]] == ["File", "Dropdown"]
        ]
        file = {"path": stored, "orig_name": "gone-after.md", "meta": {"_type": "gradio.FileData"}}
        answer = _call(admin, "/admin", upload, [[file], "default"])
        assert "indexed" in answer, answer[-400:]
    assert not Path(stored).exists()
    assert not Path(stored).parent.exists()


def test_uploads_never_ingested_are_swept(site) -> None:  # noqa: ANN001
    """The console sweeps Gradio's copies of what it was given (uploads never ingested,
    exports) an hour after they came: its page is built with that sweep, and an upload is
    among the files the sweep deletes."""
    from gradio.route_utils import delete_files_created_by_app
    from starlette.routing import Mount

    (console,) = [r.app for r in site.app.routes if isinstance(r, Mount) and r.path == "/admin"]
    blocks = console.get_blocks()
    assert blocks.delete_cache == (UPLOAD_SWEEP_S, UPLOAD_MAX_AGE_S)
    assert UPLOAD_SWEEP_S <= 600 and UPLOAD_MAX_AGE_S <= 3600
    with _signed_in(site, "root") as admin:
        stored = Path(_upload(admin, "/admin/gradio_api/upload", "left.md").json()[0])
    delete_files_created_by_app(blocks, 0)  # what the sweep does once the age has passed
    assert not stored.exists()


def test_a_host_that_names_another_site_is_refused(site) -> None:  # noqa: ANN001
    """Issue #30, item 9: a DNS-rebinding page reaches the box as ``rebind.attacker.example``;
    the box answers only to its addresses, ``localhost`` and ``security.allowed_hosts``."""
    with httpx.Client(base_url=site.base, timeout=30) as http:
        for path in ("/login", "/api/login", "/gradio_api/info"):
            r = http.get(path, headers={"host": "rebind.attacker.example"})
            assert r.status_code == 400 and "allowed_hosts" in r.text, path
        form = {"username": "alice", "password": PASSWORD}
        r = http.post("/login", data=form, headers={"host": "rebind.attacker.example"})
        assert r.status_code == 400 and "appliance_session" not in r.headers.get("set-cookie", "")
        port = site.base.rsplit(":", 1)[1]
        assert http.get("/login", headers={"host": f"localhost:{port}"}).status_code == 200
