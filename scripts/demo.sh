#!/usr/bin/env bash
# The main job: build forge, install Chromium if it is missing, and run the bundled example agent
# (examples/browse-agent) end to end with the scripted model, so no API key is needed. The agent
# opens the demo library site (served by `forge run --demo-site` on 127.0.0.1), fills the search
# form, extracts the result, takes a screenshot, then tries https://example.com/, which is not in
# its allowlist, and shows the block. Printed: the answer, the screenshot path, and a summary of the
# hash-chained audit log (verified with `forge audit verify`).
# To use a real model instead, see README.md ("Use a real model").
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"
scripts/install-deps.sh browser
echo "demo: building forge (cargo build --bin forge)" >&2
cargo build -q --bin forge
FORGE="${CARGO_TARGET_DIR:-$ROOT/target}/debug/forge"
case "$FORGE" in /*) ;; *) FORGE="$ROOT/$FORGE" ;; esac
AUDIT_DIR="$(mktemp -d "${TMPDIR:-/tmp}/forge-demo.XXXXXX")"
AUDIT="$AUDIT_DIR/audit.ndjson"

cd examples/browse-agent
echo
echo "== forge run --once (agent browse-demo, scripted model, browser through the egress proxy) =="
"$FORGE" run --once "Which shelf is the book Dune on?" --demo-site site --audit-file "$AUDIT"
echo
echo "== audit log $AUDIT =="
"$FORGE" audit verify "$AUDIT"
