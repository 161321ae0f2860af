"""Collection names are validated wherever a collection is named (issue #22, item 4).

Upload, move, rename and user grants used to accept ``/`` and HTML in a collection name, and a
collection named ``../x`` (from before) could not be deleted over the API: its slash does not
fit the ``{name}`` path segment.
"""

from __future__ import annotations

import httpx

from appliance.core.db.models import Document

PASSWORD = "password-789"


def _admin(base: str) -> dict[str, str]:
    r = httpx.post(f"{base}/api/login", json={"username": "root", "password": PASSWORD})
    return {"authorization": f"Bearer {r.json()['token']}"}


def test_bad_collection_names_are_refused_everywhere(own_site) -> None:  # noqa: ANN001
    bad = ["../x", "a/b", "<b>x</b>", ".hidden", "x" * 65, "tab\there", "a\\b", ""]
    with own_site() as s:
        h = _admin(s.base)
        doc = s.appliance.ingest.ingest_bytes("tea.md", b"# Tea\n\nGreen tea is kept cold.\n")
        with httpx.Client(base_url=s.base, headers=h, timeout=60) as http:
            for i, name in enumerate(bad):
                files = {"files": ("note.md", b"# Note\n\nSome words.\n", "text/markdown")}
                calls = {
                    "upload": http.post(
                        "/api/admin/documents", files=files, data={"collection": name}
                    ),
                    "move": http.post(
                        f"/api/admin/documents/{doc.document_id}/move", json={"collection": name}
                    ),
                    "rename": http.post(
                        "/api/admin/collections/rename", json={"old": "default", "new": name}
                    ),
                    "grant": http.patch("/api/admin/users/alice", json={"collections": [name]}),
                    "create": http.post(
                        "/api/admin/users",
                        json={"username": f"user{i}", "collections": [name]},
                    ),
                }
                for what, r in calls.items():
                    assert r.status_code in (400, 422), (what, name, r.status_code, r.text)
            # nothing was stored under a bad name
            names = {c["collection"] for c in http.get("/api/admin/collections").json()}
            assert names == {"default"}
            # good names: letters of any script (Hangul too), digits, space, - _ .
            for good in ("인사팀 자료", "hr-2024_v1.2", "Ünïcode"):
                r = http.post(
                    f"/api/admin/documents/{doc.document_id}/move", json={"collection": good}
                )
                assert r.status_code == 200, (good, r.text)


def test_a_collection_with_a_slash_in_its_name_can_still_be_deleted(own_site) -> None:  # noqa: ANN001
    with own_site() as s:
        h = _admin(s.base)
        # collections named before names were checked: written into the database as they were
        for i, name in enumerate(("../x", "a/b")):
            body = f"# Old {i}\n\nOld text number {i}.\n".encode()
            doc = s.appliance.ingest.ingest_bytes(f"old{i}.md", body, f"old{i}")
            with s.appliance.db.session() as db:
                db.get(Document, doc.document_id).collection = name
        s.appliance.knowledge.reconcile()
        with httpx.Client(base_url=s.base, headers=h, timeout=60) as http:
            renamed = http.post("/api/admin/collections/rename", json={"old": "a/b", "new": "ab"})
            assert renamed.status_code == 200, renamed.text
            gone = http.delete("/api/admin/collections/..%2Fx")
            assert gone.status_code == 200, gone.text
            assert gone.json() == {"documents": 1}
            names = {c["collection"] for c in http.get("/api/admin/collections").json()}
            # the old route still serves plain names
            assert http.delete("/api/admin/collections/ab").json() == {"documents": 1}
    assert names == {"default", "ab"}
