"""The official Python client, sync and async, over the mixed fixture project's Python graphs:
assistants, threads, every stream mode with subgraphs, join_stream with last_event_id, human in the
loop, cancel (interrupt and rollback), crons, the store. Usage: python client_flows.py URL
(`WHARF_TEST_API_KEY` in the environment when the server needs a key). Prints "ok".
"""

import asyncio
import os
import sys
import time

from langgraph_sdk import get_client, get_sync_client
from langgraph_sdk.schema import Command

URL = sys.argv[1]
KEY = os.environ.get("WHARF_TEST_API_KEY")
MODES = ["values", "updates", "messages-tuple", "debug", "custom", "checkpoints", "tasks", "events"]


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def stream_checks(parts, subgraphs: bool, stateful: bool = True):
    """The nested graph streamed with every mode: each mode's events, subgraph ones named mode|ns
    (a stateless run has no checkpointer, so no checkpoints)."""
    names = [p.event for p in parts]
    check(names[0] == "metadata", names[:3])
    for mode in ("values", "updates", "debug", "tasks", "events") + (("checkpoints",) if stateful else ()):
        check(mode in names, (mode, names))
    inner = [n for n in names if "|inner:" in n]
    if subgraphs:
        check({n.split("|")[0] for n in inner} >= {"values", "updates", "debug", "tasks"}, inner)
    else:
        check(not inner, inner)
    values = [p.data for p in parts if p.event == "values"]
    check(values[-1] == {"n": 4}, values[-1])


def sync_flows():
    c = get_sync_client(url=URL, api_key=KEY)
    # Assistants: the default ones, then one of our own with versions.
    found = {a["graph_id"]: a for a in c.assistants.search(limit=100)}
    check({"echo", "nested", "ask", "js_echo"} <= set(found), sorted(found))
    check(c.assistants.get(found["nested"]["assistant_id"])["name"] == "Nested", found["nested"])
    mine = c.assistants.create("chat", config={"configurable": {"reply": "hi from v1"}}, name="chatty", metadata={"team": "a"})
    c.assistants.update(mine["assistant_id"], config={"configurable": {"reply": "hi from v2"}})
    versions = c.assistants.get_versions(mine["assistant_id"])
    check(sorted(v["version"] for v in versions) == [1, 2], versions)
    out = c.runs.wait(None, mine["assistant_id"], input={"messages": [{"role": "human", "content": "?"}]})
    check(out["messages"][-1]["content"] == "hi from v2", out)
    check(c.assistants.search(metadata={"team": "a"})[0]["assistant_id"] == mine["assistant_id"], "search by metadata")
    check("inner" in c.assistants.get_subgraphs(found["nested"]["assistant_id"]), "subgraphs")
    c.assistants.delete(mine["assistant_id"])

    # Threads: create with metadata, search, update, copy, delete.
    t = c.threads.create(metadata={"case": "sync"}, graph_id="nested")["thread_id"]
    parts = list(c.runs.stream(t, "nested", input={"n": 1}, stream_mode=MODES, stream_subgraphs=True))
    stream_checks(parts, True)
    check(any(r["thread_id"] == t for r in c.threads.search(metadata={"case": "sync"})), "thread search")
    c.threads.update(t, metadata={"more": 1})
    check(c.threads.get(t)["metadata"]["more"] == 1, "thread update")
    copy = c.threads.copy(t)
    check(c.threads.get_state(copy["thread_id"])["values"] == {"n": 4}, "copied state")
    c.threads.delete(copy["thread_id"])

    # join_stream with last_event_id: a resumable background run joined from an event id.
    t2 = c.threads.create()["thread_id"]
    run = c.runs.create(t2, "nested", input={"n": 2}, stream_mode=["values", "updates"], stream_resumable=True)
    full = list(c.runs.join_stream(t2, run["run_id"], stream_mode=["values", "updates"]))
    check(full[-1].data == {"n": 6}, full[-1])
    ids = [p.id for p in full if p.id]
    check(len(ids) >= 3, ids)
    rest = list(c.runs.join_stream(t2, run["run_id"], last_event_id=ids[1]))
    check([p.data for p in rest] == [p.data for p in full if p.id and p.id > ids[1]] or [p.data for p in rest] == [p.data for p in full[2:]], (rest, full))

    # Human in the loop through the stream: interrupt, state, resume with Command.
    t3 = c.threads.create()["thread_id"]
    parts = list(c.runs.stream(t3, "ask", input={"question": "go?"}, stream_mode="updates"))
    check(parts[-1].data["__interrupt__"][0]["value"] == {"question": "go?"}, parts[-1])
    check(c.threads.get(t3)["status"] == "interrupted", "interrupted")
    check(c.threads.get_state(t3)["next"] == ["ask"], "next")
    parts = list(c.runs.stream(t3, "ask", command=Command(resume="sure"), stream_mode="values"))
    check(parts[-1].data["answer"] == "you said sure", parts[-1])

    # Cancel: interrupt keeps the first node's checkpoint, rollback removes the run's.
    for action, kept in (("interrupt", True), ("rollback", False)):
        t4 = c.threads.create()["thread_id"]
        run = c.runs.create(t4, "slow", input={"step": 0})
        deadline = time.time() + 30
        while c.threads.get_state(t4)["values"].get("step") != 1 and time.time() < deadline:
            time.sleep(0.1)
        c.runs.cancel(t4, run["run_id"], wait=True, action=action)
        if kept:
            check(c.runs.get(t4, run["run_id"])["status"] == "interrupted", action)
            check(c.threads.get_state(t4)["values"] == {"step": 1}, action)
        else:
            check(c.threads.get_state(t4)["values"] == {}, c.threads.get_state(t4))

    # Crons on a thread and stateless: create, search, delete.
    t5 = c.threads.create()["thread_id"]
    cron = c.crons.create_for_thread(t5, "echo", schedule="0 0 * * *", input={"messages": [{"role": "human", "content": "tick"}]})
    check(any(x["cron_id"] == cron["cron_id"] for x in c.crons.search(thread_id=t5)), "cron search")
    c.crons.delete(cron["cron_id"])
    cron = c.crons.create("echo", schedule="0 0 * * *", input={"messages": [{"role": "human", "content": "tick"}]})
    c.crons.delete(cron["cron_id"])

    # The store, written over HTTP and by a Python graph node, searched both ways.
    c.store.put_item(["memories", "u1"], "k-http", {"text": "from http"})
    out = c.runs.wait(None, "memory", input={"key": "k-graph", "text": "from graph"})
    check(out["found"] == ["k-graph", "k-http"], out)
    items = c.store.search_items(["memories"], limit=10)["items"]
    check(sorted(i["key"] for i in items) == ["k-graph", "k-http"], items)
    check(c.store.get_item(["memories", "u1"], "k-graph")["value"] == {"text": "from graph"}, "store get")
    check(["memories", "u1"] in c.store.list_namespaces(prefix=["memories"])["namespaces"], "namespaces")
    c.store.delete_item(["memories", "u1"], "k-http")
    c.store.delete_item(["memories", "u1"], "k-graph")


async def async_flows():
    c = get_client(url=URL, api_key=KEY)
    found = await c.assistants.search(graph_id="nested")
    check(found and found[0]["graph_id"] == "nested", found)
    t = (await c.threads.create())["thread_id"]
    parts = [p async for p in c.runs.stream(t, "nested", input={"n": 1}, stream_mode=MODES, stream_subgraphs=False)]
    stream_checks(parts, False)
    parts = [p async for p in c.runs.stream(None, "nested", input={"n": 1}, stream_mode=MODES, stream_subgraphs=True)]
    stream_checks(parts, True, stateful=False)
    msgs = [p async for p in c.runs.stream(None, "chat", input={"messages": [{"role": "human", "content": "hi"}]}, stream_mode=["messages-tuple", "custom"])]
    check(any(p.event == "custom" and p.data == {"progress": "thinking"} for p in msgs), msgs)
    check("".join(p.data[0]["content"] for p in msgs if p.event == "messages") == "hello there", msgs)

    t2 = (await c.threads.create())["thread_id"]
    run = await c.runs.create(t2, "nested", input={"n": 5}, stream_mode="values", stream_resumable=True)
    full = [p async for p in c.runs.join_stream(t2, run["run_id"])]
    check(full[-1].data == {"n": 12}, full)
    rest = [p async for p in c.runs.join_stream(t2, run["run_id"], last_event_id=[p.id for p in full if p.id][0])]
    check(rest and rest[-1].data == {"n": 12} and len(rest) < len(full), (rest, full))

    t3 = (await c.threads.create())["thread_id"]
    first = await c.runs.wait(t3, "ask", input={"question": "a?"})
    check(first["__interrupt__"][0]["value"] == {"question": "a?"}, first)
    done = await c.runs.wait(t3, "ask", command=Command(resume="b"))
    check(done["answer"] == "you said b", done)
    check((await c.threads.get_history(t3, limit=2))[0]["values"]["answer"] == "you said b", "history")

    t4 = (await c.threads.create())["thread_id"]
    run = await c.runs.create(t4, "slow", input={"step": 0})
    await asyncio.sleep(0.5)
    await c.runs.cancel(t4, run["run_id"], wait=True)
    check((await c.runs.get(t4, run["run_id"]))["status"] == "interrupted", "async cancel")

    cron = await c.crons.create("echo", schedule="0 0 * * *", input={"messages": [{"role": "human", "content": "tick"}]})
    check(any(x["cron_id"] == cron["cron_id"] for x in await c.crons.search(assistant_id="echo")), "async cron search")
    await c.crons.delete(cron["cron_id"])

    await c.store.put_item(["notes"], "a", {"text": "x"})
    check((await c.store.search_items(["notes"]))["items"][0]["value"] == {"text": "x"}, "async store")
    await c.store.delete_item(["notes"], "a")


if __name__ == "__main__":
    sync_flows()
    asyncio.run(async_flows())
    print("ok")
