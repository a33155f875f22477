"""Drive a running `forge run` with the official A2A Python SDK (a2a-sdk) and print what it saw.

Usage: python3 run_a2a_sdk_client.py URL PROMPT
Prints one JSON object: the card name and interfaces, then for each protocol the SDK speaks to
forge ("v1": A2A 1.0, the SDK's current protocol; "v03": A2A 0.3 through the SDK's compat
transport, chosen by giving the SDK the card with only its 0.3 interface) the task from a blocking
send, the same task from get_task, and every event of a streaming send.
Used by crates/forge-cli/tests/run_a2a_sdk.rs.
"""

import asyncio
import json
import sys
import uuid

import httpx
from google.protobuf.json_format import MessageToDict

from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.types.a2a_pb2 import AgentCard, GetTaskRequest, Message, Part, Role, SendMessageRequest


def request(prompt):
    return SendMessageRequest(
        message=Message(role=Role.ROLE_USER, message_id=str(uuid.uuid4()), parts=[Part(text=prompt)])
    )


async def exercise(card, prompt):
    out = {}
    client = ClientFactory(ClientConfig(streaming=False)).create(card)
    events = [MessageToDict(ev) async for ev in client.send_message(request(prompt))]
    task = events[-1]["task"]
    out["send"] = task
    got = await client.get_task(GetTaskRequest(id=task["id"]))
    out["get"] = MessageToDict(got)
    await client.close()

    streaming = ClientFactory(ClientConfig(streaming=True)).create(card)
    out["stream"] = [MessageToDict(ev) async for ev in streaming.send_message(request(prompt))]
    await streaming.close()
    return out


async def main(url, prompt):
    async with httpx.AsyncClient(timeout=60) as h:
        card = await A2ACardResolver(h, url).get_agent_card()
    result = {
        "card_name": card.name,
        "interfaces": [i.protocol_version for i in card.supported_interfaces],
    }
    result["v1"] = await exercise(card, prompt)

    legacy = AgentCard()
    legacy.CopyFrom(card)
    del legacy.supported_interfaces[:]
    for i in card.supported_interfaces:
        if i.protocol_version.startswith("0.3"):
            legacy.supported_interfaces.add().CopyFrom(i)
    result["v03"] = await exercise(legacy, prompt)
    print(json.dumps(result))


if __name__ == "__main__":
    asyncio.run(asyncio.wait_for(main(sys.argv[1], sys.argv[2]), 120))
