"""Drives `wharf dev` serving the official new-langgraph-project template with the official Python
client, sync and async. Usage: python template_flows.py URL. Exits non-zero on the first mismatch."""

import asyncio
import sys

from langgraph_sdk import get_client, get_sync_client

URL = sys.argv[1]
EXPECTED = {"changeme": "output from call_model. Configured with x"}


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def sync_flows():
    client = get_sync_client(url=URL, api_key=None)
    assistants = client.assistants.search()
    check([a["graph_id"] for a in assistants] == ["agent"], assistants)
    check(assistants[0]["name"] == "New Graph", assistants[0]["name"])
    schemas = client.assistants.get_schemas(assistants[0]["assistant_id"])
    check("my_configurable_param" in schemas["context_schema"]["properties"], schemas["context_schema"])
    check("changeme" in schemas["input_schema"]["properties"], schemas["input_schema"])
    graph = client.assistants.get_graph("agent")
    check({n["id"] for n in graph["nodes"]} >= {"__start__", "call_model"}, graph)

    # Stateless wait with context, as the template's README shows.
    out = client.runs.wait(None, "agent", input={"changeme": "hi"}, context={"my_configurable_param": "x"})
    check(out == EXPECTED, out)

    thread = client.threads.create()
    parts = list(client.runs.stream(thread["thread_id"], "agent", input={"changeme": "hi"}, context={"my_configurable_param": "x"}, stream_mode=["values", "updates", "debug"]))
    events = [p.event for p in parts]
    check(events[0] == "metadata", events)
    check({"values", "updates", "debug"} <= set(events), events)
    check([p.data for p in parts if p.event == "updates"] == [{"call_model": EXPECTED}], parts)
    state = client.threads.get_state(thread["thread_id"])
    check(state["values"] == EXPECTED and state["next"] == [], state)
    history = client.threads.get_history(thread["thread_id"])
    check(len(history) >= 2, history)
    check(client.threads.get(thread["thread_id"])["status"] == "idle", "thread not idle")
    return len(parts)


async def async_flows():
    client = get_client(url=URL, api_key=None)
    thread = await client.threads.create()
    run = await client.runs.create(thread["thread_id"], "agent", input={"changeme": "hi"}, context={"my_configurable_param": "x"})
    joined = await client.runs.join(thread["thread_id"], run["run_id"])
    check(joined == EXPECTED, joined)
    chunks = [c async for c in client.runs.stream(None, "agent", input={"changeme": "a"}, context={"my_configurable_param": "x"}, stream_mode="values")]
    check(chunks[-1].data == EXPECTED, chunks)
    found = await client.threads.search(limit=10)
    check(thread["thread_id"] in [t["thread_id"] for t in found], found)
    return len(chunks)


if __name__ == "__main__":
    n_sync = sync_flows()
    n_async = asyncio.run(async_flows())
    print(f"ok sync={n_sync} async={n_async}")
