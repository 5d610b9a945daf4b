"""Thread state (get, history, update) built in Python, in the API's ``ThreadState`` shape."""

from langchain_core.runnables import RunnableConfig

from .serde import error_dict


def _checkpoint(config) -> dict | None:
    c = (config or {}).get("configurable") or {}
    if not c.get("checkpoint_id"):
        return None
    return {"thread_id": c.get("thread_id"), "checkpoint_ns": c.get("checkpoint_ns", ""), "checkpoint_id": c["checkpoint_id"], "checkpoint_map": c.get("checkpoint_map")}


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
            "interrupts": list(t.interrupts),
            "checkpoint": _task_checkpoint(t.state),
            "state": thread_state(t.state) if t.state is not None and not isinstance(t.state, dict) else None,
        }
        if getattr(t, "result", None) is not None:
            task["result"] = t.result
        tasks.append(task)
    return {
        "values": s.values,
        "next": list(s.next),
        "tasks": tasks,
        "metadata": s.metadata or {},
        "created_at": s.created_at,
        "checkpoint": _checkpoint(s.config),
        "parent_checkpoint": _checkpoint(s.parent_config),
        "interrupts": [i for t in tasks for i in t["interrupts"]],
    }


def config_of(thread_id: str, checkpoint: dict | None) -> RunnableConfig:
    return {"configurable": {**(checkpoint or {}), "thread_id": thread_id}}
