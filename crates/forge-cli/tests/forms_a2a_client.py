"""Drive the form skills of a running `forge run` with the official A2A Python SDK (a2a-sdk).

Usage: python3 forms_a2a_client.py URL REQUESTS_JSON
REQUESTS_JSON: a list of {"skill": ..., "input": {...}, "via": "text"|"metadata"}. Each request is
sent as a streaming message (`message/stream`) naming the skill in `metadata.skill`, with its input
as JSON in the first text part ("text") or as the metadata's fields ("metadata"). Prints one JSON
object: the card's skill ids, then per request either {"events": [...]} (every stream event) or
{"error": "..."} when the server refused the message.
Used by crates/forge-cli/tests/forms_a2a.rs.
"""

import asyncio
import base64
import json
import sys
import uuid

import httpx
from google.protobuf.json_format import MessageToDict

from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.types.a2a_pb2 import Message, Part, Role, SendMessageRequest


def request(skill, payload, via):
    msg = Message(role=Role.ROLE_USER, message_id=str(uuid.uuid4()))
    if via == "text":
        msg.parts.append(Part(text=json.dumps(payload)))
        msg.metadata.update({"skill": skill})
    else:
        msg.parts.append(Part(text="learn this form"))
        fields = dict(payload)
        fields["skill"] = skill
        msg.metadata.update(fields)
    return SendMessageRequest(message=msg)


async def main(url, requests):
    async with httpx.AsyncClient(timeout=60) as h:
        card = await A2ACardResolver(h, url).get_agent_card()
    out = {"skills": [s.id for s in card.skills], "runs": []}
    for r in requests:
        client = ClientFactory(ClientConfig(streaming=True)).create(card)
        try:
            events = [MessageToDict(ev) async for ev in client.send_message(request(r["skill"], r["input"], r.get("via", "text")))]
            # Inline file bytes (base64 in the JSON form) also as text, for the test to read.
            for ev in events:
                for part in ev.get("artifactUpdate", {}).get("artifact", {}).get("parts", []):
                    if "raw" in part:
                        part["text"] = base64.b64decode(part["raw"]).decode("utf-8", "replace")
            out["runs"].append({"events": events})
        except Exception as e:  # the server's JSON-RPC error, as the SDK raises it
            out["runs"].append({"error": str(e)})
        await client.close()
    print(json.dumps(out))


if __name__ == "__main__":
    asyncio.run(asyncio.wait_for(main(sys.argv[1], json.loads(sys.argv[2])), 600))
