#!/usr/bin/env bash
# The one-command installer is not built yet: it will detect the hardware, pick a profile,
# install from an offline bundle, write config and systemd units, and run preflight checks.
echo "install.sh: not yet implemented; for now run 'bash scripts/run.sh' from the repository" >&2
exit 2
