"""Uploaded file names are normalised before they are stored (issue #22, item 4).

Names with a NUL byte, path parts (``../../etc/x.md``, ``C:\\x\\y.md``) or 600 characters used
to be stored as given. Now the stored name is the base name only, without control
characters, NFC, at most 255 characters with its extension kept; the name as given is kept
beside it for display (``original_name`` in ``GET /api/admin/documents``, control characters
escaped).
"""

from __future__ import annotations

import unicodedata

import httpx

from appliance.core.services.admin.documents import AdminDocuments, Upload

PASSWORD = "password-789"
LONG = "a" * 600 + ".md"


def test_uploaded_names_are_stored_normalised_with_the_original_kept(own_site) -> None:  # noqa: ANN001
    given = {
        "nul\x00byte.md": "nulbyte.md",
        "../../etc/x.md": "x.md",
        "C:\\x\\y.md": "y.md",
        "cafe\u0301\u202e.md": "caf\u00e9.md",  # NFC, and no bidi override
        LONG: "a" * 252 + ".md",
    }
    with own_site() as s:
        docs = AdminDocuments(s.appliance.ingest, s.appliance.knowledge)
        uploads = [
            Upload(name, f"# Note {i}\n\nThe note number {i} is about tea.\n".encode())
            for i, name in enumerate(given)
        ]
        results = docs.upload(uploads, "default", "root")
        assert [r.status for r in results] == ["indexed"] * len(given), results
        token = httpx.post(
            f"{s.base}/api/login", json={"username": "root", "password": PASSWORD}
        ).json()["token"]
        listed = httpx.get(
            f"{s.base}/api/admin/documents",
            headers={"authorization": f"Bearer {token}"},
        ).json()
    stored = {d["original_name"]: d["name"] for d in listed if d["original_name"]}
    # the name as given is shown with its control characters escaped (no NUL in the database)
    shown = {name.replace("\x00", "\\x00"): safe for name, safe in given.items()}
    assert stored == shown
    for name in stored.values():
        assert len(name) <= 255 and name == unicodedata.normalize("NFC", name)
        assert not any(unicodedata.category(c) in ("Cc", "Cf") for c in name)
        assert "/" not in name and "\\" not in name
    # a plain name is stored as it is, with no second copy
    assert any(d["name"] == "aquarium.md" and d["original_name"] is None for d in listed)
