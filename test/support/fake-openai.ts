import http from "node:http";
import type { AddressInfo } from "node:net";
import type { TestContext } from "node:test";

interface ChatMessage {
  role: string;
  content?: unknown;
  tool_calls?: unknown[];
}

/** A deterministic 1536-dimension vector per text (letter counts): similar texts are near. */
function embed(text: string): number[] {
  const v = new Array<number>(1536).fill(0);
  for (const ch of text.toLowerCase()) v[ch.charCodeAt(0) % 1536] += 1;
  const norm = Math.hypot(...v) || 1;
  return v.map((x) => x / norm);
}

/** What the fake model answers to one chat completion request: text, or tool calls. */
export type FakeReply = { content: string } | { toolCalls: Array<{ name: string; args: Record<string, unknown> }> };

/**
 * An OpenAI-compatible chat completions (and embeddings) endpoint on loopback (`OPENAI_BASE_URL` = `url`), for the
 * official SDKs: JSON or streamed (`stream: true`, server-sent chunks) answers decided by `reply`
 * from the request's messages; `requests` keeps every request body.
 */
export async function startFakeOpenAi(
  t: TestContext,
  reply: (messages: ChatMessage[]) => FakeReply,
): Promise<{ url: string; requests: Array<Record<string, unknown>> }> {
  const requests: Array<Record<string, unknown>> = [];
  let n = 0;
  const server = http.createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    if (req.url?.endsWith("/embeddings")) {
      const { input } = JSON.parse(Buffer.concat(chunks).toString() || "{}") as { input: string | string[] };
      const texts = Array.isArray(input) ? input : [input];
      return void res.writeHead(200, { "content-type": "application/json" }).end(
        JSON.stringify({
          object: "list",
          model: "fake",
          data: texts.map((text, index) => ({ object: "embedding", index, embedding: embed(String(text)) })),
          usage: { prompt_tokens: 1, total_tokens: 1 },
        }),
      );
    }
    if (!req.url?.endsWith("/chat/completions"))
      return void res.writeHead(404, { "content-type": "application/json" }).end('{"error":{"message":"not found"}}');
    const body = JSON.parse(Buffer.concat(chunks).toString() || "{}") as {
      model?: string;
      stream?: boolean;
      messages?: ChatMessage[];
    };
    requests.push(body);
    const r = reply(body.messages ?? []);
    const id = `chatcmpl-fake-${++n}`;
    const toolCalls =
      "toolCalls" in r
        ? r.toolCalls.map((c, i) => ({
            index: i,
            id: `call_fake_${n}_${i}`,
            type: "function",
            function: { name: c.name, arguments: JSON.stringify(c.args) },
          }))
        : undefined;
    const message = {
      role: "assistant",
      content: "content" in r ? r.content : null,
      ...(toolCalls ? { tool_calls: toolCalls.map(({ index: _i, ...c }) => c) } : {}),
    };
    const finish = toolCalls ? "tool_calls" : "stop";
    const usage = { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 };
    const base = { id, created: Math.floor(Date.now() / 1000), model: body.model ?? "fake" };
    if (!body.stream)
      return void res.writeHead(200, { "content-type": "application/json" }).end(
        JSON.stringify({
          ...base,
          object: "chat.completion",
          choices: [{ index: 0, message, finish_reason: finish }],
          usage,
        }),
      );
    res.writeHead(200, { "content-type": "text/event-stream" });
    const send = (delta: Record<string, unknown>, finish_reason: string | null) =>
      res.write(
        `data: ${JSON.stringify({ ...base, object: "chat.completion.chunk", choices: [{ index: 0, delta, finish_reason }] })}\n\n`,
      );
    send({ role: "assistant", content: "" }, null);
    if ("content" in r) for (const word of r.content.split(/(?<= )/)) send({ content: word }, null);
    if (toolCalls) send({ tool_calls: toolCalls }, null);
    send({}, finish);
    res.end("data: [DONE]\n\n");
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  t.after(() => new Promise<void>((r) => (server.closeAllConnections(), server.close(() => r()))));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`, requests };
}
