"""The one-command installer: preflight, hardware detection, profiles, venv and packages
(online or from an offline bundle), models, config, first admin, systemd units, start and smoke
test; upgrade and uninstall.

Everything here runs on the *system* Python before the appliance's venv exists, so it uses the
standard library only (plus ``engine.sglang``'s pure, stdlib-only tuning and unit modules).
"""
