"""``OriginGuard``'s decision (pure): which requests pass, which are refused, which
preflights are answered."""

from __future__ import annotations

import pytest
from starlette.datastructures import Headers

from appliance.wiring.origin import decide, origin_of

HOST = {"host": "127.0.0.1:7860"}
ALLOWED = frozenset({"https://portal.corp:443"})


@pytest.mark.parametrize(
    ("url", "origin"),
    [
        ("http://127.0.0.1:7860", "http://127.0.0.1:7860"),
        ("HTTP://LocalHost:7860/path?q", "http://localhost:7860"),
        ("https://portal.corp", "https://portal.corp:443"),
        ("http://portal.corp", "http://portal.corp:80"),
        ("null", None),
        ("file:///etc/passwd", None),
        ("http://host:99999", None),
        ("http://host:abc", None),
    ],
)
def test_origin_of(url: str, origin: str | None) -> None:
    assert origin_of(url) == origin


@pytest.mark.parametrize(
    ("method", "headers", "verdict"),
    [
        ("GET", {"origin": "http://evil:1"}, "pass"),  # safe: reading needs CORS, not given
        ("POST", {}, "pass"),  # no Origin, no Referer: not a browser's cross-origin request
        ("POST", {"origin": "http://127.0.0.1:7860"}, "pass"),
        ("POST", {"referer": "http://127.0.0.1:7860/admin/"}, "pass"),
        ("POST", {"origin": "http://127.0.0.1:7861"}, "refuse"),  # another port
        ("DELETE", {"origin": "http://localhost:7860"}, "refuse"),  # another host name
        ("POST", {"origin": "null"}, "refuse"),
        ("PUT", {"referer": "http://127.0.0.1:9/x"}, "refuse"),
        ("POST", {"origin": "https://portal.corp"}, "pass"),  # listed
        (
            "OPTIONS",
            {"origin": "https://portal.corp", "access-control-request-method": "POST"},
            "preflight",
        ),
        ("OPTIONS", {"origin": "http://evil:1", "access-control-request-method": "POST"}, "refuse"),
        ("OPTIONS", {"origin": "http://evil:1"}, "pass"),  # not a preflight
    ],
)
def test_decide(method: str, headers: dict[str, str], verdict: str) -> None:
    assert decide(method, "http", Headers({**HOST, **headers}), ALLOWED)[0] == verdict
