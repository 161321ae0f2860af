#!/usr/bin/env bash
# Install the real identity servers the LDAP and OIDC sign-in tests run against, best effort:
#   * OpenLDAP: slapd and ldap-utils from apt (as root, when missing). The tests run their own
#     slapd on free loopback ports from a temporary folder; the package's own service is not
#     started (a policy-rc.d for the install) and would not collide anyway.
#   * an OpenID Provider: panva's oidc-provider, pinned by tests/support/oidc/package-lock.json,
#     installed with `npm ci` into .cache/oidc-node (ignored by git).
# Whatever cannot be installed is noted; those tests then skip and say why. Always exits 0.
set -uo pipefail
cd "$(dirname "$0")/.."

note() { echo "note: $*" >&2; }

# ---- OpenLDAP -----------------------------------------------------------------------------
if [ -x /usr/sbin/slapd ] && command -v ldapadd >/dev/null && command -v openssl >/dev/null; then
    :
elif [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    policy=""
    if [ ! -e /usr/sbin/policy-rc.d ]; then  # keep the package from starting slapd on :389
        printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod 755 /usr/sbin/policy-rc.d
        policy=/usr/sbin/policy-rc.d
    fi
    (apt-get update -qq \
        && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
            slapd ldap-utils openssl) >/dev/null 2>&1 \
        || note "could not install slapd ldap-utils; the LDAP sign-in tests skip"
    [ -n "$policy" ] && rm -f "$policy"
else
    note "slapd or ldap-utils is missing and this is not root with apt; the LDAP tests skip"
fi

# ---- the OpenID Provider ------------------------------------------------------------------
src=tests/support/oidc
dest=.cache/oidc-node
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    note "node and npm are missing (Node.js >= 20.19); the OIDC sign-in tests skip"
    exit 0
fi
major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)
if [ "$major" -lt 20 ]; then
    note "node $(node --version) is too old for oidc-provider (>= 20.19); the OIDC tests skip"
    exit 0
fi
if cmp -s "$src/package-lock.json" "$dest/package-lock.json" \
    && cmp -s "$src/package.json" "$dest/package.json" \
    && [ -f "$dest/node_modules/oidc-provider/package.json" ] \
    && [ -f "$dest/node_modules/jose/package.json" ]; then
    exit 0  # already installed from this lock
fi
mkdir -p "$dest"
cp "$src/package.json" "$src/package-lock.json" "$dest/"
(cd "$dest" && npm ci --prefer-offline --no-audit --no-fund --ignore-scripts --loglevel=error) \
    >/dev/null 2>&1 || {
    rm -f "$dest/package-lock.json"  # so the next run tries again
    note "could not install oidc-provider (npm ci in $dest); the OIDC sign-in tests skip"
}
exit 0
