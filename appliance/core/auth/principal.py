"""``Principal``: who is making a request (its roles and document collections).

Every service takes one; it is built only by ``service.AuthService`` and ``api_keys.ApiKeyStore``
from a live session, password check or API key.
"""

from __future__ import annotations

from dataclasses import dataclass

ROLES = ("staff", "admin")
DEFAULT_COLLECTIONS = frozenset({"default"})


@dataclass(frozen=True)
class Principal:
    """Who is making a request, and which document collections they may retrieve from."""

    user_id: int
    username: str
    role: str
    collections: frozenset[str] = DEFAULT_COLLECTIONS

    @property
    def is_admin(self) -> bool:
        return self.role == "admin"

    @property
    def allowed_collections(self) -> frozenset[str] | None:
        """None means every collection (admins)."""
        return None if self.is_admin else self.collections
