"""``appliance bench probes`` against a site of its own: every probe gets what it must (the
before/after table of the hardening issue is this command against two versions)."""

from __future__ import annotations

from sqlalchemy import func, select

from appliance.bench.probes.bench import CATALOG, run
from appliance.bench.probes.target import Target
from appliance.bench.table import render
from appliance.core.db.models import Document


def test_every_probe_gets_what_it_must(own_site) -> None:  # noqa: ANN001
    with own_site(engine={"max_new_tokens": 24}) as s:
        rows = run(Target(s.base, "root", "password-789"))
        print(render(["item", "probe", "must get", "got", "ok", "s"], rows))
        with s.appliance.db.session() as session:  # the run left no documents behind
            assert session.scalar(select(func.count(Document.id))) == 1  # the site's own
    assert len(rows) == len(CATALOG)
    failed = [(r[1], r[3]) for r in rows if r[4] != "yes"]
    assert not failed, failed
