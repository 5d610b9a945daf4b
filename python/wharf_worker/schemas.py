"""JSON schemas of a graph, as ``/assistants/{id}/schemas`` returns them."""

import logging

log = logging.getLogger("wharf_worker")


def _try(fn):
    try:
        return fn()
    except Exception as err:  # noqa: BLE001 - a schema that cannot be drawn is left out, not an error
        log.debug("schema unavailable: %s", err)
        return None


def _state_schema(graph):
    """Every state channel, each optional (a state may hold any subset), titled ``<graph name>State``."""
    from langgraph.channels.base import BaseChannel
    from pydantic import create_model

    channels = getattr(getattr(graph, "builder", None), "channels", None)
    if channels is None:
        return None
    fields = {k: (c.UpdateType, None) for k, c in channels.items() if isinstance(c, BaseChannel)}
    return create_model(graph.get_name("State"), **fields).model_json_schema()


def _config_schema(graph, context):
    """The context schema when the graph has one (what assistants are configured with), else the
    schema of ``configurable`` (empty when the graph declares none)."""
    if context:
        return context
    schema = graph.get_config_jsonschema() or {}
    ref = (schema.get("properties") or {}).get("configurable", {}).get("$ref", "")
    return (schema.get("$defs") or {}).get(ref.rsplit("/", 1)[-1], {}) if ref else {}


def graph_schemas(graph) -> dict:
    context = _try(graph.get_context_jsonschema)
    return {
        "input_schema": _try(graph.get_input_jsonschema),
        "output_schema": _try(graph.get_output_jsonschema),
        "state_schema": _try(lambda: _state_schema(graph)),
        "config_schema": _try(lambda: _config_schema(graph, context)),
        "context_schema": context,
    }
