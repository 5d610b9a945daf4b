"""The official Python client's thread stream (the event-based protocol) on a Python graph: a run
that calls a tool and stops on an interrupt, answered through the stream. Prints "ok"."""

import asyncio
import os
import sys

from langgraph_sdk import get_client


def check(cond, what):
    if not cond:
        raise AssertionError(what)


async def main(url: str) -> None:
    client = get_client(url=url, api_key=os.environ["WHARF_TEST_API_KEY"])
    async with client.threads.stream(assistant_id="chat") as thread:
        started = await thread.run.start(input={"messages": [{"role": "human", "content": "from python"}]})
        check(isinstance(started.get("run_id"), str), f"run.start result {started}")
        for _ in range(200):
            if thread.interrupted:
                break
            await asyncio.sleep(0.05)
        check(thread.interrupted, "the run stopped on its interrupt")
        check(len(thread.interrupts) == 1, f"one interrupt: {thread.interrupts}")
        await thread.run.respond("go")
        values = await thread.output.with_timeout(20)
        check(values.get("answer") == "go", f"resumed values {values}")
        # Streamed through langgraph's v3 messages, a model's content is a list of content blocks.
        def text(m):
            c = m.get("content")
            return c if isinstance(c, str) else "".join(b.get("text", "") for b in c if isinstance(b, dict))

        texts = [text(m) for m in values["messages"]]
        check("I found notes on from python" in texts, f"messages {texts}")
    # The checkpoints and tasks channels through the client's own projections.
    async with client.threads.stream(assistant_id="chat") as thread:
        seen = []

        async def collect():
            async for name, item in thread.interleave_projections(["checkpoints", "tasks"]):
                seen.append((name, item))

        collector = asyncio.create_task(collect())
        await asyncio.sleep(0.2)
        await thread.run.start(input={"messages": [{"role": "human", "content": "projections"}]})
        for _ in range(200):
            if thread.interrupted and any(n == "tasks" and i.get("name") == "ask" and "result" in i for n, i in seen):
                break
            await asyncio.sleep(0.05)
        collector.cancel()
        steps = [i["step"] for n, i in seen if n == "checkpoints"]
        check(steps == [0, 1, 2, 3], f"checkpoint steps {steps}")
        names = [i["name"] for n, i in seen if n == "tasks" and "result" not in i]
        check(names == ["agent", "tools", "agent", "ask"], f"task starts {names}")
    print("ok")


asyncio.run(main(sys.argv[1]))
