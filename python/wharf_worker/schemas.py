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
    builder = getattr(graph, "builder", None)
    schema = getattr(builder, "state_schema", None)
    if schema is None:
        return None
    from pydantic import TypeAdapter

    return TypeAdapter(schema).json_schema()


def graph_schemas(graph) -> dict:
    return {
        "input_schema": _try(graph.get_input_jsonschema),
        "output_schema": _try(graph.get_output_jsonschema),
        "state_schema": _try(lambda: _state_schema(graph)),
        "config_schema": _try(graph.get_config_jsonschema),
        "context_schema": _try(graph.get_context_jsonschema),
    }
