"""Accounts, roles, sessions, login throttling (``service``), API keys (``api_keys``) and the
signed-in ``Principal`` that every service takes (``principal``)."""
