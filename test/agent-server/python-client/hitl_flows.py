"""Interrupt and Command resume, streaming with subgraphs and messages, with the official Python
client (sync and async) against the mixed fixture project. Usage: python hitl_flows.py URL
(`WHARF_TEST_API_KEY` in the environment when the server needs a key)."""

import asyncio
import os
import sys

from langgraph_sdk import get_client, get_sync_client
from langgraph_sdk.schema import Command

URL = sys.argv[1]
KEY = os.environ.get("WHARF_TEST_API_KEY")


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def sync_flows():
    client = get_sync_client(url=URL, api_key=KEY)
    thread = client.threads.create(graph_id="ask")
    first = client.runs.wait(thread["thread_id"], "ask", input={"question": "ship it?"})
    check(first["__interrupt__"][0]["value"] == {"question": "ship it?"}, first)
    check(client.threads.get(thread["thread_id"])["status"] == "interrupted", "not interrupted")
    state = client.threads.get_state(thread["thread_id"])
    check(state["interrupts"][0]["value"] == {"question": "ship it?"}, state)
    done = client.runs.wait(thread["thread_id"], "ask", command=Command(resume="yes"))
    check(done == {"question": "ship it?", "answer": "you said yes"}, done)

    parts = list(client.runs.stream(None, "nested", input={"n": 1}, stream_mode=["values", "updates"], stream_subgraphs=True))
    names = [p.event for p in parts]
    check(any(n.startswith("updates|inner:") for n in names), names)
    check(parts[-1].data == {"n": 4}, parts[-1])

    msgs = [p for p in client.runs.stream(None, "chat", input={"messages": [{"role": "human", "content": "hi"}]}, stream_mode="messages-tuple") if p.event == "messages"]
    check("".join(m.data[0]["content"] for m in msgs) == "hello there", msgs)
    check(msgs[0].data[0]["type"] == "AIMessageChunk" and "example" not in msgs[0].data[0], msgs[0].data[0])


async def async_flows():
    client = get_client(url=URL, api_key=KEY)
    thread = await client.threads.create()
    chunks = [c async for c in client.runs.stream(thread["thread_id"], "ask", input={"question": "q?"}, stream_mode="updates")]
    check(any(c.event == "updates" and "__interrupt__" in c.data for c in chunks), chunks)
    resumed = [c async for c in client.runs.stream(thread["thread_id"], "ask", command={"resume": "no"}, stream_mode="values")]
    check(resumed[-1].data["answer"] == "you said no", resumed)
    history = await client.threads.get_history(thread["thread_id"])
    check(history[0]["values"]["answer"] == "you said no", history[0])


if __name__ == "__main__":
    sync_flows()
    asyncio.run(async_flows())
    print("ok")
