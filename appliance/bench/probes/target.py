"""The appliance a probe run attacks: its URL, the accounts the run made, and the raw tools the
probes share (sign-in, bearer headers, a request head sent without its body)."""

from __future__ import annotations

import secrets
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlparse

import httpx

PASSWORD_LEN = 18


@dataclass(frozen=True)
class Outcome:
    """What one probe saw (``got``, in a few words) and whether that is what it must be."""

    got: str
    ok: bool


@dataclass
class Target:
    """A running appliance, signed into as an admin; ``staff`` accounts are made on demand
    through the admin API (so a run works against any version of the app)."""

    base: str
    admin_user: str
    admin_password: str
    run_id: str = field(default_factory=lambda: secrets.token_hex(3))
    passwords: dict[str, str] = field(default_factory=dict)
    timeout_s: float = 30.0

    def client(self, local_address: str | None = None) -> httpx.Client:
        """A client from ``local_address`` (another loopback address is another client
        address to the server), following no redirects."""
        transport = httpx.HTTPTransport(local_address=local_address) if local_address else None
        return httpx.Client(base_url=self.base, timeout=self.timeout_s, transport=transport)

    def token(self, user: str, password: str | None = None) -> str:
        with self.client() as http:
            r = http.post(
                "/api/login", json={"username": user, "password": password or self.passwords[user]}
            )
        r.raise_for_status()
        return r.json()["token"]

    def bearer(self, user: str | None = None) -> dict[str, str]:
        """``Authorization`` for ``user`` (the admin when None)."""
        if user is None:
            return {"authorization": f"Bearer {self.token(self.admin_user, self.admin_password)}"}
        return {"authorization": f"Bearer {self.token(user)}"}

    def staff(self, role: str) -> str:
        """A fresh staff account for this run (``probe-<run>-<role>``)."""
        name = f"probe-{self.run_id}-{role}"
        password = secrets.token_urlsafe(PASSWORD_LEN)
        with self.client() as http:
            r = http.post(
                "/api/admin/users",
                json={"username": name, "password": password, "role": "staff"},
                headers=self.bearer(),
            )
        r.raise_for_status()
        self.passwords[name] = password
        return name

    @contextmanager
    def signed_in_browser(self, user: str) -> Iterator[httpx.Client]:
        """A client holding ``user``'s session cookie from the sign-in form."""
        with self.client() as http:
            http.post("/login", data={"username": user, "password": self.passwords[user]})
            yield http

    def status(self, method: str, path: str, **kwargs: Any) -> int:  # noqa: ANN401
        """The status of one request; 599 when the server answered nothing (it dropped the
        connection, or took longer than the timeout)."""
        try:
            with self.client() as http:
                return http.request(method, path, **kwargs).status_code
        except httpx.HTTPError:
            return 599

    def send_head(self, path: str, headers: dict[str, str], body: bytes = b"") -> Outcome:
        """Send a POST's head (and the first ``body`` bytes) only; what the server answers
        within 3 s, and how long it took."""
        url = urlparse(self.base)
        started = time.monotonic()
        with socket.create_connection((url.hostname, url.port or 80), timeout=3) as sock:
            head = [f"POST {path} HTTP/1.1", f"Host: {url.netloc}"]
            head += [f"{k}: {v}" for k, v in headers.items()]
            try:
                sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode() + body)
                data = b""
                while b"\r\n" not in data:
                    chunk = sock.recv(4096)
                    if not chunk:
                        break
                    data += chunk
            except TimeoutError:
                return Outcome("no answer in 3 s (reading the body)", False)
            except OSError as exc:
                return Outcome(f"connection error: {exc}", False)
        status = data.split(b" ", 2)[1].decode() if data.count(b" ") >= 2 else "?"
        return Outcome(f"{status} in {time.monotonic() - started:.2f} s", True)
