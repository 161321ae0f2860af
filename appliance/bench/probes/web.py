"""Probes of the browser-facing edges: cross-origin writes and CORS, security headers, the
``/admin`` path, ``GET /logout``, ``/metrics``, oversized and unsigned uploads."""

from __future__ import annotations

from urllib.parse import urlparse

from appliance.bench.probes.target import Outcome, Target

GIB = 1024**3
# a well-formed start of a form with one file: a server that reads bodies goes on reading
FORM_START = (
    b'--x\r\nContent-Disposition: form-data; name="files"; filename="big.bin"\r\n'
    b"Content-Type: application/octet-stream\r\n\r\n" + b"x" * 65536
)


def _foreign(t: Target) -> str:
    return f"http://127.0.0.1:{(urlparse(t.base).port or 80) + 1}"


def cross_origin_key(t: Target) -> Outcome:
    """A page on another port posts to the chat page's key endpoint with the user's cookie."""
    user = t.staff("csrf")
    with t.signed_in_browser(user) as http:
        names = http.get("/gradio_api/info").json().get("named_endpoints", {})
        endpoint = next((n for n in names if n.strip("/") == "create"), "/create")
        r = http.post(
            f"/gradio_api/call{endpoint}",
            json={"data": ["stolen", "en"]},
            headers={"origin": _foreign(t)},
        )
        if r.status_code == 200 and "event_id" in r.text:
            http.get(f"/gradio_api/call{endpoint}/{r.json()['event_id']}")
    with t.client() as http:
        keys = http.get("/api/keys", headers=t.bearer(user)).json()
    made = len(keys)
    return Outcome(f"{r.status_code}, {made} key(s) made", r.status_code == 403 and made == 0)


def cors_credentials(t: Target) -> Outcome:
    """Does another origin get ``Access-Control-Allow-Credentials``?"""
    with t.client() as http:
        r = http.get("/gradio_api/info", headers={"origin": _foreign(t)})
    given = r.headers.get("access-control-allow-credentials")
    return Outcome(f"credentials: {given or 'not allowed'}", given is None)


def security_headers(t: Target) -> Outcome:
    with t.client() as http:
        h = http.get("/login").headers
    wanted = (
        "content-security-policy",
        "x-frame-options",
        "x-content-type-options",
        "referrer-policy",
    )
    missing = [n for n in wanted if n not in h]
    remote_images = "img-src 'self' data:" not in h.get("content-security-policy", "")
    got = f"missing: {', '.join(missing)}" if missing else "all four"
    return Outcome(got, not missing and not remote_images)


def admin_without_slash(t: Target) -> Outcome:
    with t.client() as http:
        r = http.get("/admin", headers={"accept": "text/html"})
    return Outcome(str(r.status_code), r.status_code in (301, 302, 303, 307, 308))


def get_logout(t: Target) -> Outcome:
    """A link (``<img src=/logout>`` on any page) must not sign the user out."""
    user = t.staff("logout")
    with t.signed_in_browser(user) as http:
        http.get("/logout")
        still = http.get("/", headers={"accept": "text/html"}).status_code == 200
    return Outcome("still signed in" if still else "signed out", still)


def metrics_public(t: Target) -> Outcome:
    with t.client() as http:
        r = http.get("/metrics")
    return Outcome(str(r.status_code), r.status_code == 401)


def unsigned_upload(t: Target) -> Outcome:
    """1 GB announced, no token: refused before the body is read."""
    head = {"Content-Type": "multipart/form-data; boundary=x", "Content-Length": str(GIB)}
    seen = t.send_head("/api/admin/documents", head, FORM_START)
    return Outcome(seen.got, seen.ok and seen.got.startswith("401"))


def oversized_upload(t: Target) -> Outcome:
    """An admin's 300 MB request: refused from its head."""
    head = {
        "Content-Type": "multipart/form-data; boundary=x",
        "Content-Length": str(300 * 1024 * 1024),
        **{k.title(): v for k, v in t.bearer().items()},
    }
    seen = t.send_head("/api/admin/documents", head, FORM_START)
    return Outcome(seen.got, seen.ok and seen.got.startswith("413"))


def echoed_body(t: Target) -> Outcome:
    """A 5 MB body of the wrong shape: how much of it comes back?"""
    with t.client() as http:
        r = http.post("/api/chat", json="x" * 5_000_000, headers=t.bearer())
    return Outcome(f"{r.status_code}, {len(r.content):,} bytes back", len(r.content) < 4096)
