"""One run: ``graph.astream`` (or ``astream_events`` for the ``events`` mode), each chunk mapped to the
event names of the LangGraph server and sent to the agent server as pre-serialised JSON."""

from langchain_core.messages import BaseMessage, BaseMessageChunk
from langgraph.types import Command, Send

from .debug import server_chunk
from .serde import dumps, error_dict


def to_command(c: dict) -> Command:
    def send(g):
        return Send(g["node"], g.get("input")) if isinstance(g, dict) and "node" in g else g

    goto = c.get("goto")
    goto = [send(g) for g in goto] if isinstance(goto, list) else send(goto) if goto is not None else ()
    return Command(update=c.get("update"), resume=c.get("resume"), goto=goto, graph=c.get("graph"))


def library_modes(user_modes: list, want_values: bool) -> list:
    """The stream modes to ask langgraph for, given what the client asked to receive."""
    modes = [m for m in user_modes if m not in ("events", "messages-tuple", "messages")]
    if "messages-tuple" in user_modes or "messages" in user_modes:
        modes.append("messages")
    if "messages" in user_modes or want_values:
        modes.append("values")
    # updates always: an interrupt arrives as an updates chunk and becomes a values event.
    modes.append("updates")
    return list(dict.fromkeys(modes))


class EventMapper:
    """Stream chunks → (event, data) pairs in the LangGraph server's names and order."""

    def __init__(self, user_modes: list, subgraphs: bool, send, library: list):
        self.modes = user_modes
        # langgraph's own values chunks carry the interrupt when values are streamed anyway.
        self.interrupt_as_values = "updates" not in user_modes and "values" not in library
        self.subgraphs = subgraphs
        self.send = send
        self.last_values = None
        self.interrupt = None
        self.seen = set()
        self.partial = {}

    def emit(self, mode: str, ns, data) -> None:
        top = not ns
        if not top and not self.subgraphs:
            return
        name = (lambda base: base if top or not self.subgraphs else "|".join([base, *ns]))
        if mode == "values" and top:
            self.last_values = data
        if mode == "updates" and isinstance(data, dict) and "__interrupt__" in data:
            if top:
                self.interrupt = data["__interrupt__"]
            if self.interrupt_as_values:
                self.send(name("values"), data)
            if "updates" not in self.modes:
                return
        if mode == "messages":
            if "messages-tuple" in self.modes:
                self.send(name("messages"), data)
            if "messages" in self.modes:
                msg, meta = data
                if isinstance(msg, BaseMessageChunk) and msg.id:
                    prev = self.partial.get(msg.id)
                    if prev is None:
                        self.send("messages/metadata", {msg.id: {"metadata": meta}})
                    merged = msg if prev is None else prev + msg
                    self.partial[msg.id] = merged
                    self.send("messages/partial", [merged])
            return
        if mode in self.modes:
            self.send(name(mode), server_chunk(mode, data))
        if mode == "values" and "messages" in self.modes and isinstance(data, dict):
            msgs = data.get("messages")
            msgs = msgs if isinstance(msgs, list) else [msgs] if msgs is not None else []
            fresh = [m for m in msgs if isinstance(m, BaseMessage) and m.id and m.id not in self.seen]
            self.seen.update(m.id for m in fresh)
            if fresh:
                self.send("messages/complete", fresh)


async def stream_run(graph, req: dict, config: dict, send_event) -> None:
    """Streams one run through ``send_event(event, json_bytes)``; raises what the graph raised."""
    user_modes = req.get("stream_mode") or ["values"]
    subgraphs = bool(req.get("subgraphs"))
    stateful = not req.get("temporary")
    library = library_modes(user_modes, not stateful)
    mapper = EventMapper(user_modes, subgraphs, lambda ev, data: send_event(ev, dumps(data)), library)
    inp = to_command(req["command"]) if req.get("command") is not None else req.get("input")
    kwargs = {
        "stream_mode": library,
        "subgraphs": True,
        "interrupt_before": req.get("interrupt_before"),
        "interrupt_after": req.get("interrupt_after"),
    }
    if req.get("context") is not None:
        kwargs["context"] = req["context"]
    if req.get("durability"):
        kwargs["durability"] = req["durability"]
    if "events" in user_modes:
        run_id = str(config.get("run_id"))
        async for ev in graph.astream_events(inp, config, version="v2", **kwargs):
            if "langsmith:hidden" in (ev.get("tags") or []):
                continue
            if ev["event"] == "on_chain_stream" and str(ev.get("run_id")) == run_id:
                ns, mode, data = ev["data"]["chunk"]
                mapper.emit(mode, ns, data)
            else:
                send_event("events", dumps(ev))
    else:
        async for ns, mode, data in graph.astream(inp, config, **kwargs):
            mapper.emit(mode, ns, data)
    return mapper


async def outcome(graph, config: dict, mapper, stateful: bool) -> tuple:
    """The run's end: (header fields, body bytes of {values, interrupts})."""
    if stateful:
        state = await graph.aget_state({"configurable": {"thread_id": config["configurable"]["thread_id"]}})
        interrupts = {t.id: list(t.interrupts) for t in state.tasks if t.interrupts}
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
