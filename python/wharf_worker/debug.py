"""``debug``, ``checkpoints`` and ``tasks`` chunks as the LangGraph server sends them: a checkpoint
carries ``checkpoint`` and ``parent_checkpoint`` ({thread_id, checkpoint_ns, checkpoint_id,
checkpoint_map}), configs lose internal (``__``) keys, and a task whose state is a subgraph's config
carries it as ``checkpoint``."""

KEYS = ("thread_id", "checkpoint_ns", "checkpoint_id", "checkpoint_map")


def _pick(configurable: dict) -> dict:
    return {k: configurable[k] for k in KEYS if k in configurable}


def config_to_checkpoint(config) -> dict | None:
    c = (config or {}).get("configurable") if isinstance(config, dict) else None
    return _pick(c) if c and c.get("thread_id") else None


def _without_internal(config):
    if not isinstance(config, dict) or not isinstance(config.get("configurable"), dict):
        return config
    rest = {k: v for k, v in config.items() if k != "callbacks"}
    rest["configurable"] = {k: v for k, v in config["configurable"].items() if not k.startswith("__")}
    return rest


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
        "config": _without_internal(payload.get("config")),
        "parent_config": _without_internal(payload.get("parent_config")),
    }


def server_chunk(mode: str, data):
    if not isinstance(data, dict):
        return data
    if mode == "checkpoints":
        return debug_checkpoint(data)
    if mode == "tasks":
        return debug_task(data)
    if mode == "debug" and isinstance(data.get("payload"), dict):
        if data.get("type") == "checkpoint":
            return {**data, "payload": debug_checkpoint(data["payload"])}
        if data.get("type") == "task_result":
            return {**data, "payload": debug_task(data["payload"])}
    return data
