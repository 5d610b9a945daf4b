"""Drives a deployed new-langgraph-project template through its stable URL with the official Python
client, sync and async. Usage: python deployment_flows.py URL API_KEY. Exits non-zero on a mismatch."""

import asyncio
import sys

from langgraph_sdk import get_client, get_sync_client

URL, KEY = sys.argv[1], sys.argv[2]
EXPECTED = {"changeme": "output from call_model. Configured with x"}
CONTEXT = {"my_configurable_param": "x"}


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def sync_flows():
    client = get_sync_client(url=URL, api_key=KEY)
    assistants = client.assistants.search()
    check([a["graph_id"] for a in assistants] == ["agent"], assistants)
    check(assistants[0]["name"] == "New Graph", assistants[0]["name"])
    out = client.runs.wait(None, "agent", input={"changeme": "hi"}, context=CONTEXT)
    check(out == EXPECTED, out)
    thread = client.threads.create()
    parts = list(client.runs.stream(thread["thread_id"], "agent", input={"changeme": "hi"}, context=CONTEXT, stream_mode=["values", "updates"]))
    check([p.data for p in parts if p.event == "updates"] == [{"call_model": EXPECTED}], parts)
    state = client.threads.get_state(thread["thread_id"])
    check(state["values"] == EXPECTED and state["next"] == [], state)
    return len(parts)


async def async_flows():
    client = get_client(url=URL, api_key=KEY)
    thread = await client.threads.create()
    run = await client.runs.create(thread["thread_id"], "agent", input={"changeme": "hi"}, context=CONTEXT)
    await client.runs.join(thread["thread_id"], run["run_id"])
    history = await client.threads.get_history(thread["thread_id"])
    check(history[0]["values"] == EXPECTED, history[0])
    return len(history)


print(f"ok sync={sync_flows()} async={asyncio.run(async_flows())}")
