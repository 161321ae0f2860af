"""pytest fixtures for the real identity servers: OpenLDAP slapd and an OpenID Provider.

tests/conftest.py imports them::

    from support.directory_fixtures import (  # noqa: F401
        ldap_directory,
        oidc_idp,
        oidc_provider,
        oidc_provider_factory,
        slapd_server,
    )

* ``slapd_server`` (session): a running, seeded ``SlapdServer`` (support/slapd.py)
* ``ldap_directory`` (test): the same server, put back to the seed before the test (and started
  again, or resumed, if an earlier test stopped or paused it)
* ``oidc_provider_factory`` (session): ``start(redirect_uris=(), redirect_uri_patterns=...,
  token_endpoint_auth_method=...)`` starts one more ``OidcProvider`` (support/oidc_provider.py),
  stopped at the end of the session
* ``oidc_provider`` (session): the default provider: redirect URIs
  ``http://127.0.0.1:*/oidc/callback`` and ``http://localhost:*/oidc/callback``
* ``oidc_idp`` (test): ``oidc_provider`` put back to the seed before the test (and started
  again if an earlier test stopped it)

Each skips, saying why, when its server is not installed (scripts/directory_test_servers.sh).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack

import pytest

from support import oidc_provider as oidc
from support import slapd
from support.oidc_provider import OidcProvider
from support.slapd import SlapdServer


@pytest.fixture(scope="session")
def slapd_server() -> Iterator[SlapdServer]:
    reason = slapd.missing()
    if reason:
        pytest.skip(f"no OpenLDAP for the LDAP tests: {reason}")
    with slapd.start_slapd() as server:
        yield server


@pytest.fixture()
def ldap_directory(slapd_server: SlapdServer) -> SlapdServer:
    slapd_server.reset()
    return slapd_server


@pytest.fixture(scope="session")
def oidc_provider_factory() -> Iterator[Callable[..., OidcProvider]]:
    reason = oidc.missing()
    if reason:
        pytest.skip(f"no OpenID Provider for the OIDC tests: {reason}")
    with ExitStack() as stack:

        def start(*args, **kwargs) -> OidcProvider:  # noqa: ANN002, ANN003
            return stack.enter_context(oidc.start_oidc_provider(*args, **kwargs))

        yield start


@pytest.fixture(scope="session")
def oidc_provider(oidc_provider_factory: Callable[..., OidcProvider]) -> OidcProvider:
    return oidc_provider_factory()


@pytest.fixture()
def oidc_idp(oidc_provider: OidcProvider) -> OidcProvider:
    oidc_provider.reset()
    return oidc_provider
