"""Drive a running `forge run` (bound beyond loopback, so a bearer token is required) with the
official A2A Python SDK (a2a-sdk) through one conversation whose browser continues, and print what
it saw as one JSON object.

Usage: python3 run_sessions_client.py URL TOKEN AUDIT_FILE STATE_DB

After each step it also reads, from the SQLite state store, which replica the store says holds the
context's live browser (`forge_contexts.browser_replica`).

Steps (every message is the same prompt; the scripted model observes the page, visits the site,
takes a screenshot and reports both observations):
  first   a new context;
  other   a second context while the first one's browser is open (the session cap is 1);
  second  the first context again, with metadata.forge.close_browser = true;
  third   the first context again (its browser was closed);
  fourth  the first context again, after the idle timer closed its browser (seen in the audit log
          before the message is sent);
and /readyz after the first and after the second message; the first task's screenshot fetched from
its artifact URI with the token and without it.
Used by crates/forge-cli/tests/run_sessions.rs.
"""

import asyncio
import base64
import json
import sqlite3
import sys
import time
import uuid

import httpx
from google.protobuf.json_format import MessageToDict
from google.protobuf.struct_pb2 import Struct

from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.types.a2a_pb2 import Message, Part, Role, SendMessageRequest

PROMPT = "look at the visit page"


def request(context_id=None, close_browser=False):
    msg = Message(role=Role.ROLE_USER, message_id=str(uuid.uuid4()), parts=[Part(text=PROMPT)])
    if context_id:
        msg.context_id = context_id
    if close_browser:
        md = Struct()
        md.update({"forge": {"close_browser": True}})
        msg.metadata.CopyFrom(md)
    return SendMessageRequest(message=msg)


async def send(client, **kw):
    events = [MessageToDict(ev) async for ev in client.send_message(request(**kw))]
    return events[-1]["task"]


def answer(task):
    parts = task.get("status", {}).get("message", {}).get("parts", [])
    return "\n".join(p.get("text", "") for p in parts)


def browser_replica(db, context_id):
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
    try:
        row = con.execute("SELECT browser_replica FROM forge_contexts WHERE id = ?", (context_id,)).fetchone()
    finally:
        con.close()
    return row[0] if row else "no row"


def idle_close_seen(audit_file, context_id):
    try:
        with open(audit_file) as f:
            for line in f:
                ev = json.loads(line)
                if (ev.get("event") == "browser_session_close" and ev.get("session") == context_id
                        and ev.get("reason") == "idle"):
                    return True
    except FileNotFoundError:
        pass
    return False


async def main(url, token, audit_file, db):
    auth = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(timeout=60, headers=auth) as h:
        card = await A2ACardResolver(h, url).get_agent_card()
        client = ClientFactory(ClientConfig(streaming=False, httpx_client=h)).create(card)
        out = {}
        first = await send(client)
        ctx = first["contextId"]
        out["first"] = {"task": first, "answer": answer(first)}
        out["ready_after_first"] = (await h.get(url + "readyz")).status_code
        out["replica_after_first"] = browser_replica(db, ctx)
        other = await send(client)
        out["other"] = {"context": other["contextId"], "answer": answer(other)}
        second = await send(client, context_id=ctx, close_browser=True)
        out["second"] = {"context": second["contextId"], "answer": answer(second)}
        out["ready_after_second"] = (await h.get(url + "readyz")).status_code
        out["replica_after_second"] = browser_replica(db, ctx)
        third = await send(client, context_id=ctx)
        out["third"] = {"context": third["contextId"], "answer": answer(third)}
        out["replica_after_third"] = browser_replica(db, ctx)
        # Wait (at most 20 s) for the idle timer to close the context's browser on its own.
        deadline = time.monotonic() + 20
        while not idle_close_seen(audit_file, ctx) and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
        out["idle_closed_before_fourth"] = idle_close_seen(audit_file, ctx)
        # The idle close clears the record through the store's writer: give it (at most) 5 s.
        deadline = time.monotonic() + 5
        while browser_replica(db, ctx) is not None and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        out["replica_after_idle"] = browser_replica(db, ctx)
        fourth = await send(client, context_id=ctx)
        out["fourth"] = {"context": fourth["contextId"], "answer": answer(fourth)}

        # The first task's screenshot: its FilePart URI, fetched with and without the token.
        files = [p for a in first.get("artifacts", []) for p in a.get("parts", [])
                 if p.get("mediaType") == "image/png"]
        out["file_parts"] = files
        uri = next((p["url"] for p in files if "url" in p), None)
        raw = next((p["raw"] for p in files if "raw" in p), None)
        out["uri"] = uri
        if uri:
            got = await h.get(uri)
            out["download"] = {
                "status": got.status_code,
                "content_type": got.headers.get("content-type"),
                "nosniff": got.headers.get("x-content-type-options"),
                "png": got.content[:8] == b"\x89PNG\r\n\x1a\n",
                "size": len(got.content),
                "same_as_inline": raw is not None and base64.b64decode(raw) == got.content,
            }
            async with httpx.AsyncClient(timeout=60) as bare:
                anon = await bare.get(uri)
                out["download_without_token"] = anon.status_code
        await client.close()
    print(json.dumps(out))


if __name__ == "__main__":
    asyncio.run(asyncio.wait_for(main(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]), 240))
