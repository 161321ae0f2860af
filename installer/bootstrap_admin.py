"""Run inside the installed venv: migrate the database and create the first admin.

    python -m installer.bootstrap_admin CONFIG

Prints one JSON line: ``{"created": bool, "username": ..., "password": ...}`` (the password only
when it was just created; the installer shows it once).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    from appliance.core.auth.service import AuthService
    from appliance.core.config import load_config
    from appliance.wiring.appliance import bootstrap_admin, open_database

    config = load_config(Path(argv[0]))
    db = open_database(config)
    try:
        password = bootstrap_admin(config, AuthService(db, config.security.session_ttl_hours))
    finally:
        db.dispose()
    result = {"created": password is not None, "username": config.bootstrap.admin_username}
    if password is not None:
        result["password"] = password
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
