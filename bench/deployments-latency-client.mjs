// The latency client of bench/deployments-rollout.ts, in its own process so that its work does not
// share the platform's event loop (a real client is elsewhere too). Told over IPC what to call
// ({target: {socketPath} | {host, port}, path, headers, body, n}), it answers each request's time.
import http from "node:http";

const agent = new http.Agent({ keepAlive: true, maxSockets: 4 });

function once(t) {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const req = http.request(
      {
        ...t.target,
        agent,
        path: t.path,
        method: "POST",
        headers: { "content-type": "application/json", "content-length": Buffer.byteLength(t.body), ...t.headers },
      },
      (res) => {
        res.resume();
        res.once("end", () =>
          res.statusCode === 200
            ? resolve(performance.now() - t0)
            : reject(new Error(`${t.path} answered ${res.statusCode}`)),
        );
      },
    );
    req.once("error", reject);
    req.end(t.body);
  });
}

process.on("message", async (t) => {
  try {
    const times = [];
    for (let i = 0; i < t.n; i++) times.push(await once(t));
    process.send({ times });
  } catch (err) {
    process.send({ error: err.message });
  }
});
