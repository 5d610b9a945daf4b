"""Runs started by the event-based protocol: langgraph's own protocol events
(``astream_events(version="v3")``), in the shape the agent server's protocol layer reads (the same
as LangGraph JS's ``streamEvents`` v3 publishes them): a message event without its metadata tuple,
an update as ``{node, values}``, custom data as ``{payload}``, a state with interrupts carrying
them as ``__interrupt__`` (the thread layer lifts them into ``input.requested``), a task's start and
result as langgraph's ``tasks`` mode gives them, and a checkpoint as the protocol's envelope
``{id, parent_id?, step, source}`` sent just before the ``values`` event of that checkpoint."""

from langgraph.stream._types import StreamTransformer
from langgraph.stream.stream_channel import StreamChannel

# The stream modes the protocol has channels for, beyond what langgraph's v3 stream always asks
# (values, messages and the task lifecycle); `debug` is a re-wrap of checkpoints and tasks.
EXTRA_MODES = ("updates", "custom", "tasks", "tools", "checkpoints")

# langgraph's own lifecycle transformer folds `tasks` events into its projections and keeps them
# out of the main log; this channel puts a copy back in, in place (a named channel's pushes during
# `process` land in the log before the event being processed), with its namespace in the payload
# because forwarded channel events carry none. User channels surface as `custom:<name>`.
TASKS_CHANNEL = "wharf_tasks"


class _ProtocolModes(StreamTransformer):
    """Asks the graph for the protocol's other modes; their events reach the run's main log, which is
    what is forwarded (nothing subscribes to the channel, so nothing buffers)."""

    required_stream_modes = EXTRA_MODES

    def __init__(self, scope: tuple = ()) -> None:
        super().__init__(scope)
        self._tasks = StreamChannel(TASKS_CHANNEL)

    def init(self) -> dict:
        return {TASKS_CHANNEL: self._tasks}

    def process(self, event) -> bool:
        if event["method"] == "tasks":
            params = event["params"]
            self._tasks.push({"namespace": list(params.get("namespace") or []), "data": params.get("data")})
        return True


def checkpoint_envelope(data) -> dict | None:
    """langgraph's ``checkpoints`` chunk (a state snapshot) → the protocol's checkpoint envelope, as
    LangGraph JS publishes it: ``{id, parent_id?, step, source}``."""
    if not isinstance(data, dict):
        return None
    cid = ((data.get("config") or {}).get("configurable") or {}).get("checkpoint_id")
    if not isinstance(cid, str):
        return None
    meta = data.get("metadata") or {}
    parent = ((data.get("parent_config") or {}).get("configurable") or {}).get("checkpoint_id")
    out = {"id": cid}
    if isinstance(parent, str):
        out["parent_id"] = parent
    out["step"] = meta.get("step")
    out["source"] = meta.get("source")
    return out


class CheckpointPairing:
    """Sends each checkpoint's envelope just before the ``values`` event of that checkpoint, as
    LangGraph JS does. langgraph (Python) streams a step's ``values`` first and its checkpoint right
    after, so a ``values`` event waits for the next event: a checkpoint of its namespace goes out
    first, anything else lets the values go alone. A checkpoint no values event precedes (the
    input's, step -1) is not sent, as LangGraph JS sends none for it."""

    def __init__(self, send) -> None:
        self.send = send
        self.held = None

    def push(self, out: dict) -> None:
        held, self.held = self.held, None
        if out["method"] == "checkpoints":
            if held is not None and held["namespace"] == out["namespace"]:
                self.send(out)
            if held is not None:
                self.send(held)
            return
        if held is not None:
            self.send(held)
        if out["method"] == "values":
            self.held = out
        else:
            self.send(out)

    def flush(self) -> None:
        if self.held is not None:
            held, self.held = self.held, None
            self.send(held)


def wire_event(ev: dict) -> dict | None:
    """One langgraph protocol event → ``{method, namespace, node?, data}``, or None to leave out."""
    method, params = ev["method"], ev["params"]
    ns, data, node = list(params.get("namespace") or []), params.get("data"), params.get("node")
    if method in (TASKS_CHANNEL, "custom:" + TASKS_CHANNEL):
        if not isinstance(data, dict):
            return None
        method, ns, data = "tasks", data["namespace"], data["data"]
    elif method == "tasks":
        # The library's own, should a version keep them in the main log: the copy above is sent.
        return None
    elif method == "checkpoints":
        data = checkpoint_envelope(data)
        if data is None:
            return None
    elif method == "messages" and isinstance(data, (list, tuple)) and len(data) == 2 and isinstance(data[1], dict):
        data, meta = data
        node = node or meta.get("langgraph_node")
    elif method == "updates":
        if not isinstance(data, dict) or not data:
            data = {"values": {}}
        else:
            node, values = next(iter(data.items()))
            data = {"node": node, "values": values if isinstance(values, dict) else {"value": values}}
    elif method == "custom":
        if not (isinstance(data, dict) and "name" in data):
            data = {"payload": data}
    elif method == "values" and params.get("interrupts"):
        base = data if isinstance(data, dict) else {}
        data = {**base, "__interrupt__": list(params["interrupts"])}
    out = {"method": method, "namespace": ns, "data": data}
    if node:
        out["node"] = node
    return out


async def stream_protocol(graph, inp, config: dict, kwargs: dict, send) -> None:
    """Streams the run's protocol events through ``send(event_dict)``; raises what the graph raised."""
    import warnings

    with warnings.catch_warnings():
        # The v3 stream is marked experimental by langgraph: said once in the docs, not per run.
        warnings.simplefilter("ignore")
        run = await graph.astream_events(inp, config, version="v3", transformers=[_ProtocolModes], **kwargs)
    # Without a checkpointer (a stateless run) no checkpoint follows a values event: nothing waits.
    pairing = CheckpointPairing(send) if getattr(graph, "checkpointer", None) not in (None, False) else None
    push = pairing.push if pairing is not None else send
    async with run:
        try:
            async for ev in run:
                out = wire_event(ev)
                if out is not None:
                    push(out)
        finally:
            # What the graph streamed before it failed or was cancelled still goes out.
            if pairing is not None:
                pairing.flush()
