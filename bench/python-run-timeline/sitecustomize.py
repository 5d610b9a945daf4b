"""Stage timestamps of the Python worker for bench/python-run-timeline.ts (imported at the worker's
start through PYTHONPATH, active only with WHARF_TRACE set): CLOCK_MONOTONIC nanoseconds, the clock
Node's process.hrtime reads, so both processes' stages fall on one time line."""

import os
import time

if os.environ.get("WHARF_TRACE"):
    import builtins
    import types

    import wharf_worker.frames as frames
    import wharf_worker.server as server

    TRACE = []
    # The traced graph's node appends its own stage here.
    builtins.__wharf_trace__ = TRACE
    now = time.monotonic_ns

    def wrap(cls, name, label):
        inner = getattr(cls, name)

        def traced(self, *args, **kwargs):
            TRACE.append((label(*args), now()))
            return inner(self, *args, **kwargs)

        setattr(cls, name, traced)

    wrap(frames.FrameProtocol, "data_received", lambda data: "py: frame read")
    wrap(frames.FrameWriter, "send", lambda h, b=b"": f"py: {h.get('kind')} {h.get('event', '')}".rstrip())
    if hasattr(frames.FrameWriter, "send_soon"):
        wrap(frames.FrameWriter, "send_soon", lambda h, b=b"": f"py: {h.get('kind')} {h.get('event', '')}".rstrip())

    handle = server.Worker.handle

    async def traced_handle(self, header, body):
        TRACE.append(("py: request's task starts", now()))
        return await handle(self, header, body)

    server.Worker.handle = traced_handle

    # Each write to the server (what wakes it): os.write on the replies' descriptor.
    real_write = os.write

    def write(fd, data):
        if fd == 4:
            TRACE.append(("py: os.write", now()))
        return real_write(fd, data)

    frames.os = types.SimpleNamespace(**{k: getattr(os, k) for k in dir(os) if not k.startswith("__")})
    frames.os.write = write

    async def op_trace_dump(self, rid, req):
        out = list(TRACE)
        TRACE.clear()
        return out

    server.Worker.op_trace_dump = op_trace_dump
