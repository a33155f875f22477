"""The official MCP Python SDK (PyPI `mcp`, 2.x) as a client of `forge mcp serve`.

Run by crates/forge-cli/tests/mcp_serve.rs. Prints one JSON object (what it saw) on success; the
Rust test asserts on it. Exits non-zero with the reason on stderr when the protocol itself fails.

  stdio FORGE_EXE CONFIG AUDIT SITE   launches `forge mcp serve` on stdio
  http URL SITE                       connects to `forge mcp serve --transport http` at URL
  list-http URL                       only lists the tools
  call-stdio FORGE_EXE CONFIG AUDIT TOOL ARGS_JSON ENV_JSON
                                      one call through `forge mcp serve` on stdio (ENV_JSON: extra
                                      environment for forge)
"""

import json
import sys
import time

import anyio
from mcp import Client, StdioServerParameters


def text_of(result):
    return "\n".join(c.text for c in result.content if getattr(c, "type", None) == "text")


def dump(result):
    return {
        "is_error": bool(result.is_error),
        "text": text_of(result),
        "types": [c.type for c in result.content],
        "images": [
            {"mime": c.mimeType if hasattr(c, "mimeType") else c.mime_type, "len": len(c.data)}
            for c in result.content
            if getattr(c, "type", None) == "image"
        ],
        "structured": result.structured_content,
    }


async def session_checks(client, site, out):
    out["instructions"] = client.instructions
    tools = await client.list_tools()
    out["tools"] = [t.name for t in tools.tools]
    out["tools_list_bytes"] = len(
        json.dumps([t.model_dump(by_alias=True, exclude_none=True) for t in tools.tools], separators=(",", ":"))
    )
    out["navigate"] = dump(await client.call_tool("browser_navigate", {"url": site + "/"}))
    out["blocked"] = dump(await client.call_tool("browser_navigate", {"url": "http://not-allowed.example/"}))
    out["screenshot"] = dump(await client.call_tool("browser_screenshot", {}))
    # Cancellation: the SDK sends notifications/cancelled when the call's scope is cancelled.
    # Progress: with a progress token, a call longer than a second reports every second.
    progress = []

    async def on_progress(value, total, message):
        progress.append(message)

    started = time.monotonic()
    with anyio.move_on_after(2.5):
        await client.call_tool("browser_navigate", {"url": site + "/slow"}, progress_callback=on_progress)
        out["slow_not_cancelled"] = True
    out["progress"] = progress
    out["cancel_returned_after_s"] = time.monotonic() - started
    # The session still works after the cancellation, promptly.
    started = time.monotonic()
    after = await client.call_tool("browser_navigate", {"url": site + "/"})
    out["after_cancel"] = dump(after)
    out["after_cancel_s"] = time.monotonic() - started


async def run_stdio(exe, config, audit, site):
    params = StdioServerParameters(
        command=exe, args=["mcp", "serve", "--config", config, "--audit-file", audit]
    )
    out = {}
    async with Client(params, read_timeout_seconds=120) as client:
        await session_checks(client, site, out)
    print(json.dumps(out))


async def run_http(url, site):
    out = {}
    async with Client(url, read_timeout_seconds=120) as a:
        await session_checks(a, site, out)
        # Two MCP sessions, two browser contexts: a cookie set in one is not sent in the other.
        out["a_set"] = dump(await a.call_tool("browser_navigate", {"url": site + "/set?v=alpha"}))
        out["a_page"] = dump(await a.call_tool("browser_navigate", {"url": site + "/"}))
        async with Client(url, read_timeout_seconds=120) as b:
            out["b_page"] = dump(await b.call_tool("browser_navigate", {"url": site + "/"}))
    print(json.dumps(out))


async def list_http(url):
    async with Client(url, read_timeout_seconds=60) as client:
        tools = await client.list_tools()
        print(json.dumps([t.model_dump(by_alias=True, exclude_none=True) for t in tools.tools]))


async def call_stdio(exe, config, audit, tool, args, env):
    params = StdioServerParameters(
        command=exe,
        args=["mcp", "serve", "--config", config, "--audit-file", audit],
        env=json.loads(env),
    )
    async with Client(params, read_timeout_seconds=60) as client:
        names = [t.name for t in (await client.list_tools()).tools]
        r = await client.call_tool(tool, json.loads(args))
        print(json.dumps({"tools": names, "result": dump(r)}))


def main():
    mode = sys.argv[1]
    if mode == "stdio":
        anyio.run(run_stdio, *sys.argv[2:6])
    elif mode == "http":
        anyio.run(run_http, sys.argv[2], sys.argv[3])
    elif mode == "call-stdio":
        anyio.run(call_stdio, *sys.argv[2:8])
    elif mode == "list-http":
        anyio.run(list_http, sys.argv[2])
    else:
        print(f"unknown mode {mode}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
