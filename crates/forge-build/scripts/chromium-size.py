#!/usr/bin/env python3
"""Measures what Chromium adds to a debian:bookworm-slim image, from Debian's package metadata.

No container engine is needed: the script builds a dpkg status file that says "installed" for
every package of Priority: required plus their dependencies (what debian:bookworm-slim is
made of) and then simulates,
with apt-get -s against that status file,
  1. the base layer every forge image has:   ca-certificates tini
  2. the browser layer forge adds on top:    chromium fonts-liberation fonts-dejavu-core
(the same package lists as Dockerfile.tmpl, --no-install-recommends), and sums the
Installed-Size of the packages apt would add in step 2. Usage: chromium-size.py [PKG...]
"""
import subprocess, sys, tempfile, os, re

BASE = ["ca-certificates", "tini"]
BROWSER = sys.argv[1:] or ["chromium", "fonts-liberation", "fonts-dejavu-core"]

def stanzas(text):
    for block in text.split("\n\n"):
        fields, key = {}, None
        for line in block.splitlines():
            if line.startswith((" ", "\t")) and key:
                fields[key] += "\n" + line
            elif ":" in line:
                key, _, val = line.partition(":")
                fields[key] = val.strip()
        if "Package" in fields:
            yield fields

def newer(a, b):
    return subprocess.run(["dpkg", "--compare-versions", a, "gt", b]).returncode == 0

def candidates():
    best = {}
    out = subprocess.run(["apt-cache", "dumpavail"], capture_output=True, text=True, check=True).stdout
    for s in stanzas(out):
        p = s["Package"]
        if p not in best or newer(s["Version"], best[p]["Version"]):
            best[p] = s
    return best

def simulate(status, pkgs):
    out = subprocess.run(["apt-get", "-s", "-o", f"Dir::State::status={status}",
                          "-o", "Dir::State::extended_states=/dev/null",
                          "install", "--no-install-recommends", *pkgs],
                         capture_output=True, text=True, check=True).stdout
    return [m.group(1) for m in re.finditer(r"^Inst (\S+)", out, re.M)]

def write_status(path, pkgs, db):
    keep = ("Package", "Version", "Architecture", "Multi-Arch", "Depends", "Pre-Depends",
            "Provides", "Breaks", "Conflicts", "Replaces", "Installed-Size", "Essential", "Priority")
    with open(path, "w") as f:
        for p in sorted(pkgs):
            s = db[p]
            f.write(f"Package: {p}\nStatus: install ok installed\n")
            for k in keep[1:]:
                if k in s:
                    f.write(f"{k}: {s[k]}\n")
            f.write("\n")

db = candidates()
with tempfile.TemporaryDirectory() as d:
    status = os.path.join(d, "status")
    required = sorted(p for p, s in db.items() if s.get("Priority") == "required")
    write_status(status, set(), db)
    base = set(required) | set(simulate(status, required))
    write_status(status, base, db)
    base_added = simulate(status, BASE)
    base |= set(base_added)
    write_status(status, base, db)
    added = simulate(status, BROWSER)
kib = sum(int(db[p].get("Installed-Size", "0")) for p in added)
base_kib = sum(int(db[p].get("Installed-Size", "0")) for p in base_added)
print(f"base layer: {' '.join(BASE)} -> {len(base_added)} packages, {base_kib} KiB = {base_kib / 1024:.1f} MiB")
print(f"baseline: {len(base)} packages (Priority: required and their dependencies, + {' '.join(BASE)})")
print(f"browser layer: {' '.join(BROWSER)} -> {len(added)} packages added")
for p in sorted(added, key=lambda p: -int(db[p].get("Installed-Size", "0"))):
    print(f"  {int(db[p].get('Installed-Size', '0')):>8} KiB  {p} {db[p]['Version']}")
print(f"total Installed-Size added: {kib} KiB = {kib / 1024:.1f} MiB")
deb = sum(int(db[p].get("Size", "0")) for p in added)
print(f"total .deb download (Size): {deb} bytes = {deb / 1048576:.1f} MiB")
