"""``/metrics`` is not public (issue #22, item 9: it exposed usage without a login), and
``/admin`` without its slash reaches the console (it was a 404, also after
``/login?next=/admin``)."""

from __future__ import annotations

import httpx

PASSWORD = "password-789"
TOKEN = "scrape-token-0123456789abcdef"


def _bearer(base: str, name: str) -> dict[str, str]:
    r = httpx.post(base + "/api/login", json={"username": name, "password": PASSWORD})
    return {"authorization": f"Bearer {r.json()['token']}"}


def test_metrics_needs_the_scrape_token_or_an_admin(own_site) -> None:  # noqa: ANN001
    with own_site(security={"metrics_token": TOKEN}) as s:
        url = s.base + "/metrics"
        assert httpx.get(url).status_code == 401
        assert httpx.get(url, headers={"authorization": "Bearer wrong"}).status_code == 401
        assert httpx.get(url, headers=_bearer(s.base, "alice")).status_code == 403
        scraped = httpx.get(url, headers={"authorization": f"Bearer {TOKEN}"})
        assert scraped.status_code == 200 and "appliance_chat_turns_total" in scraped.text
        assert httpx.get(url, headers=_bearer(s.base, "root")).status_code == 200
        with httpx.Client(base_url=s.base) as browser_like:  # the admin's browser session
            browser_like.post("/login", data={"username": "root", "password": PASSWORD})
            assert browser_like.get("/metrics").status_code == 200


def test_metrics_without_a_configured_token_is_admins_only(site) -> None:  # noqa: ANN001
    assert httpx.get(site.base + "/metrics").status_code == 401
    anything = {"authorization": "Bearer " + "x" * 32}
    assert httpx.get(site.base + "/metrics", headers=anything).status_code == 401


def test_admin_without_the_slash_reaches_the_console(site) -> None:  # noqa: ANN001
    with httpx.Client(base_url=site.base, follow_redirects=True) as http:
        signed_out = http.get("/admin", headers={"accept": "text/html"})
        assert signed_out.url.path == "/login"
        assert "next=/admin" in str(signed_out.url)
        form = {"username": "root", "password": PASSWORD, "next": "/admin"}
        landed = http.post("/login", data=form, headers={"accept": "text/html"})
        assert landed.status_code == 200 and landed.url.path == "/admin/"
        assert "gradio" in landed.text.lower()
