#!/usr/bin/env bash
# The whole test suite, exactly as CI runs it: installs what it needs, checks formatting and lints,
# then runs every test with the browser required (a browser test that would skip fails instead).
# The test binaries run a few at a time (scripts/run-tests.py: FORGE_TEST_JOBS, default 3); each
# binary runs its own tests in parallel as `cargo test` does.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cargo fmt --all -- --check
cargo clippy --workspace --all-targets -- -D warnings
python3 scripts/check-circles.py
FORGE_REQUIRE_BROWSER=1 python3 scripts/run-tests.py
