"""Wharf's Python worker: serves a project's Python LangGraph graphs to the TypeScript agent server.

The agent server starts one worker per served project (``python -m wharf_worker``) and talks to it
over two inherited pipes (see ``frames.py``). The worker imports the graphs once, runs them with
``graph.astream`` and checkpoints with the official ``AsyncSqliteSaver``.
"""
