"""One run: ``graph.astream`` (or ``astream_events`` for the ``events`` mode), each chunk mapped to the
event names of the LangGraph server and sent to the agent server as pre-serialised JSON."""

from langchain_core.messages import BaseMessage, BaseMessageChunk
from langgraph.types import Command, Send

from .debug import server_chunk
from .protocol import stream_protocol
from .serde import dumps, error_dict
from .state import thread_interrupt


def to_command(c: dict) -> Command:
    def send(g):
        return Send(g["node"], g.get("input")) if isinstance(g, dict) and "node" in g else g

    goto = c.get("goto")
    # No goto stays None, as the LangGraph server passes it (seen in `events` inputs).
    goto = [send(g) for g in goto] if isinstance(goto, list) else send(goto) if goto is not None else None
    return Command(update=c.get("update"), resume=c.get("resume"), goto=goto, graph=c.get("graph"))


def library_modes(user_modes: list, want_values: bool) -> list:
    """The stream modes to ask langgraph for, given what the client asked to receive."""
    modes = [m for m in user_modes if m not in ("events", "messages-tuple", "messages")]
    if "messages-tuple" in user_modes or "messages" in user_modes:
        modes.append("messages")
    if want_values:
        modes.append("values")
    # updates always: an interrupt arrives as an updates chunk and becomes a values event.
    modes.append("updates")
    return list(dict.fromkeys(modes))


def to_legacy_message(msg):
    """A chunk as the legacy ``messages/partial`` event sends it: the whole message so far."""
    from langchain_core.messages import message_chunk_to_message

    return message_chunk_to_message(msg) if isinstance(msg, BaseMessageChunk) else msg


class EventMapper:
    """Stream chunks → (event, data) pairs in the LangGraph server's names and order."""

    def __init__(self, user_modes: list, subgraphs: bool, send):
        self.modes = user_modes
        self.subgraphs = subgraphs
        self.send = send
        self.last_values = None
        self.interrupt = None
        self.partial = {}

    def emit(self, mode: str, ns, data) -> None:
        top = not ns
        name = (lambda base: base if top else "|".join([base, *ns]))
        if mode == "values" and top:
            self.last_values = data
        if mode == "updates" and isinstance(data, dict) and "__interrupt__" in data:
            if top:
                self.interrupt = data["__interrupt__"]
            # Only asked-for modes are sent: an interrupt reaches a client that did not ask for
            # updates in the values chunk (when values are streamed) or in the thread's state.
            if "updates" not in self.modes:
                return
        if mode == "messages":
            if "messages-tuple" in self.modes:
                self.send(name("messages"), data)
            if "messages" in self.modes:
                self.legacy_message(*data)
            return
        if mode in self.modes:
            self.send(name(mode), server_chunk(mode, data))

    def legacy_message(self, msg, meta) -> None:
        """Legacy ``messages``: metadata once per message id, then the message so far (partial) or whole (complete)."""
        if not isinstance(msg, BaseMessage) or not msg.id:
            return
        prev = self.partial.get(msg.id)
        if prev is None:
            self.send("messages/metadata", {msg.id: {"metadata": meta}})
        if isinstance(msg, BaseMessageChunk):
            merged = msg if prev is None else prev + msg
            self.partial[msg.id] = merged
            self.send("messages/partial", [to_legacy_message(merged)])
        else:
            self.partial[msg.id] = msg
            self.send("messages/complete", [msg])


def new_control():
    """A ``RunControl`` for cooperative draining at a superstep boundary (SIGTERM on a replica), or
    None when the project's langgraph predates it (its runs then end with the server, as before)."""
    try:
        from langgraph.runtime import RunControl
    except ImportError:
        return None
    return RunControl()


def is_drained(err: BaseException) -> bool:
    try:
        from langgraph.errors import GraphDrained
    except ImportError:
        return False
    return isinstance(err, GraphDrained)


async def stopped_early(graph, config: dict) -> bool:
    """After a drain request: whether the run stopped with nodes still to run and no interrupt
    (drained, its checkpoint saved), rather than ending or pausing on its own."""
    state = await graph.aget_state({"configurable": {"thread_id": config["configurable"]["thread_id"]}})
    return bool(state.next) and not any(t.interrupts for t in state.tasks)


async def stream_run(graph, req: dict, config: dict, send_event, control=None) -> None:
    """Streams one run through ``send_event(event, json_bytes)``; raises what the graph raised."""
    user_modes = req.get("stream_mode") or ["values"]
    subgraphs = bool(req.get("subgraphs"))
    stateful = not req.get("temporary")
    library = library_modes(user_modes, not stateful)
    mapper = EventMapper(user_modes, subgraphs, lambda ev, data: send_event(ev, dumps(data)))
    inp = to_command(req["command"]) if req.get("command") is not None else req.get("input")
    kwargs = {
        "stream_mode": library,
        # As asked: without subgraphs, langgraph itself streams a subgraph's messages as its node's.
        "subgraphs": subgraphs,
        "interrupt_before": req.get("interrupt_before"),
        "interrupt_after": req.get("interrupt_after"),
    }
    if req.get("context") is not None:
        kwargs["context"] = req["context"]
    if req.get("durability"):
        kwargs["durability"] = req["durability"]
    if control is not None and "events" not in user_modes:
        kwargs["control"] = control
    if req.get("protocol"):
        # The event-based protocol: langgraph's own protocol events; the stream modes are v3's.
        v3 = {k: v for k, v in kwargs.items() if k not in ("stream_mode", "subgraphs")}

        def send_protocol(ev: dict) -> None:
            if ev["method"] == "values" and not ev["namespace"] and isinstance(ev["data"], dict):
                values = {k: v for k, v in ev["data"].items() if k != "__interrupt__"}
                mapper.last_values = values
                if "__interrupt__" in ev["data"]:
                    mapper.interrupt = ev["data"]["__interrupt__"]
            send_event("protocol", dumps(ev))

        await stream_protocol(graph, inp, config, v3, send_protocol)
    elif "events" in user_modes:
        run_id = str(config.get("run_id"))
        async for ev in graph.astream_events(inp, config, version="v2", **kwargs):
            if "langsmith:hidden" in (ev.get("tags") or []):
                continue
            if ev["event"] == "on_chain_stream" and str(ev.get("run_id")) == run_id:
                chunk = ev["data"]["chunk"]
                ns, mode, data = chunk if subgraphs else ((), *chunk)
                mapper.emit(mode, ns, data)
            else:
                send_event("events", dumps(ev))
    elif subgraphs:
        async for ns, mode, data in graph.astream(inp, config, **kwargs):
            mapper.emit(mode, ns, data)
    else:
        async for mode, data in graph.astream(inp, config, **kwargs):
            mapper.emit(mode, (), data)
    return mapper


async def outcome(graph, config: dict, mapper, stateful: bool) -> tuple:
    """The run's end: (header fields, body bytes of {values, interrupts})."""
    if stateful:
        state = await graph.aget_state({"configurable": {"thread_id": config["configurable"]["thread_id"]}})
        # The thread's interrupts as its state shows them; the run's output keeps whole objects.
        interrupts = {t.id: [thread_interrupt(i) for i in t.interrupts] for t in state.tasks if t.interrupts}
        flat = [i for t in state.tasks for i in t.interrupts]
        values = state.values if isinstance(state.values, dict) else {"__root__": state.values}
        if flat:
            values = {**values, "__interrupt__": flat}
        status = "interrupted" if state.next else "idle"
        return {"thread_status": status}, dumps({"values": values, "interrupts": interrupts})
    values = mapper.last_values if mapper.last_values is not None else {}
    if mapper.interrupt and isinstance(values, dict):
        values = {**values, "__interrupt__": mapper.interrupt}
    return {"thread_status": "idle"}, dumps({"values": values})


__all__ = ["stream_run", "outcome", "error_dict", "library_modes", "to_command"]
