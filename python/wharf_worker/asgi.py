"""ASGI helpers shared by the parts of the worker that hand a request to Starlette code."""


def receiver(body: bytes, disconnected=None):
    """An ASGI ``receive`` for a request whose whole body is already here: the body once, then a
    disconnect. With ``disconnected`` (an ``asyncio.Event``), the disconnect waits for it: a streamed
    response (Starlette listens for the disconnect while it streams) runs until the client goes."""
    sent = False

    async def receive():
        nonlocal sent
        if sent:
            if disconnected is not None:
                await disconnected.wait()
            return {"type": "http.disconnect"}
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return receive
