"""The wire of the python-wire fixture project as the official Python client sees it, normalised
(ids and times replaced) so that two servers can be compared: `langgraph dev` records it once
(scripts/record-python-fixtures.sh), Wharf is compared with it (test/agent-server/python-wire.test.ts).

Usage: python wire_flows.py URL OUT.json   (`WHARF_TEST_API_KEY` in the environment when needed)
"""

import json
import os
import re
import sys

from langgraph_sdk import get_sync_client
from langgraph_sdk.schema import Command

URL, OUT = sys.argv[1], sys.argv[2]
KEY = os.environ.get("WHARF_TEST_API_KEY")
MODES = ["values", "updates", "messages-tuple", "messages", "events", "debug", "custom", "checkpoints", "tasks"]

UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
# Interrupt ids: a hash of the task's namespace, which holds a task id.
HEX = re.compile(r"\b[0-9a-f]{32}\b")
TIME = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})?")
# What a server adds about itself or about the request, not about the graph: names of the server,
# its version and URL, request headers passed to the run, request timing. Dropped on both sides.
SERVER_KEYS = {
    "langgraph_api_url", "langgraph_host", "langgraph_plan", "langgraph_version", "langgraph_api_version",
    "langgraph_request_id", "__request_start_time_ms__", "user-agent", "host", "langgraph_auth_user",
    "langgraph_auth_user_id", "langgraph_auth_permissions", "service_auth_user", "x-request-id",
}
# Numbers that are times (epoch seconds or milliseconds) or durations.
TIME_KEYS = {"created_at", "updated_at", "timestamp", "ts", "time"}


def norm(value, key=None):
    if isinstance(value, dict):
        return {norm(k): norm(v, k) for k, v in sorted(value.items()) if k not in SERVER_KEYS and not k.startswith("x-")}
    if isinstance(value, (list, tuple)):
        return [norm(v) for v in value]
    if isinstance(value, str):
        return TIME.sub("<time>", HEX.sub("<hex>", UUID.sub("<uuid>", value)))
    if isinstance(value, (int, float)) and not isinstance(value, bool) and key in TIME_KEYS:
        return "<time>"
    return value


def parts(stream):
    return [[p.event, p.data] for p in stream]


def record():
    c = get_sync_client(url=URL, api_key=KEY)
    out = {}

    assistants = sorted(c.assistants.search(), key=lambda a: a["graph_id"])
    out["assistants.search"] = assistants
    for a in assistants:
        g = a["graph_id"]
        out[f"assistants.get_schemas[{g}]"] = c.assistants.get_schemas(a["assistant_id"])
        out[f"assistants.get_graph[{g}]"] = c.assistants.get_graph(a["assistant_id"])
        out[f"assistants.get_graph[{g},xray]"] = c.assistants.get_graph(a["assistant_id"], xray=True)
        out[f"assistants.get_subgraphs[{g}]"] = c.assistants.get_subgraphs(a["assistant_id"], recurse=True)

    # The official new-langgraph-project template.
    out["template.wait"] = c.runs.wait(None, "agent", input={"changeme": "hi"}, context={"my_configurable_param": "x"})
    out["template.stream"] = parts(c.runs.stream(None, "agent", input={"changeme": "hi"}, context={"my_configurable_param": "x"}, stream_mode=["values", "updates", "debug"]))

    msgs = {"messages": [{"role": "human", "content": "write", "id": "human-1"}]}
    for sub in (False, True):
        for mode in MODES:
            t = c.threads.create()["thread_id"]
            name = f"stream[{mode}{',subgraphs' if sub else ''}]"
            out[name] = parts(c.runs.stream(t, "review", input=msgs, stream_mode=mode, stream_subgraphs=sub))
            out[name + ".resume"] = parts(c.runs.stream(t, "review", command=Command(resume="yes"), stream_mode=mode, stream_subgraphs=sub))
    t = c.threads.create()["thread_id"]
    out["stream[all]"] = parts(c.runs.stream(t, "review", input=msgs, stream_mode=["values", "updates", "messages-tuple", "custom"], stream_subgraphs=True))

    # Human in the loop with runs.wait, the thread's state while interrupted, then resumed.
    t = c.threads.create(metadata={"case": "hitl"})["thread_id"]
    out["hitl.wait"] = c.runs.wait(t, "review", input=msgs)
    out["hitl.thread"] = c.threads.get(t)
    out["hitl.state"] = c.threads.get_state(t)
    out["hitl.state[subgraphs]"] = c.threads.get_state(t, subgraphs=True)
    out["hitl.resume"] = c.runs.wait(t, "review", command=Command(resume="no"))
    out["hitl.thread.after"] = c.threads.get(t)
    out["hitl.state.after"] = c.threads.get_state(t)
    out["hitl.history"] = c.threads.get_history(t)
    out["hitl.update_state"] = c.threads.update_state(t, {"verdict": "edited"}, as_node="review")
    out["hitl.state.updated"] = c.threads.get_state(t)

    # A stateless run has no checkpointer: interrupt() cannot pause it.
    out["stateless.interrupt"] = parts(c.runs.stream(None, "review", input=msgs, stream_mode="updates"))
    return out


if __name__ == "__main__":
    data = norm(record())
    with open(OUT, "w") as f:
        json.dump(data, f, indent=1, sort_keys=True)
        f.write("\n")
    print(f"ok {len(data)} flows")
