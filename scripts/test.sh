#!/usr/bin/env bash
# The whole test suite, exactly as CI runs it: installs what it needs, checks formatting and lints,
# then runs every test with the browser required (a browser test that would skip fails instead).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cargo fmt --all -- --check
cargo clippy --workspace --all-targets -- -D warnings
FORGE_REQUIRE_BROWSER=1 cargo test --workspace
