"""The official MCP Python SDK (PyPI `mcp`, 2.x) as forge-mcp's counterpart in its interop tests.

Run by crates/forge-mcp/tests/stdio_child.rs; each mode prints one JSON line on success and exits
non-zero (with the reason on stderr) on failure.

  client-stdio EXE      the SDK client launches EXE (forge-mcp's test host on stdio) and checks it
  client-http URL       the same checks against forge-mcp's streamable HTTP server at URL
  server-http PORT TOK  an MCPServer on 127.0.0.1:PORT/mcp behind a bearer check (token TOK)
  server-stdio          an MCPServer on stdio
"""

import json
import os
import sys

import anyio
from mcp import Client, StdioServerParameters
from mcp.server.mcpserver import MCPServer


def fail(msg):
    print(f"mcp_interop: {msg}", file=sys.stderr)
    sys.exit(1)


def text_of(result):
    return "\n".join(c.text for c in result.content if getattr(c, "type", None) == "text")


async def check_forge_server(target):
    out = {}
    async with Client(target, read_timeout_seconds=20) as client:
        out["protocol"] = client.protocol_version
        # One MCP session, one host session: calls share it.
        r1 = await client.call_tool("echo", {"text": "a"})
        r2 = await client.call_tool("echo", {"text": "b"})
        out["sessions"] = [r1.structured_content["session"], r2.structured_content["session"]]
        out["instructions"] = client.instructions
        tools = await client.list_tools()
        names = sorted(t.name for t in tools.tools)
        out["tools"] = names
        if "echo" not in names:
            fail(f"echo not listed: {names}")
        r = await client.call_tool("echo", {"text": "from python"})
        if r.is_error or "from python" not in text_of(r):
            fail(f"echo failed: {r}")
        out["echo_structured"] = r.structured_content
        r = await client.call_tool("fail", {})
        if not r.is_error or "blocked by egress policy" not in text_of(r):
            fail(f"fail tool did not give isError with the message: {r}")
        out["fail_text"] = text_of(r)
        # Cancellation: the SDK sends notifications/cancelled when the call's scope is cancelled.
        with anyio.move_on_after(0.5):
            await client.call_tool("slow", {"seconds": 30})
            fail("slow call was not cancelled")
        # The server-side call saw the cancellation (bounded wait).
        seen = 0
        for _ in range(100):
            r = await client.call_tool("stats", {})
            seen = (r.structured_content or {}).get("cancelled", 0)
            if seen >= 1:
                break
            await anyio.sleep(0.05)
        if seen < 1:
            fail("the server did not see the cancellation of the slow call")
        out["cancelled_on_server"] = seen
    print(json.dumps(out))


def serve_http(port, token):
    import uvicorn
    from starlette.middleware.base import BaseHTTPMiddleware
    from starlette.responses import JSONResponse

    srv = MCPServer("py-srv")

    @srv.tool()
    def echo(text: str) -> str:
        """Echo the text back."""
        return f"py echo: {text}"

    @srv.tool()
    def secret() -> str:
        """A tool forge's allow list leaves out."""
        return "should not be reachable"

    app = srv.streamable_http_app()

    class Bearer(BaseHTTPMiddleware):
        async def dispatch(self, request, call_next):
            if request.headers.get("authorization") != f"Bearer {token}":
                return JSONResponse({"error": "bad token"}, status_code=401, headers={"WWW-Authenticate": "Bearer"})
            return await call_next(request)

    app.add_middleware(Bearer)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


def serve_stdio():
    srv = MCPServer("py-stdio")

    @srv.tool()
    def env_keys() -> str:
        """The names of this process's environment variables, comma-separated."""
        return ",".join(sorted(os.environ.keys()))

    srv.run("stdio")


def main():
    mode = sys.argv[1]
    if mode == "client-stdio":
        params = StdioServerParameters(command=sys.argv[2], args=[], env={"FORGE_MCP_TEST_STDIO_HOST": "1"})
        anyio.run(check_forge_server, params)
    elif mode == "client-http":
        anyio.run(check_forge_server, sys.argv[2])
    elif mode == "server-http":
        serve_http(int(sys.argv[2]), sys.argv[3])
    elif mode == "server-stdio":
        serve_stdio()
    else:
        fail(f"unknown mode {mode}")


if __name__ == "__main__":
    main()
