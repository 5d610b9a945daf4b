// Derives JSON schemas from graphs' TypeScript types with the LangGraph server's own static parser
// (`@langchain/langgraph-api/schema`), in a process of its own: the TypeScript program it builds
// takes seconds of CPU and hundreds of MB, which the serving process should not carry. Plain
// JavaScript so it starts without a TypeScript loader.
//
// stdin: a JSON object {graphId: {sourceFile, exportSymbol}}; stdout: {graphId: {name: GraphSchema}}
// (a graph whose types cannot be read is left out; the reason goes to stderr).
import { getStaticGraphSchema } from "@langchain/langgraph-api/schema";

// The parser prints the type checker's diagnostics with console.log: stdout carries only the answer.
console.log = (...args) => console.error(...args);

const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
const specs = JSON.parse(Buffer.concat(chunks).toString("utf8"));

async function extract(entries) {
  try {
    return await getStaticGraphSchema(Object.fromEntries(entries), { mainThread: true });
  } catch (err) {
    if (entries.length === 1) {
      console.error(`schema extraction failed for graph "${entries[0][0]}": ${err?.stack ?? err}`);
      return {};
    }
    // One graph's types broke the shared program: the others still get theirs, one by one.
    const out = {};
    for (const entry of entries) Object.assign(out, await extract([entry]));
    return out;
  }
}

const result = await extract(Object.entries(specs));
process.stdout.write(JSON.stringify(result));
