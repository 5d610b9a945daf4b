"""Semantic store search (embeddings computed by the project's Python function), a Python graph
searching the store, and the project's FastAPI routes, with the official Python client (async and
sync) against the python-runtime fixture. Usage: python runtime_flows.py URL
(`WHARF_TEST_API_KEY` in the environment when the server needs a key)."""

import asyncio
import os
import sys

from langgraph_sdk import get_client, get_sync_client

URL = sys.argv[1]
KEY = os.environ.get("WHARF_TEST_API_KEY")


def check(cond, what):
    if not cond:
        raise AssertionError(what)


async def async_flows():
    client = get_client(url=URL, api_key=KEY)
    await client.store.put_item(["py-notes"], "cat", {"text": "cat cat cat"})
    await client.store.put_item(["py-notes"], "sun", {"text": "sun sun"})
    found = await client.store.search_items(["py-notes"], query="the sun", limit=2)
    check([i["key"] for i in found["items"]] == ["sun", "cat"], found)
    check(isinstance(found["items"][0].get("score"), (int, float)), found)
    out = await client.runs.wait(None, "recall", input={"query": "a dog"})
    check(out["keys"][0] == "dogs", out)


def sync_flows():
    client = get_sync_client(url=URL, api_key=KEY)
    hello = client.http.get("/custom/hello/py", params={"q": "sync"})
    check(hello == {"hello": "py", "greeting": "hello from the env map", "q": "sync"}, hello)
    echoed = client.http.post("/custom/echo", json={"x": 1})
    check(echoed == {"got": {"x": 1}}, echoed)


asyncio.run(async_flows())
sync_flows()
print("ok")
