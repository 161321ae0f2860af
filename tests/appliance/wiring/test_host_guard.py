"""``HostGuard`` (issue #30, item 9: the ``Host`` header was not checked). A DNS-rebinding page
reaches the box under a name of its own; the box answers only to IP addresses, ``localhost``
and the names in ``security.allowed_hosts``. Pure rules here; the served app in
``tests/security/test_gradio_routes.py``."""

from __future__ import annotations

import pytest

from appliance.core.config import ConfigError, load_config
from appliance.wiring.host_guard import host_allowed

LISTED = ("appliance.corp.example", ".intra.example")


@pytest.mark.parametrize(
    "host",
    [
        "127.0.0.1:7860",
        "10.0.0.5",
        "[::1]:7860",
        "[fe80::1]",
        "localhost:7860",
        "LOCALHOST",
        "appliance.corp.example",
        "Appliance.Corp.Example:443",
        "appliance.corp.example.",
        "chat.intra.example",
        "intra.example",
    ],
)
def test_the_box_by_address_or_listed_name(host: str) -> None:
    assert host_allowed(host, LISTED)


@pytest.mark.parametrize(
    "host",
    [
        "rebind.attacker.example",
        "appliance.corp.example.attacker.example",
        "xintra.example",
        "127.0.0.1.nip.io",
        "localhost.attacker.example",
        "",
        ":7860",
    ],
)
def test_any_other_name_is_refused(host: str) -> None:
    assert not host_allowed(host, LISTED)


def test_the_setting_takes_names_only() -> None:
    env = {"APPLIANCE_SECURITY__ALLOWED_HOSTS": "a.corp, .b.corp"}
    assert load_config(environ=env).security.allowed_hosts == ("a.corp", ".b.corp")
    for bad in ("http://a.corp", "a.corp:7860", "."):
        with pytest.raises(ConfigError, match="allowed_hosts"):
            load_config(environ={"APPLIANCE_SECURITY__ALLOWED_HOSTS": bad})
