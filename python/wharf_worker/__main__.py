"""Entry point: ``python -m wharf_worker``, started by the agent server with fd 3 (requests in) and
fd 4 (replies out) inherited, and its settings as JSON in ``WHARF_WORKER_CONFIG``."""

import asyncio
import json
import os
import sys

from .server import Worker


def main() -> None:
    settings = json.loads(os.environ.pop("WHARF_WORKER_CONFIG"))
    project_dir = settings["project_dir"]
    # The project's own packages import as they do under the LangGraph server.
    for p in (project_dir, *settings.get("paths", [])):
        if p not in sys.path:
            sys.path.insert(0, p)
    os.chdir(project_dir)
    run(Worker(settings).serve(in_fd=3, out_fd=4))


def run(main):
    """uvloop when the project's environment has it (the LangGraph server runs on it): a faster
    event loop for the pipe round trips; asyncio's own otherwise."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(main)
    if not hasattr(uvloop, "run"):
        # uvloop before 0.18
        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
        return asyncio.run(main)
    return uvloop.run(main)


if __name__ == "__main__":
    main()
