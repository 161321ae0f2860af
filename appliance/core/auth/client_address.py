"""Who a request came from, behind reverse proxies: the address that login throttling, API-key
throttling and the audit log key on.

A request's direct peer is the client, unless the peer is one of ``security.trusted_proxies``
(none by default). Only then is ``X-Forwarded-For`` read, and the client is the right-most
address in it that is not itself a trusted proxy (each trusted hop appended the address it
saw; everything left of the first untrusted one was written by that untrusted client and may
be forged). When every forwarded address is a trusted proxy, the left-most one is the client.
A value that is not an IP address stops the walk: the client is then the trusted hop that
appended it (the nearest address someone trusted vouches for). ``X-Forwarded-Proto`` (its
right-most value, ``http`` or ``https``) sets the scheme, from a trusted peer only.

``TrustedProxies`` is pure: ``appliance.wiring.proxy_headers`` applies it to each request's
ASGI scope at the edge, and every reader asks ``client_address(request)``.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
MAX_HOPS = 32  # forwarded addresses read at most (from the right): a long header costs nothing
SCHEMES = ("http", "https")


def parse_ip(text: str) -> IPAddress | None:
    """An address as forwarded (``1.2.3.4``, ``::1``, ``[::1]``; an IPv4-mapped IPv6 address
    as its IPv4 address), or None for anything else (a port, a name, ``unknown``, junk)."""
    text = text.strip()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def _values(headers: Sequence[str]) -> list[str]:
    """The comma-separated values of a header's lines, in order (lines joined as one list)."""
    return [v.strip() for line in headers for v in line.split(",")]


@dataclass(frozen=True)
class TrustedProxies:
    """The reverse proxies whose forwarding headers are believed (none: the default)."""

    networks: tuple[IPNetwork, ...] = ()

    @classmethod
    def parse(cls, entries: Iterable[str]) -> TrustedProxies:
        """From ``security.trusted_proxies``: addresses or CIDR networks (host bits allowed);
        raises ``ValueError`` for anything else."""
        return cls(tuple(ipaddress.ip_network(e.strip(), strict=False) for e in entries))

    def __bool__(self) -> bool:
        return bool(self.networks)

    def trusts(self, host: str) -> bool:
        """Whether ``host`` (an address as text) is one of the trusted proxies."""
        address = parse_ip(host)
        return address is not None and any(address in n for n in self.networks)

    def client(self, peer: str, forwarded_for: Sequence[str] = ()) -> str:
        """The client's address: ``peer`` (the direct peer's address) unless it is trusted,
        else by the rule of the module docstring from the ``X-Forwarded-For`` header lines."""
        if not self.trusts(peer):
            return peer
        nearest = str(parse_ip(peer))
        for value in reversed(_values(forwarded_for)[-MAX_HOPS:]):
            address = parse_ip(value)
            if address is None:
                return nearest  # junk: believe nothing from here leftwards
            nearest = str(address)
            if not any(address in n for n in self.networks):
                return nearest
        return nearest  # all trusted (or no header): the left-most one vouched for

    def scheme(self, peer: str, forwarded_proto: Sequence[str], scheme: str) -> str:
        """The request's scheme: the right-most ``X-Forwarded-Proto`` value from a trusted
        peer when it is ``http`` or ``https``; else ``scheme`` (what the connection was)."""
        values = _values(forwarded_proto)
        if not values or not self.trusts(peer):
            return scheme
        said = values[-1].lower()
        return said if said in SCHEMES else scheme


class HasClient(Protocol):
    """A Starlette/FastAPI ``Request`` or a Gradio ``gr.Request``."""

    @property
    def client(self) -> Any: ...  # noqa: ANN401 (``(host, port)`` with ``.host``, or None)


def client_address(request: HasClient) -> str:
    """The client address of a request, as the edge settled it by the rule above (its ASGI
    scope's client, rewritten by ``appliance.wiring.proxy_headers`` when the peer is a trusted
    proxy); "" when the server has none. The one reader for throttling and audit."""
    client = request.client
    return (client.host or "") if client else ""
