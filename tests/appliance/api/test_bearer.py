"""The bearer-token dependency the APIs share: 401 with ``WWW-Authenticate`` for a missing or
unknown token, 403 for a non-admin where admins only, and each API's own refusals."""

# (No ``from __future__ import annotations``: FastAPI must see the endpoints' real types.)

import pytest
from fastapi import Depends, FastAPI, HTTPException
from fastapi.testclient import TestClient

from appliance.api.bearer import bearer_dependency, bearer_token, principal_param
from appliance.core.auth.principal import Principal

PEOPLE = {
    "staff-token": Principal(1, "kim", "staff"),
    "admin-token": Principal(2, "lee", "admin"),
}


def client_for(**options) -> TestClient:  # noqa: ANN003
    app = FastAPI()
    Who = principal_param(bearer_dependency(PEOPLE.get, **options))  # noqa: N806

    @app.get("/who")
    def who(user: Who) -> dict:
        return {"username": user.username}

    return TestClient(app)


def test_bearer_token_parsing() -> None:
    assert bearer_token("Bearer abc ") == "abc"
    assert bearer_token("bearer abc") == "abc"
    assert bearer_token("Bearer  ") == ""
    assert bearer_token("Basic abc") is None
    assert bearer_token("Bearer") is None
    assert bearer_token(None) is None and bearer_token("") is None


@pytest.mark.parametrize(
    ("header", "message"),
    [
        (None, "missing bearer token"),
        ("Basic abc", "missing bearer token"),
        ("Bearer nope", "invalid or expired token"),
        ("Bearer ", "invalid or expired token"),
    ],
)
def test_refusals_are_401_with_www_authenticate(header: str | None, message: str) -> None:
    headers = {"authorization": header} if header is not None else {}
    r = client_for().get("/who", headers=headers)
    assert r.status_code == 401 and r.json() == {"detail": message}
    assert r.headers["www-authenticate"] == "Bearer"


def test_a_known_token_gives_its_principal() -> None:
    r = client_for().get("/who", headers={"authorization": "Bearer staff-token"})
    assert r.json() == {"username": "kim"}


def test_admin_only_refuses_staff_with_403() -> None:
    client = client_for(admin_only=True)
    staff = client.get("/who", headers={"authorization": "Bearer staff-token"})
    assert staff.status_code == 403 and staff.json() == {"detail": "administrators only"}
    assert client.get("/who", headers={"authorization": "Bearer admin-token"}).status_code == 200
    assert client.get("/who").status_code == 401


def test_an_api_gives_its_own_refusals() -> None:
    client = client_for(
        missing=lambda: HTTPException(401, "no key"),
        invalid=lambda: HTTPException(401, "bad key"),
    )
    assert client.get("/who").json() == {"detail": "no key"}
    bad = client.get("/who", headers={"authorization": "Bearer x"})
    assert bad.json() == {"detail": "bad key"} and "www-authenticate" not in bad.headers


def test_the_dependency_works_with_depends_directly() -> None:
    app = FastAPI()
    dep = bearer_dependency(PEOPLE.get)

    @app.get("/", dependencies=[Depends(dep)])
    def root() -> dict:
        return {"ok": True}

    assert TestClient(app).get("/").status_code == 401
