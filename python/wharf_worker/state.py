"""Thread state (get, history, update) built in Python, in the API's ``ThreadState`` shape."""

from langchain_core.runnables import RunnableConfig

from .serde import error_dict


def _checkpoint(config) -> dict | None:
    c = (config or {}).get("configurable") or {}
    if not c.get("checkpoint_id"):
        return None
    out = {"thread_id": c.get("thread_id"), "checkpoint_ns": c.get("checkpoint_ns", ""), "checkpoint_id": c["checkpoint_id"]}
    if c.get("checkpoint_map"):
        out["checkpoint_map"] = c["checkpoint_map"]
    return out


def thread_interrupt(i) -> dict:
    """An interrupt as thread state shows it: its value and id (a stream chunk carries the whole object)."""
    return {"value": i.value, "id": i.id} if hasattr(i, "value") and hasattr(i, "id") else i


def _task_checkpoint(state) -> dict | None:
    if not isinstance(state, dict):
        return None
    c = state.get("configurable") or {}
    if not c.get("checkpoint_ns"):
        return _checkpoint(state)
    return {k: c[k] for k in ("thread_id", "checkpoint_ns", "checkpoint_id", "checkpoint_map") if k in c}


def thread_state(s) -> dict:
    tasks = []
    for t in s.tasks:
        task = {
            "id": t.id,
            "name": t.name,
            "path": list(t.path),
            "error": error_dict(t.error)["message"] if isinstance(t.error, BaseException) else t.error,
            "interrupts": [thread_interrupt(i) for i in t.interrupts],
            "checkpoint": _task_checkpoint(t.state),
            "state": thread_state(t.state) if t.state is not None and not isinstance(t.state, dict) else None,
            "result": getattr(t, "result", None),
        }
        tasks.append(task)
    checkpoint, parent = _checkpoint(s.config), _checkpoint(s.parent_config)
    return {
        "values": s.values,
        "next": list(s.next),
        "tasks": tasks,
        "metadata": s.metadata or {},
        "created_at": s.created_at,
        "checkpoint": checkpoint,
        "parent_checkpoint": parent,
        "checkpoint_id": checkpoint and checkpoint["checkpoint_id"],
        "parent_checkpoint_id": parent and parent["checkpoint_id"],
        "interrupts": [i for t in tasks for i in t["interrupts"]],
    }


def config_of(thread_id: str, checkpoint: dict | None) -> RunnableConfig:
    return {"configurable": {**(checkpoint or {}), "thread_id": thread_id}}


def stamp_thread_ids(saver) -> None:
    """Stored checkpoints name their thread in their metadata, as the LangGraph server's own
    checkpointer writes them (langgraph leaves ``thread_id`` out of what it copies from the config)."""
    put = saver.aput

    async def aput(config, checkpoint, metadata, new_versions):
        thread_id = (config.get("configurable") or {}).get("thread_id")
        if thread_id is not None and "thread_id" not in metadata:
            metadata = {**metadata, "thread_id": thread_id}
        return await put(config, checkpoint, metadata, new_versions)

    saver.aput = aput
