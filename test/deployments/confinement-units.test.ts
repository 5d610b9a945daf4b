import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { DEPLOYMENTS_INSIDE, insidePath, limitsFor } from "../../src/deployments/confinement/confinement.ts";
import net from "node:net";
import { DataPlaneGateway, gatewayAllows } from "../../src/deployments/runtime/data-plane-gateway.ts";
import { DeploymentsLayout } from "../../src/deployments/layout.ts";

const MIB = 1024 * 1024;

describe("confinement decisions", () => {
  test("cgroup limits from resource_spec", () => {
    const cases: Array<[Record<string, unknown> | null, { mem: number; cpu: number }]> = [
      [null, { mem: 1024, cpu: 2000 }],
      [{ memory_mb: 512, cpu: 0.5 }, { mem: 1024, cpu: 1000 }],
      [{ memory_mb: 512, memory_limit_mb: 600, cpu: 1, cpu_limit: 1.5 }, { mem: 600, cpu: 1500 }],
      [{ memory_limit_mb: 10, cpu_limit: 0.01 }, { mem: 256, cpu: 100 }],
      [{ memory_mb: "lots", cpu: -1 }, { mem: 1024, cpu: 2000 }],
    ];
    for (const [spec, want] of cases) {
      const l = limitsFor(spec);
      assert.deepEqual({ mem: l.memBytes / MIB, cpu: l.cpuMillicores }, want, JSON.stringify(spec));
    }
  });

  test("host paths under the deployments root appear under /deployment; nothing else moves", () => {
    const layout = new DeploymentsLayout("/srv/wharf-home");
    const cases: Array<[string, string]> = [
      ["/srv/wharf-home/deployments", DEPLOYMENTS_INSIDE],
      ["/srv/wharf-home/deployments/builds/r1/langgraph.json", "/deployment/builds/r1/langgraph.json"],
      ["/srv/wharf-home/deployments-other/x", "/srv/wharf-home/deployments-other/x"],
      ["/srv/wharf-home/master.key", "/srv/wharf-home/master.key"],
      ["/usr/bin/node", "/usr/bin/node"],
    ];
    for (const [host, inside] of cases) assert.equal(insidePath(layout, host), inside, host);
  });

  test("the data-plane gateway lets through sandboxes and connections only", () => {
    const cases: Array<[string, string, boolean]> = [
      ["POST", "/v2/sandboxes/boxes", true],
      ["GET", "/api/v2/sandboxes/boxes/x/status", true],
      ["POST", "/sandboxes/dp/123/execute", true],
      ["GET", "/sandboxes/svc/123/8080/", true],
      ["GET", "/v2/auth/agents/a/connections", true],
      ["POST", "/v2/auth/authenticate", true],
      ["GET", "/v2/deployments", false],
      ["POST", "/v2/api-keys", false],
      ["GET", "/v2/secrets", false],
      ["PUT", "/v2/secrets", false],
      ["POST", "/v2/tokens", false],
      ["GET", "/deployments/x/ok", false],
      ["GET", "/v2/sandboxes/../deployments", false],
      ["GET", "/", false],
    ];
    for (const [m, p, ok] of cases) assert.equal(gatewayAllows(m, p), ok, `${m} ${p}`);
  });

  test("a closed gateway stops listening: a stopped revision leaves no listener behind", async () => {
    const gateway = new DataPlaneGateway({ deploymentId: "d", revisionId: "r", workspaceId: "w", userId: "u", key: "k" }, { baseUrl: () => "http://127.0.0.1:9", box: null as never });
    const listener = net.createServer();
    await new Promise<void>((resolve) => listener.listen(0, "127.0.0.1", resolve));
    gateway.attach(listener);
    const open = net.connect((listener.address() as net.AddressInfo).port, "127.0.0.1");
    await new Promise((resolve) => open.once("connect", resolve));
    const closed = new Promise((resolve) => open.once("close", resolve));
    gateway.close();
    assert.equal(listener.listening, false);
    await closed;
  });
});
