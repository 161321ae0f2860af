"""The company directory's config sections: ``[ldap]``, ``[oidc]`` and ``[directory]`` (how
directory groups map to the appliance's role and collections).

Both providers are off by default; with neither, sign-in is local accounts only. The admin
console can override these at run time (``appliance.core.services.directory_settings``).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

# Active Directory's "in chain" matching rule: a member of a group nested in another counts as
# a member of the outer one (LDAP_MATCHING_RULE_IN_CHAIN)
AD_IN_CHAIN = "1.2.840.113556.1.4.1941"


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class LdapConfig(_Section):
    """An LDAP server or Active Directory domain controller."""

    enabled: bool = False
    # ldap://host[:389] (with start_tls) or ldaps://host[:636]
    url: str = ""
    start_tls: bool = True
    # the CA (PEM) the server's certificate must chain to; empty: the system's CAs
    ca_file: str = ""
    # the service account that searches for users (and groups)
    bind_dn: str = ""
    bind_password: str = ""
    user_base: str = ""
    # ``{username}`` is replaced by the typed name, escaped (RFC 4515). A disabled account is
    # one this filter no longer finds: for AD add
    # ``(!(userAccountControl:1.2.840.113556.1.4.803:=2))``; for OpenLDAP exclude whatever
    # attribute marks leavers, e.g. ``(!(employeeType=disabled))``
    user_filter: str = "(&(objectClass=person)(uid={username}))"
    username_attribute: str = "uid"  # sAMAccountName on AD
    # groups: empty group_base reads the user's ``memberOf``; else groups under group_base
    # matching group_filter (``{dn}`` is the user's DN, escaped)
    group_base: str = ""
    group_filter: str = "(member={dn})"
    group_name_attribute: str = "cn"
    # AD: expand nested groups with the in-chain matching rule (needs group_base)
    nested_groups: bool = False
    timeout_s: float = Field(5.0, gt=0, le=60)

    @field_validator("url")
    @classmethod
    def _url_scheme(cls, value: str) -> str:
        value = value.strip()
        if value and not value.lower().startswith(("ldap://", "ldaps://")):
            raise ValueError(f"{value!r} is not an ldap:// or ldaps:// URL")
        return value

    @field_validator("user_filter")
    @classmethod
    def _filter_names_user(cls, value: str) -> str:
        if "{username}" not in value:
            raise ValueError("user_filter must contain {username}")
        return value

    @model_validator(mode="after")
    def _complete_when_enabled(self) -> LdapConfig:
        if self.enabled and not (self.url and self.user_base):
            raise ValueError("ldap.enabled needs ldap.url and ldap.user_base")
        return self


class OidcConfig(_Section):
    """An OpenID Connect provider (authorization code flow with PKCE)."""

    enabled: bool = False
    # shown on the login page: "Sign in with <display_name>"
    display_name: str = Field("company account", max_length=64)
    # the issuer exactly as the provider's discovery document states it
    issuer: str = ""
    client_id: str = ""
    client_secret: str = ""
    # this box's callback as registered with the provider; empty: derived from each request
    # (``<scheme>://<host>/oidc/callback``), right when the box is reached by one name
    redirect_url: str = ""
    scopes: str = "openid profile email groups"
    username_claim: str = "preferred_username"
    groups_claim: str = "groups"
    ca_file: str = ""
    timeout_s: float = Field(5.0, gt=0, le=60)
    # an OIDC account's API keys work this long after its last sign-in (the provider cannot
    # be asked whether an account is still enabled without the user); 0: keys never expire
    key_hours: float = Field(24.0, ge=0)

    @model_validator(mode="after")
    def _complete_when_enabled(self) -> OidcConfig:
        if self.enabled and not (self.issuer and self.client_id):
            raise ValueError("oidc.enabled needs oidc.issuer and oidc.client_id")
        if self.issuer and not self.issuer.startswith(("https://", "http://")):
            raise ValueError(f"oidc.issuer {self.issuer!r} is not an http(s) URL")
        return self


Role = Literal["staff", "admin"]


class DirectoryConfig(_Section):
    """Directory groups → the appliance's role and collections, applied at every sign-in."""

    # members of any of these groups are admins
    admin_groups: tuple[str, ...] = ()
    # members of any of these are staff; empty: every directory account may sign in as staff
    staff_groups: tuple[str, ...] = ()
    # group → the collections its members may retrieve from (union over the user's groups)
    group_collections: dict[str, tuple[str, ...]] = {}
    # the collections of a user none of whose groups names any
    default_collections: tuple[str, ...] = ("default",)
    # how long a directory account's check (still there, still enabled, its groups) is
    # trusted before the next API-key or session use asks the directory again
    check_interval_s: float = Field(300.0, ge=0)

    @field_validator("admin_groups", "staff_groups", "default_collections", mode="before")
    @classmethod
    def _listed(cls, value: object) -> object:
        if isinstance(value, str):  # from the environment: comma-separated
            return [v.strip() for v in value.split(",") if v.strip()]
        return value
