"""The sign-in and sign-out pages: plain HTML with inline styles (no script, no font, nothing
from a CDN)."""

from __future__ import annotations

import html
from urllib.parse import quote

from ui.i18n import LANGUAGE_NAMES, t

_STYLE = """
body { font-family: system-ui, "Apple SD Gothic Neo", "Malgun Gothic", sans-serif;
  background: #f4f5f9; margin: 0; display: grid; place-items: center; min-height: 100vh; }
main { background: #fff; padding: 32px 36px; border-radius: 12px; width: 320px;
  box-shadow: 0 4px 24px rgba(0,0,0,.08); }
h1 { font-size: 1.3rem; margin: 0 0 4px; } p { color: #555; margin: 0 0 18px; }
label { display: block; font-size: .9rem; margin: 12px 0 4px; }
input { width: 100%; box-sizing: border-box; padding: 9px 10px; border: 1px solid #ccd;
  border-radius: 8px; font-size: 1rem; }
button { margin-top: 20px; width: 100%; padding: 10px; border: 0; border-radius: 8px;
  background: #4f46e5; color: #fff; font-size: 1rem; cursor: pointer; }
.sso { display: block; text-align: center; padding: 10px; border: 1px solid #4f46e5;
  border-radius: 8px; color: #4f46e5; text-decoration: none; margin-bottom: 6px; }
.or { text-align: center; font-size: .85rem; margin: 10px 0 0; }
.msg { color: #b42318; background: #fef3f2; padding: 8px 10px; border-radius: 8px; }
nav { margin-top: 18px; font-size: .85rem; text-align: center; color: #777; }
"""


def _page(lang: str, title: str, body: str) -> str:
    e = html.escape
    return f"""<!doctype html>
<html lang="{lang}"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{e(title)} · {e(t(lang, "app.title"))}</title>
<style>{_STYLE}</style></head>
<body><main>
<h1>{e(t(lang, "app.title"))}</h1>
{body}
</main></body></html>"""


def render_login(
    lang: str, message: str = "", username: str = "", next_path: str = "/", provider: str = ""
) -> str:
    """The whole sign-in page in ``lang``; ``message`` is shown above the form; with
    ``provider`` (the OIDC provider's display name), a "Sign in with" button above it."""
    e = html.escape
    switch = " · ".join(
        f"<a href='/login?lang={code}&amp;next={quote(next_path)}' lang='{code}'>{e(name)}</a>"
        if code != lang
        else f"<b>{e(name)}</b>"
        for code, name in LANGUAGE_NAMES.items()
    )
    note = f"<p class='msg' role='alert'>{e(message)}</p>" if message else ""
    sso = (
        f"<a class='sso' id='oidc-login' href='/oidc/login?next={e(quote(next_path))}'>"
        f"{e(t(lang, 'login.oidc', provider=provider))}</a>"
        f"<p class='or'>{e(t(lang, 'login.or'))}</p>"
        if provider
        else ""
    )
    body = f"""<p>{e(t(lang, "login.intro"))}</p>
{note}
{sso}
<form method="post" action="/login">
<input type="hidden" name="next" value="{e(next_path)}">
<input type="hidden" name="lang" value="{lang}">
<label for="username">{e(t(lang, "login.username"))}</label>
<input id="username" name="username" autocomplete="username" required value="{e(username)}">
<label for="password">{e(t(lang, "login.password"))}</label>
<input id="password" name="password" type="password" autocomplete="current-password" required>
<button type="submit" id="login">{e(t(lang, "login.submit"))}</button>
</form>
<nav aria-label="{e(t(lang, "nav.language"))}">{switch}</nav>"""
    return _page(lang, t(lang, "login.title"), body)


def render_logout(lang: str) -> str:
    """The page ``GET /logout`` shows a signed-in user: it asks, and only its button (a form
    posting to ``/logout``) signs out."""
    e = html.escape
    body = f"""<p>{e(t(lang, "logout.confirm"))}</p>
<form method="post" action="/logout">
<button type="submit" id="logout">{e(t(lang, "nav.logout"))}</button>
</form>
<nav><a href="/">{e(t(lang, "logout.back"))}</a></nav>"""
    return _page(lang, t(lang, "nav.logout"), body)
