#!/usr/bin/env bash
# The main job: build forge and run the bundled example agent end to end (no API key needed).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh browser
cargo build -q --bin forge
FORGE=target/debug/forge
cd examples/browse-agent
"../../$FORGE" skills list
"../../$FORGE" skills audit
