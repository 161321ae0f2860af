"""The ``[security]`` config section: sessions, login throttling, origins, proxies, host names
and body limits (re-exported by ``appliance.core.config``)."""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

log = logging.getLogger("appliance.core.config")  # one logger for every config message


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SecurityConfig(_Section):
    environment: Literal["development", "production"] = "development"
    session_ttl_hours: float = Field(12.0, gt=0)
    # login throttling (appliance.core.auth.throttle), counted in the database so that every
    # worker sees one count: this many failures for one (username, client address) within the
    # window start a back-off for that pair only (the right password from elsewhere still gets
    # in); it starts at login_backoff_s and doubles with each further failure, up to
    # login_lockout_s
    login_max_failures: int = Field(5, ge=1)
    login_window_s: float = Field(300.0, gt=0)
    login_backoff_s: float = Field(30.0, gt=0)
    login_lockout_s: float = Field(300.0, gt=0)
    # ... and this many failures from one client address, whatever the usernames, back that
    # address off (password spraying)
    login_address_max_failures: int = Field(50, ge=1)
    # origins (scheme://host[:port]) besides the app's own whose pages may send state-changing
    # requests with the user's cookie and read the answers (CORS with credentials). Empty: none,
    # which is right unless another web app on the intranet embeds this one
    allowed_origins: tuple[str, ...] = ()
    # the largest request body outside document uploads (JSON, forms, Gradio calls)
    max_body_kb: int = Field(1024, ge=16)
    # ``GET /metrics`` answers a Prometheus scraper sending ``Authorization: Bearer <token>``
    # and signed-in admins; nobody else. Empty: admins only (the installer writes one)
    metrics_token: str = ""
    # the reverse proxies (IP addresses or CIDR networks) whose ``X-Forwarded-For`` and
    # ``X-Forwarded-Proto`` are believed (``appliance.core.auth.client_address``): the client is
    # the right-most forwarded address that is not one of them. Empty: none, every request's
    # address is its direct peer. A string is read as a comma-separated list (for APPLIANCE_*)
    trusted_proxies: tuple[str, ...] = ()
    # the names this box is reached by, beside IP addresses and ``localhost``
    # (appliance.wiring.host_guard): "appliance.corp.example", or ".corp.example" for a domain
    # and every name in it; a request whose ``Host`` names anything else gets 400 (a
    # DNS-rebinding page). The installer writes the box's host name and FQDN
    allowed_hosts: tuple[str, ...] = ()

    @field_validator("trusted_proxies", "allowed_hosts", mode="before")
    @classmethod
    def _proxies_listed(cls, value: Any) -> Any:
        if isinstance(value, str):  # from the environment: comma-separated
            return [v for v in value.split(",") if v.strip()]
        return value

    @field_validator("trusted_proxies")
    @classmethod
    def _proxies_are_networks(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for entry in value:
            try:
                ipaddress.ip_network(entry.strip(), strict=False)
            except ValueError:
                raise ValueError(
                    f"{entry!r} is not an IP address or network (10.0.0.0/8)"
                ) from None
        return tuple(entry.strip() for entry in value)

    @field_validator("allowed_hosts")
    @classmethod
    def _hosts_are_names(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for entry in value:
            name = entry.strip().lstrip(".")
            if entry.strip() != "*" and (not name or any(c in name for c in "/:@ ")):
                raise ValueError(f"{entry!r} is not a host name (appliance.corp.example)")
        return tuple(entry.strip().lower() for entry in value)

    @model_validator(mode="after")
    def _origins_are_origins(self) -> SecurityConfig:
        for origin in self.allowed_origins:
            scheme, _, rest = origin.partition("://")
            if scheme not in ("http", "https") or not rest or "/" in rest:
                raise ValueError(
                    f"allowed_origins: {origin!r} is not an origin (scheme://host[:port], no path)"
                )
        if 0 < len(self.metrics_token) < 16:
            raise ValueError("metrics_token must be at least 16 characters")
        return self

    @model_validator(mode="before")
    @classmethod
    def _ignore_legacy_secret_key(cls, data: Any) -> Any:
        # installers before this release wrote a generated ``secret_key`` that nothing used
        # (sessions are random server-side tokens): an upgraded site's config still has it
        if isinstance(data, Mapping) and "secret_key" in data:
            log.warning(
                "config: security.secret_key is no longer used and is ignored; "
                "delete it from the config file"
            )
            data = {k: v for k, v in data.items() if k != "secret_key"}
        return data
