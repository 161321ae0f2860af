"""The client address behind reverse proxies (``appliance.core.auth.client_address``): the
forwarded headers are believed from trusted proxies only, the client is the right-most
forwarded address that is not a trusted proxy, and junk is ignored safely; and
``security.trusted_proxies`` is checked when the config is read."""

from __future__ import annotations

import pytest

from appliance.core.auth.client_address import TrustedProxies, client_address, parse_ip
from appliance.core.config import ConfigError, load_config

PROXIES = TrustedProxies.parse(["127.0.0.1", "10.9.0.0/16", "fd00::/8"])


def test_no_trusted_proxies_is_the_default_and_believes_no_header() -> None:
    none = TrustedProxies.parse(load_config(environ={}).security.trusted_proxies)
    assert not none
    assert none.client("127.0.0.1", ["6.6.6.6"]) == "127.0.0.1"
    assert none.scheme("127.0.0.1", ["https"], "http") == "http"


def test_an_untrusted_peer_is_the_client_whatever_it_forwards() -> None:
    assert PROXIES.client("192.0.2.7", ["6.6.6.6, 10.9.0.1"]) == "192.0.2.7"
    assert PROXIES.scheme("192.0.2.7", ["https"], "http") == "http"


@pytest.mark.parametrize(
    ("forwarded", "client"),
    [
        (["203.0.113.5"], "203.0.113.5"),
        # forged hops left of the first untrusted address are not believed
        (["6.6.6.6, 203.0.113.5"], "203.0.113.5"),
        (["6.6.6.6, 203.0.113.5, 10.9.3.4"], "203.0.113.5"),
        (["6.6.6.6", "203.0.113.5, 10.9.3.4"], "203.0.113.5"),  # two header lines: one list
        (["10.9.0.2, 10.9.3.4"], "10.9.0.2"),  # every hop trusted: the left-most
        ([], "127.0.0.1"),  # a trusted peer that forwards nothing is the client
        (["not-an-ip"], "127.0.0.1"),  # junk: the hop that appended it
        (["203.0.113.5, unknown, 10.9.3.4"], "10.9.3.4"),
        (["203.0.113.5:4711"], "127.0.0.1"),  # a port is no address
        ([" 203.0.113.5 ,"], "127.0.0.1"),  # an empty last value is junk too
        (["[2001:db8::1]"], "2001:db8::1"),
        (["::ffff:203.0.113.5"], "203.0.113.5"),
        (["2001:db8::1, fd12::1"], "2001:db8::1"),
    ],
)
def test_a_trusted_proxy_names_the_right_most_untrusted_address(
    forwarded: list[str], client: str
) -> None:
    assert PROXIES.client("127.0.0.1", forwarded) == client


def test_a_mapped_ipv4_peer_is_its_ipv4_address() -> None:
    assert PROXIES.trusts("::ffff:127.0.0.1")
    assert PROXIES.client("::ffff:127.0.0.1", ["203.0.113.5"]) == "203.0.113.5"
    assert parse_ip("[::1]") is not None and parse_ip("localhost") is None


def test_a_very_long_header_is_read_from_the_right_only() -> None:
    hops = ", ".join(["10.9.0.1"] * 10_000)
    assert PROXIES.client("127.0.0.1", [f"203.0.113.5, {hops}"]) == "10.9.0.1"


@pytest.mark.parametrize(
    ("proto", "scheme"),
    [(["https"], "https"), (["HTTPS"], "https"), (["http, https"], "https"), (["gopher"], "http")],
)
def test_the_scheme_is_the_trusted_proxys_last_word(proto: list[str], scheme: str) -> None:
    assert PROXIES.scheme("10.9.8.7", proto, "http") == scheme


def test_client_address_reads_the_requests_client() -> None:
    class Client:
        host = "203.0.113.5"

    class Request:
        def __init__(self, client: object) -> None:
            self.client = client

    assert client_address(Request(Client())) == "203.0.113.5"
    assert client_address(Request(None)) == ""


def test_trusted_proxies_are_checked_and_may_come_from_the_environment() -> None:
    env = {"APPLIANCE_SECURITY__TRUSTED_PROXIES": "127.0.0.1, 10.0.0.0/8"}
    assert load_config(environ=env).security.trusted_proxies == ("127.0.0.1", "10.0.0.0/8")
    for bad in (["proxy.example"], ["10.0.0.0/33"], "127.0.0.1,nope"):
        with pytest.raises(ConfigError, match="trusted_proxies"):
            load_config(environ={}, overrides={"security": {"trusted_proxies": bad}})
