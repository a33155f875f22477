"""Drive a running `forge run` with the official A2A Python SDK (a2a-sdk) and print what it saw.

Usage: python3 run_a2a_sdk_client.py URL PROMPT
Prints one JSON object: the card name, the task from a blocking send, the same task from
get_task, and every event of a streaming send. Used by crates/forge-cli/tests/run_a2a_sdk.rs.
"""

import asyncio
import json
import sys
import uuid

from google.protobuf.json_format import MessageToDict

from a2a.client import A2ACardResolver, ClientConfig, create_client
from a2a.types.a2a_pb2 import GetTaskRequest, Message, Part, Role, SendMessageRequest

import httpx


def request(prompt):
    return SendMessageRequest(
        message=Message(role=Role.ROLE_USER, message_id=str(uuid.uuid4()), parts=[Part(text=prompt)])
    )


async def main(url, prompt):
    out = {}
    async with httpx.AsyncClient(timeout=60) as h:
        card = await A2ACardResolver(h, url).get_agent_card()
        out["card_name"] = card.name

    client = await create_client(url, ClientConfig(streaming=False))
    events = [MessageToDict(ev) async for ev in client.send_message(request(prompt))]
    task = events[-1]["task"]
    out["send"] = task
    got = await client.get_task(GetTaskRequest(id=task["id"]))
    out["get"] = MessageToDict(got)
    await client.close()

    streaming = await create_client(url, ClientConfig(streaming=True))
    out["stream"] = [MessageToDict(ev) async for ev in streaming.send_message(request(prompt))]
    await streaming.close()
    print(json.dumps(out))


if __name__ == "__main__":
    asyncio.run(asyncio.wait_for(main(sys.argv[1], sys.argv[2]), 120))
