"""Malformed input never crashes the server (issue #22, items 1 and 2).

``test_every_route_survives_malformed_input`` takes every operation of the web app's OpenAPI
schema and calls it as an admin, as staff and without a token, with out-of-range and
ill-typed ids, NaN and infinite numbers, huge numbers, invalid Unicode (lone surrogates as
JSON ``\\ud800`` escapes and as raw UTF-8 bytes), and empty, broken and missing bodies; no
answer may be a 5xx other than 503 (a busy engine). The cases are generated from the schema,
one value class at a time (hypothesis is not installed). It runs on a site of its own, since it
creates users and keys and changes settings.

``test_bad_ids_numbers_and_text_are_refused`` checks the concrete inputs the adversarial pass
found to answer 500: each is now a 4xx.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass

import httpx

PASSWORD = "password-789"
HUGE = "99999999999999999999999"  # beyond 64 bits

# values for a path parameter (already percent-encoded, as they go on the wire)
PATH_INT = [HUGE, "-" + HUGE, "0", "abc", "nan", "%ED%A0%80", "%00"]
PATH_STR = ["%ED%A0%80", "%00", "%FF", "a" * 3000, "..%2F..%2Fetc", "%3Cb%3Ex%3C%2Fb%3E"]
# values for a query parameter
QUERY_NUM = ["nan", "inf", "-inf", "1e308", HUGE, "-" + HUGE, "abc", ""]
QUERY_STR = ["%ED%A0%80", "%00", "%FF", "a" * 3000]
# one body field replaced by each of these (JSON text, raw bytes where JSON cannot say it)
FIELD_VALUES: list[bytes] = [
    b'"\\ud800"',
    b'"\xed\xa0\x80"',  # a surrogate as raw (invalid) UTF-8
    b'"a\\u0000b"',
    b"NaN",
    b"1e400",
    HUGE.encode(),
    b"null",
    b'[{"\\ud800": 1}]',
    b"{}",
    b'"' + b"a" * 20_000 + b'"',
]
# whole bodies
RAW_BODIES: list[bytes] = [
    b"",
    b"{",
    b"null",
    b"NaN",
    b"\xff\xfe\xfd",  # bytes that are not UTF-8 at all
    b'{"\xed\xa0\x80": "\xed\xa0\x80"}',
    b"[" * 5000,
]


@dataclass(frozen=True)
class Case:
    method: str
    url: str
    body: bytes | None  # None: no body at all

    def label(self) -> str:
        shown = self.body if self.body is None or len(self.body) < 80 else self.body[:80] + b"..."
        return f"{self.method} {self.url[:120]} {shown!r}"


def _resolve(schema: dict, spec: dict) -> dict:
    while "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[1]
        schema = spec["components"]["schemas"][name]
    return schema


def _kind(schema: dict, spec: dict) -> str:
    """The JSON type of a (resolved, possibly optional) schema: its first non-null type."""
    schema = _resolve(schema, spec)
    for option in schema.get("anyOf", []):
        if _resolve(option, spec).get("type") != "null":
            return _kind(option, spec)
    return schema.get("type", "object")


def _valid(schema: dict, spec: dict, name: str = "") -> object:
    """A value that a route accepts for ``schema`` but that names nothing real: ids that
    exist nowhere (so no turn runs on a stored conversation), harmless strings."""
    schema = _resolve(schema, spec)
    kind = _kind(schema, spec)
    if kind == "integer":
        return 2**63 - 1 if name.endswith("id") else 1
    if kind == "number":
        return 1.0
    if kind == "boolean":
        return False
    if kind == "string":
        return "user" if name == "role" else "fuzz"
    if kind == "array":
        items = schema.get("items") or next(
            (o["items"] for o in schema.get("anyOf", []) if "items" in o), {}
        )
        return [_valid(items, spec)] if items else []
    if "anyOf" in schema:
        schema = _resolve(
            next(o for o in schema["anyOf"] if _resolve(o, spec).get("type") != "null"), spec
        )
    props = schema.get("properties", {})
    return {k: _valid(v, spec, k) for k, v in props.items() if k in schema.get("required", [])}


def _with_field(base: dict, field: str, raw: bytes) -> bytes:
    """``base`` as JSON with ``field`` set to the JSON text ``raw``."""
    parts = [json.dumps(k).encode() + b": " + json.dumps(v).encode() for k, v in base.items()]
    parts = [p for p, k in zip(parts, base, strict=True) if k != field]
    parts.append(json.dumps(field).encode() + b": " + raw)
    return b"{" + b", ".join(parts) + b"}"


def _body_schema(op: dict, spec: dict) -> dict | None:
    content = op.get("requestBody", {}).get("content", {})
    if "application/json" not in content:
        return None
    return _resolve(content["application/json"]["schema"], spec)


def cases(path: str, method: str, op: dict, spec: dict, full: bool) -> Iterator[Case]:
    """The malformed calls of one operation. Without ``full`` (a caller that the route refuses
    before it validates anything) only the raw bodies and one bad value per parameter."""
    params = op.get("parameters", [])
    path_params = {p["name"]: p for p in params if p["in"] == "path"}
    query = [p for p in params if p["in"] == "query"]
    valid_path = {n: str(_valid(p.get("schema", {}), spec, n)) for n, p in path_params.items()}
    body_schema = _body_schema(op, spec)
    base_body = json.dumps(_valid(body_schema, spec)).encode() if body_schema else None

    def url(values: dict[str, str], q: str = "") -> str:
        filled = re.sub(r"\{([^}:]+)(:[^}]*)?\}", lambda m: values[m.group(1)], path)
        return filled + (f"?{q}" if q else "")

    few = None if full else 1  # a caller refused before validation: one value of each kind
    for name, p in path_params.items():
        bad = PATH_INT if _kind(p.get("schema", {}), spec) in ("integer", "number") else PATH_STR
        for value in bad[:few]:
            yield Case(method, url({**valid_path, name: value}), base_body)
    for p in query:
        kind = _kind(p.get("schema", {}), spec)
        for value in (QUERY_NUM if kind in ("integer", "number") else QUERY_STR)[:few]:
            yield Case(method, url(valid_path, f"{p['name']}={value}"), base_body)
    yield Case(method, url(valid_path), base_body)  # well-formed, naming nothing real
    if body_schema is None:
        return
    for raw in RAW_BODIES:
        yield Case(method, url(valid_path), raw)
    yield Case(method, url(valid_path), None)
    if not full:
        return
    base = _valid(body_schema, spec)
    fields = list(body_schema.get("properties", {})) if isinstance(base, dict) else []
    for field in fields or ["x"]:
        for raw in FIELD_VALUES:
            yield Case(method, url(valid_path), _with_field(base, field, raw))


def operations(spec: dict) -> list[tuple[str, str, dict]]:
    """(path, method, operation) for the whole schema; routes that end the caller's session
    or change its password come last, so the rest still run signed in."""
    ops = [
        (path, method.upper(), op)
        for path, item in spec["paths"].items()
        for method, op in item.items()
        if method in ("get", "post", "put", "patch", "delete")
    ]
    return sorted(ops, key=lambda o: o[0].endswith(("/logout", "/password")))


def _schema(site) -> dict:  # noqa: ANN001
    """The served app's OpenAPI schema (the app builds it from its routes)."""
    r = httpx.get(site.base + "/openapi.json", timeout=30)
    assert r.status_code == 200, "the app serves no /openapi.json"
    return r.json()


def _session(base: str, username: str) -> dict[str, str]:
    r = httpx.post(f"{base}/api/login", json={"username": username, "password": PASSWORD})
    assert r.status_code == 200, r.text
    return {"authorization": f"Bearer {r.json()['token']}"}


def _needs_token(op: dict) -> bool:
    return any(
        p["in"] == "header" and p["name"] == "authorization" for p in op.get("parameters", [])
    )


def _is_5xx_bug(status: int) -> bool:
    return status >= 500 and status != 503


def test_every_route_survives_malformed_input(own_site) -> None:  # noqa: ANN001
    with own_site() as s:
        # a turn that does run (an optional id left out) stays short
        s.appliance.settings.update("fuzz", {"max_new_tokens": 2})
        spec = _schema(s)
        ops = operations(spec)
        assert len(ops) >= 40, [o[:2] for o in ops]
        keys = {
            name: s.auth.api_keys.create(s.auth.principal_for(name), "fuzz")[0]
            for name in ("root", "alice")
        }
        bugs: list[str] = []
        calls = 0
        with httpx.Client(base_url=s.base, timeout=60) as http:
            for caller in ("root", "alice", None):
                session = _session(s.base, caller) if caller else {}
                for path, method, op in ops:
                    if caller and path in ("/api/login",):
                        continue  # failed logins are throttled; the anonymous pass covers it
                    headers = dict(session)
                    if caller and path.startswith("/v1"):
                        headers = {"authorization": f"Bearer {keys[caller]}"}
                    # a caller that the route refuses (no token, not an admin) before its
                    # input is validated only gets the raw bodies
                    admin_only = path.startswith("/api/admin") and caller != "root"
                    full = not admin_only if caller else not _needs_token(op)
                    for case in cases(path, method, op, spec, full):
                        extra = {"content-type": "application/json"} if case.body else {}
                        calls += 1
                        try:
                            r = http.request(
                                case.method,
                                case.url,
                                content=case.body,
                                headers={**headers, **extra},
                            )
                        except httpx.TransportError as exc:  # the server dropped the request
                            bugs.append(f"{caller}: {case.label()} -> {exc!r}")
                            continue
                        if _is_5xx_bug(r.status_code):
                            bugs.append(
                                f"{caller}: {case.label()} -> {r.status_code} {r.text[:200]}"
                            )
        assert calls > 1000
    assert not bugs, f"{len(bugs)} of {calls} calls failed:\n" + "\n".join(bugs[:40])


def test_bad_ids_numbers_and_text_are_refused(site) -> None:  # noqa: ANN001
    """The inputs the adversarial pass found to answer 500 each get a 4xx (404 for an id that
    names nothing, 400/422 for a value out of range or not valid text)."""
    admin = _session(site.base, "root")
    staff = _session(site.base, "alice")
    key = site.auth.api_keys.create(site.auth.principal_for("alice"), "bad-input")[0]
    v1 = {"authorization": f"Bearer {key}"}
    json_h = {"content-type": "application/json"}
    calls = [
        ("GET", f"/api/conversations/{HUGE}", staff, None),
        ("PATCH", f"/api/conversations/{HUGE}", staff, b'{"title": "x"}'),
        ("DELETE", f"/api/conversations/{HUGE}", staff, None),
        ("POST", f"/api/conversations/{HUGE}/regenerate", staff, None),
        ("POST", f"/api/messages/{HUGE}/feedback", staff, b'{"rating": 1}'),
        ("DELETE", f"/api/keys/{HUGE}", staff, None),
        ("DELETE", f"/api/admin/documents/{HUGE}", admin, None),
        ("POST", f"/api/admin/documents/{HUGE}/reindex", admin, None),
        ("POST", f"/api/admin/documents/{HUGE}/move", admin, b'{"collection": "x"}'),
        ("DELETE", f"/api/admin/api-keys/{HUGE}", admin, None),
        ("POST", "/api/chat", staff, b'{"question": "q", "conversation_id": %s}' % HUGE.encode()),
        (
            "POST",
            "/v1/chat/completions",
            v1,
            b'{"messages": [{"role": "user", "content": "q"}], "conversation_id": %s}'
            % HUGE.encode(),
        ),
        ("GET", "/api/admin/engine/series?minutes=nan", admin, None),
        ("GET", "/api/admin/engine/series?minutes=1e308", admin, None),
        ("GET", "/api/admin/engine/series?minutes=-inf", admin, None),
        ("GET", f"/api/admin/ingestion-runs?limit={HUGE}", admin, None),
        ("GET", f"/api/admin/analytics?days={HUGE}", admin, None),
        ("GET", "/api/admin/analytics?days=9999999999", admin, None),
        ("GET", f"/api/admin/audit?limit={HUGE}", admin, None),
        ("GET", f"/api/admin/chunks?q=x&k={HUGE}", admin, None),
        ("POST", "/api/chat", staff, b'{"question": "\\ud800", "stream": false}'),
        ("POST", "/api/chat", staff, b'{"question": "a \xed\xa0\x80 b", "stream": false}'),
        ("PATCH", "/api/conversations/1", staff, b'{"title": "\\udfff"}'),
        ("POST", "/api/keys", staff, b'{"name": "\\ud800"}'),
        (
            "POST",
            "/v1/chat/completions",
            v1,
            b'{"messages": [{"role": "user", "content": "\\ud800"}]}',
        ),
        ("PUT", "/api/admin/settings", admin, b'{"system_prompt": "\\ud800"}'),
    ]
    wrong = []
    with httpx.Client(base_url=site.base, timeout=60) as http:
        for method, url, headers, body in calls:
            r = http.request(method, url, content=body, headers={**headers, **json_h})
            if r.status_code not in (400, 404, 422):
                wrong.append(f"{method} {url} {body!r}: {r.status_code} {r.text[:200]}")
    assert not wrong, "\n".join(wrong)
