#!/bin/sh
# Does Chromium need a large /dev/shm? Runs scripts/dev_shm_probe.py (a heavy page and large
# full-page screenshots through real Chromium) in a mount namespace whose /dev/shm is a 64 MiB
# tmpfs, Docker's default size, with and without --disable-dev-shm-usage, and prints one JSON
# line per run (peak /dev/shm use, screenshots taken, whether Chromium exited).
# Needs root (unshare -m, mount). Figures: docs/benchmarks.md, "Chromium and /dev/shm".
#
# Usage: scripts/measure-dev-shm.sh [SCREENSHOTS]   (default 5)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
shots=${1:-5}
# The binary itself: Debian's /usr/bin/chromium wrapper adds --disable-dev-shm-usage on its own
# whenever /dev/shm has less than 3.8 GB free, which would hide the difference.
bin=${CHROMIUM_BIN:-/usr/lib/chromium/chromium}
for mode in without-flag with-flag; do
    unshare -m sh -c "mount -t tmpfs -o size=64m tmpfs /dev/shm && exec timeout 300 python3 '$here/dev_shm_probe.py' '$bin' $mode $shots"
done
