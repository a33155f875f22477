#!/usr/bin/env python3
"""Drive a real Chromium through a heavy page and full-page screenshots, and report how much of
/dev/shm it used and whether it crashed. Run by scripts/measure-dev-shm.sh inside a mount
namespace whose /dev/shm is a 64 MiB tmpfs (Docker's default size); see docs/benchmarks.md.

Usage: dev_shm_probe.py CHROMIUM_BINARY with-flag|without-flag SCREENSHOTS

Standard library only: a minimal DevTools (CDP) client over a WebSocket.
"""

import base64
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

# A page that makes the compositor work: 24 canvases of 1600x1600 noise (about 245 MB of
# bitmaps, each filled from a 256x256 random tile), big gradients and a tall document, so
# full-page screenshots are large.
PAGE = """<!doctype html><title>heavy</title>
<style>body{margin:0;background:linear-gradient(90deg,#123,#fe9,#39c)}
canvas{display:block;width:1600px;height:1600px}</style><body><script>
const tile = document.createElement('canvas'); tile.width = 256; tile.height = 256;
const t = tile.getContext('2d'); const td = t.createImageData(256, 256);
for (let j = 0; j < td.data.length; j++) td.data[j] = (Math.random() * 256) | 0;
t.putImageData(td, 0, 0);
for (let i = 0; i < 24; i++) {
  const c = document.createElement('canvas'); c.width = 1600; c.height = 1600;
  document.body.appendChild(c);
  const x = c.getContext('2d');
  x.fillStyle = x.createPattern(tile, 'repeat'); x.fillRect(0, 0, 1600, 1600);
  x.fillStyle = 'rgba(' + (i * 10) + ',80,160,0.3)'; x.fillRect(0, 0, 1600, 1600);
}
document.title = 'ready';
</script></body>"""


class Cdp:
    """One WebSocket to a DevTools endpoint; commands answered in order."""

    def __init__(self, ws_url, timeout):
        assert ws_url.startswith("ws://")
        hostport, path = ws_url[5:].split("/", 1)
        host, port = hostport.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall(
            (
                f"GET /{path} HTTP/1.1\r\nHost: {hostport}\r\nUpgrade: websocket\r\n"
                f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                "Sec-WebSocket-Version: 13\r\n\r\n"
            ).encode()
        )
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise RuntimeError("DevTools closed the handshake")
            head += chunk
        if b" 101 " not in head.split(b"\r\n", 1)[0]:
            raise RuntimeError(f"no WebSocket upgrade: {head[:80]!r}")
        self.buf = head.split(b"\r\n\r\n", 1)[1]
        self.next_id = 0
        self.events = []

    def _read(self, n):
        while len(self.buf) < n:
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise RuntimeError("DevTools connection closed")
            self.buf += chunk
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def _frame(self):
        b0, b1 = self._read(2)
        n = b1 & 0x7F
        if n == 126:
            n = struct.unpack(">H", self._read(2))[0]
        elif n == 127:
            n = struct.unpack(">Q", self._read(8))[0]
        return b0 & 0x0F, self._read(n)

    def call(self, method, **params):
        self.next_id += 1
        data = json.dumps({"id": self.next_id, "method": method, "params": params}).encode()
        mask = os.urandom(4)
        n = len(data)
        head = bytes([0x81])
        if n < 126:
            head += bytes([0x80 | n])
        elif n < 65536:
            head += bytes([0x80 | 126]) + struct.pack(">H", n)
        else:
            head += bytes([0x80 | 127]) + struct.pack(">Q", n)
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(data))
        self.sock.sendall(head + mask + masked)
        message = b""
        for _ in range(100000):
            op, payload = self._frame()
            if op == 0x8:
                raise RuntimeError("DevTools closed the connection")
            message += payload
            if op in (0x1, 0x0):
                try:
                    msg = json.loads(message)
                except ValueError:
                    continue  # a continued frame
                message = b""
                if msg.get("id") == self.next_id:
                    if "error" in msg:
                        raise RuntimeError(f"{method}: {msg['error']}")
                    return msg.get("result", {})
                self.events.append(msg.get("method"))
        raise RuntimeError(f"{method}: no answer")


def shm_used():
    st = os.statvfs("/dev/shm")
    return (st.f_blocks - st.f_bfree) * st.f_frsize


def main():
    binary, mode, shots = sys.argv[1], sys.argv[2], int(sys.argv[3])
    # A timeout's SIGTERM runs the cleanup below (kill Chromium's process group, remove the dir).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    root = tempfile.mkdtemp(prefix="forge-shm-probe-")
    page = os.path.join(root, "heavy.html")
    with open(page, "w") as f:
        f.write(PAGE)
    profile = os.path.join(root, "profile")
    args = [
        binary,
        "--headless=new",
        "--no-sandbox",
        "--no-first-run",
        "--remote-debugging-port=0",
        "--remote-debugging-address=127.0.0.1",
        f"--user-data-dir={profile}",
        "--window-size=1920,1080",
    ]
    if mode == "with-flag":
        args.append("--disable-dev-shm-usage")
    args.append("file://" + page)
    proc = subprocess.Popen(
        args,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={"PATH": "/usr/bin:/bin", "HOME": root, "TMPDIR": root},
        start_new_session=True,
    )
    peak = [shm_used()]
    base = peak[0]
    stop = threading.Event()

    def sample():
        while not stop.wait(0.02):
            peak[0] = max(peak[0], shm_used())

    threading.Thread(target=sample, daemon=True).start()
    started = time.time()
    ok, error = 0, ""
    try:
        port_file = os.path.join(profile, "DevToolsActivePort")
        for _ in range(300):
            if os.path.exists(port_file) and os.path.getsize(port_file) > 0:
                break
            time.sleep(0.05)
        port = int(open(port_file).read().split()[0])
        targets = []
        for _ in range(100):
            targets = json.load(
                __import__("urllib.request").request.urlopen(f"http://127.0.0.1:{port}/json/list")
            )
            targets = [t for t in targets if t.get("type") == "page"]
            if targets:
                break
            time.sleep(0.05)
        cdp = Cdp(targets[0]["webSocketDebuggerUrl"], timeout=60)
        cdp.call("Emulation.setDeviceMetricsOverride", width=1920, height=1080,
                 deviceScaleFactor=2, mobile=False)
        for _ in range(200):
            if cdp.call("Runtime.evaluate", expression="document.title")["result"].get(
                "value"
            ) == "ready":
                break
            time.sleep(0.05)
        for i in range(shots):
            shot = cdp.call("Page.captureScreenshot", format="jpeg", quality=80, captureBeyondViewport=True,
                            clip={"x": 0, "y": i * 1600, "width": 1920, "height": 4800,
                                  "scale": 1})
            if not shot.get("data"):
                raise RuntimeError("empty screenshot")
            ok += 1
        if proc.poll() is not None:
            raise RuntimeError(f"Chromium exited ({proc.returncode})")
    except Exception as e:  # reported, not raised: a crash is a result here
        error = str(e)[:160]
    finally:
        stop.set()
        crashed = proc.poll() is not None
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(timeout=10)
        shutil.rmtree(root, ignore_errors=True)
    print(json.dumps({
        "mode": mode,
        "shm_size_mib": round(os.statvfs("/dev/shm").f_blocks * os.statvfs("/dev/shm").f_frsize
                              / 2**20),
        "screenshots_ok": ok,
        "screenshots_asked": shots,
        "peak_dev_shm_used_mib": round((peak[0] - base) / 2**20, 1),
        "chromium_exited": crashed,
        "error": error,
        "seconds": round(time.time() - started, 1),
    }))


if __name__ == "__main__":
    main()
