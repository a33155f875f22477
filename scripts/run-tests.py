#!/usr/bin/env python3
"""Runs the workspace's test binaries, several at a time, and says what passed.

`cargo test` runs its test binaries one after another; most of forge's time in tests is spent
waiting (on Chromium, a child process, a loopback server), so on a 2-core machine running a few
binaries at once takes about half as long. Each binary still runs its own tests in parallel and
keeps its shared fixtures (one Chromium per browser test binary), which a process-per-test runner
such as nextest would not: that is why this script exists rather than nextest (docs/benchmarks.md
has the figures).

What it does, in order:
1. `cargo test --workspace --no-run --message-format=json` builds every test target and lists
   their executables (the unit tests of each crate, `tests/*.rs`, and benches' test mode is not
   included: `cargo test` does not run benches either).
2. Runs them, FORGE_TEST_JOBS at a time (default 3), each with the working directory and
   CARGO_* variables that `cargo test` gives it, and prints each binary's whole output when it
   ends (outputs never interleave).
3. Runs the doc tests (`cargo test --workspace --doc`).
4. Prints the total as `tests: N passed, N failed, N skipped` (skipped: the ignored ones) and exits 1 if anything failed.

Every binary runs in its own session (setsid), so whatever it starts (Chromium and its helpers,
`forge` children, Python MCP servers) carries that session id unless it detaches on purpose. When
a binary has exited, any process still in its session is a leak: it gets LEFTOVER_GRACE seconds to
exit (Chromium's crash handlers take about one), then is named, killed and counted as a failure of
that binary. So a fixture that is never dropped, or a `shutdown()` that returns early, fails the
run instead of leaving Chromium behind (issue 20, point 5).

Every binary has a time limit (FORGE_TEST_TIMEOUT seconds, default 900): a hung binary is killed
and counted as failed, naming it.
"""

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

LEFTOVER_GRACE = 5.0

RESULT = re.compile(
    r"^test result: (?:ok|FAILED)\. (\d+) passed; (\d+) failed; (\d+) ignored;", re.MULTILINE
)


def cargo():
    return os.environ.get("CARGO", "cargo")


def list_binaries(extra_args):
    cmd = [cargo(), "test", "--workspace", "--no-run", "--message-format=json-render-diagnostics"]
    cmd += extra_args
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        sys.stderr.write("run-tests: the test build failed (see above)\n")
        sys.exit(proc.returncode or 1)
    binaries = []
    for line in proc.stdout.splitlines():
        try:
            msg = json.loads(line)
        except json.JSONDecodeError:
            continue
        if msg.get("reason") != "compiler-artifact" or not msg.get("executable"):
            continue
        if not msg.get("profile", {}).get("test"):
            continue
        target = msg["target"]
        kinds = target.get("kind", [])
        label = target["src_path"]
        manifest_dir = os.path.dirname(msg["manifest_path"])
        label = os.path.relpath(label, manifest_dir)
        pkg = os.path.basename(manifest_dir)
        binaries.append(
            {
                "exe": msg["executable"],
                "dir": manifest_dir,
                "name": f"{pkg} {label}" if "lib" not in kinds else f"{pkg} (unit tests)",
                "pkg": pkg,
            }
        )
    return binaries


def session_members(sid):
    """(pid, command line) of every process whose session id is `sid`."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read().decode("utf-8", "replace")
            # The command name is in parentheses and may itself contain spaces or ')'.
            fields = stat[stat.rindex(")") + 2 :].split()
            if int(fields[3]) != sid:  # state ppid pgrp session ...
                continue
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()
        except (OSError, ValueError, IndexError):
            continue  # it exited while we looked
        found.append((int(entry), cmd[:160]))
    return found


def leftovers(sid):
    """Processes still in session `sid` after LEFTOVER_GRACE seconds; they are then killed."""
    deadline = time.monotonic() + LEFTOVER_GRACE
    while True:
        left = session_members(sid)
        if not left or time.monotonic() >= deadline:
            break
        time.sleep(0.1)
    for pid, _ in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return left


def run_one(b, timeout, lock, totals, failures):
    env = dict(os.environ)
    env["CARGO_MANIFEST_DIR"] = b["dir"]
    env["CARGO_PKG_NAME"] = b["pkg"]
    start = time.monotonic()
    proc = subprocess.Popen(
        [b["exe"]],
        cwd=b["dir"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    timed_out = False
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        out, _ = proc.communicate()
    secs = time.monotonic() - start
    # The binary was its session's leader, so its pid is the session id.
    left = leftovers(proc.pid)
    text = out.decode("utf-8", "replace")
    with lock:
        sys.stdout.write(f"     Running {b['name']} ({b['exe']}) [{secs:.1f}s]\n")
        sys.stdout.write(text)
        if not text.endswith("\n"):
            sys.stdout.write("\n")
        sys.stdout.flush()
        found = RESULT.findall(text)
        for passed, failed, ignored in found:
            totals[0] += int(passed)
            totals[1] += int(failed)
            totals[2] += int(ignored)
        if timed_out:
            failures.append(f"{b['name']}: killed after {timeout} s (FORGE_TEST_TIMEOUT)")
        elif proc.returncode != 0:
            failures.append(f"{b['name']}: exit status {proc.returncode}")
        if left:
            names = "; ".join(f"{pid} {cmd}" for pid, cmd in left[:5])
            failures.append(
                f"{b['name']}: left {len(left)} process(es) running after it exited "
                f"(killed now): {names}"
            )
        if not timed_out and proc.returncode == 0 and not found:
            # A target with `harness = false` (forge-mcp's stdio_child) prints its own checks and
            # is judged by its exit status alone: it counts as one passed test.
            totals[0] += 1
    return secs


def main():
    jobs = int(os.environ.get("FORGE_TEST_JOBS", "3"))
    timeout = int(os.environ.get("FORGE_TEST_TIMEOUT", "900"))
    extra = sys.argv[1:]
    binaries = list_binaries(extra)
    if not binaries:
        sys.stderr.write("run-tests: cargo listed no test binaries\n")
        sys.exit(1)
    lock = threading.Lock()
    totals = [0, 0, 0]
    failures = []
    started = time.monotonic()
    # The browser and CLI binaries are the slow ones (tens of seconds each): start them first and
    # let the short ones fill the gaps.
    slow_first = sorted(
        binaries, key=lambda b: (b["pkg"] not in ("forge-cli", "forge-browser"), b["name"])
    )
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        list(pool.map(lambda b: run_one(b, timeout, lock, totals, failures), slow_first))
    doc = subprocess.run([cargo(), "test", "--workspace", "--doc"] + extra)
    if doc.returncode != 0:
        failures.append("doc tests: cargo test --doc failed")
    print(
        f"run-tests: {len(binaries)} test binaries, {jobs} at a time, "
        f"{time.monotonic() - started:.0f} s"
    )
    for f in failures:
        print(f"run-tests: FAILED {f}")
    print(f"tests: {totals[0]} passed, {totals[1]} failed, {totals[2]} skipped")
    sys.exit(1 if failures or totals[1] else 0)


if __name__ == "__main__":
    main()
