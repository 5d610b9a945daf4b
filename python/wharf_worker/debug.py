"""``debug`` chunks as the LangGraph server sends them (``checkpoints`` and ``tasks`` go as langgraph
streams them): a checkpoint
carries ``checkpoint`` and ``parent_checkpoint`` ({thread_id, checkpoint_ns, checkpoint_id,
checkpoint_map}), and a task whose state is a subgraph's config
carries it as ``checkpoint``."""

KEYS = ("thread_id", "checkpoint_ns", "checkpoint_id", "checkpoint_map")


def _pick(configurable: dict) -> dict:
    return {k: configurable[k] for k in KEYS if k in configurable}


def config_to_checkpoint(config) -> dict | None:
    c = (config or {}).get("configurable") if isinstance(config, dict) else None
    return _pick(c) if c and c.get("thread_id") else None


def debug_task(task: dict) -> dict:
    state = task.get("state")
    c = state.get("configurable") if isinstance(state, dict) else None
    if not c or not c.get("checkpoint_ns"):
        return task
    return {**{k: v for k, v in task.items() if k != "state"}, "checkpoint": _pick(c)}


def debug_checkpoint(payload: dict) -> dict:
    tasks = payload.get("tasks")
    return {
        **payload,
        "checkpoint": config_to_checkpoint(payload.get("config")),
        "parent_checkpoint": config_to_checkpoint(payload.get("parent_config")),
        "tasks": [debug_task(t) if isinstance(t, dict) else t for t in tasks] if isinstance(tasks, (list, tuple)) else tasks,
    }


def server_chunk(mode: str, data):
    if not isinstance(data, dict):
        return data
    if mode == "debug" and isinstance(data.get("payload"), dict):
        if data.get("type") == "checkpoint":
            return {**data, "payload": debug_checkpoint(data["payload"])}
        if data.get("type") == "task_result":
            return {**data, "payload": debug_task(data["payload"])}
    return data
