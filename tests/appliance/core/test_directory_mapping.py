"""Directory groups → role and collections, and OIDC claims → account (pure)."""

from __future__ import annotations

import pytest

from appliance.core.auth.directory_map import access_for
from appliance.core.auth.directory_signin import ClaimsError, oidc_account
from appliance.core.directory_config import DirectoryConfig, LdapConfig, OidcConfig

MAPPING = DirectoryConfig(
    admin_groups=("Admins",),
    staff_groups=("staff-all",),
    group_collections={"hr-team": ("hr",), "it": ("it", "default")},
)


def test_admin_group_wins_and_names_compare_without_case() -> None:
    access = access_for(frozenset({"ADMINS", "staff-all"}), MAPPING)
    assert (access.role, access.refused) == ("admin", "")


def test_collections_are_the_union_of_the_groups_and_default_otherwise() -> None:
    assert access_for(frozenset({"staff-all", "hr-team", "it"}), MAPPING).collections == (
        "default",
        "hr",
        "it",
    )
    assert access_for(frozenset({"staff-all"}), MAPPING).collections == ("default",)


def test_a_user_in_no_admitted_group_is_refused() -> None:
    access = access_for(frozenset({"hr-team"}), MAPPING)
    assert access.refused and not access.role
    # with no staff groups configured, every directory account is staff
    assert access_for(frozenset(), DirectoryConfig()).role == "staff"


def test_oidc_claims_make_an_account_keyed_by_issuer_and_subject() -> None:
    claims = {"iss": "https://idp", "sub": "42", "preferred_username": "alice", "groups": "hr"}
    account = oidc_account(claims, "preferred_username", "groups")
    assert (account.username, account.groups, account.external_id) == (
        "alice",
        frozenset({"hr"}),
        "https://idp 42",
    )
    nested = {"iss": "i", "sub": "s", "email": "a@x", "realm": {"roles": ["admins", 7]}}
    assert oidc_account(nested, "email", "realm.roles").groups == frozenset({"admins"})


@pytest.mark.parametrize("name", [None, "", "   ", "x" * 65, ["alice"]])
def test_oidc_claims_without_a_usable_name_are_refused(name: object) -> None:
    with pytest.raises(ClaimsError):
        oidc_account(
            {"iss": "i", "sub": "s", "preferred_username": name}, "preferred_username", "g"
        )


def test_incomplete_provider_configs_are_refused() -> None:
    with pytest.raises(ValueError, match="ldap.url"):
        LdapConfig(enabled=True)
    with pytest.raises(ValueError, match="username"):
        LdapConfig(user_filter="(uid=*)")
    with pytest.raises(ValueError, match="ldap://"):
        LdapConfig(url="http://dc")
    with pytest.raises(ValueError, match="issuer"):
        OidcConfig(enabled=True, client_id="x")
