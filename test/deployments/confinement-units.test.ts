import assert from "node:assert/strict";
import { describe, test } from "node:test";
import {
  DEPLOYMENTS_INSIDE,
  dependencyLinkTarget,
  insidePath,
  limitsFor,
} from "../../src/deployments/confinement/confinement.ts";
import { bindRecord, envArgs, serviceBwrapArgs } from "../../src/confinement/service.ts";
import net from "node:net";
import { DataPlaneGateway, gatewayAllows } from "../../src/deployments/runtime/data-plane-gateway.ts";
import { DeploymentsLayout } from "../../src/deployments/layout.ts";

const MIB = 1024 * 1024;

describe("confinement decisions", () => {
  test("cgroup limits from resource_spec", () => {
    const cases: Array<[Record<string, unknown> | null, { mem: number; cpu: number }]> = [
      [null, { mem: 1024, cpu: 2000 }],
      [
        { memory_mb: 512, cpu: 0.5 },
        { mem: 1024, cpu: 1000 },
      ],
      [
        { memory_mb: 512, memory_limit_mb: 600, cpu: 1, cpu_limit: 1.5 },
        { mem: 600, cpu: 1500 },
      ],
      [
        { memory_limit_mb: 10, cpu_limit: 0.01 },
        { mem: 256, cpu: 100 },
      ],
      [
        { memory_mb: "lots", cpu: -1 },
        { mem: 1024, cpu: 2000 },
      ],
    ];
    for (const [spec, want] of cases) {
      const l = limitsFor(spec);
      assert.deepEqual({ mem: l.memBytes / MIB, cpu: l.cpuMillicores }, want, JSON.stringify(spec));
    }
  });

  test("host paths under the deployments root appear under /deployment, Wharf's runtime under /opt/wharf; nothing else moves", () => {
    const layout = new DeploymentsLayout("/srv/wharf-home");
    const cases: Array<[string, string]> = [
      ["/srv/wharf-home/deployments", DEPLOYMENTS_INSIDE],
      ["/srv/wharf-home/deployments/builds/r1/langgraph.json", "/deployment/builds/r1/langgraph.json"],
      ["/srv/wharf-home/deployments-other/x", "/srv/wharf-home/deployments-other/x"],
      ["/srv/wharf-home/master.key", "/srv/wharf-home/master.key"],
      ["/usr/bin/node", "/usr/bin/node"],
      [
        "/srv/wharf/src/deployments/runtime/revision-server.ts",
        "/opt/wharf/src/deployments/runtime/revision-server.ts",
      ],
      ["file:///srv/wharf/node_modules/tsx/dist/loader.mjs", "file:///opt/wharf/node_modules/tsx/dist/loader.mjs"],
      ["/srv/wharf-other/x", "/srv/wharf-other/x"],
    ];
    for (const [host, inside] of cases) assert.equal(insidePath(layout, host, "/srv/wharf"), inside, host);
    // A home inside the checkout (development): the more specific folder wins.
    const nested = new DeploymentsLayout("/srv/wharf/.home");
    assert.equal(insidePath(nested, "/srv/wharf/.home/deployments/builds/r1", "/srv/wharf"), "/deployment/builds/r1");
    assert.equal(insidePath(nested, "/srv/wharf/.home/master.key", "/srv/wharf"), "/opt/wharf/.home/master.key");
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
    const gateway = new DataPlaneGateway(
      { deploymentId: "d", revisionId: "r", workspaceId: "w", userId: "u", key: "k" },
      { baseUrl: () => "http://127.0.0.1:9", box: null as never },
    );
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

  test("a project's node_modules link is bound only when it names one of its workspace's dependency sets", () => {
    const layout = new DeploymentsLayout("/h");
    const key = "0123456789abcdef0123456789abcdef";
    const projectDir = "/h/deployments/builds/r1/agent";
    const cases: Array<[string, string | null | "refused"]> = [
      [`../../../deps/w1/${key}/node_modules`, `/h/deployments/deps/w1/${key}`],
      [`/h/deployments/deps/w1/${key}/node_modules`, `/h/deployments/deps/w1/${key}`],
      ["./vendor/node_modules", null],
      ["../node_modules", null],
      // Into a link planted inside a dependency set (`escape -> /`): the finding's attack.
      [`../../../deps/w1/${key}/node_modules/escape/x`, "refused"],
      [`../../../deps/w1/${key}/node_modules/escape`, "refused"],
      [`../../../deps/w2/${key}/node_modules`, "refused"],
      [`../../../deps/w1/not-a-key/node_modules`, "refused"],
      [`../../../deps/w1/${key}`, "refused"],
      ["../../r2/node_modules", "refused"],
      ["/", "refused"],
      ["/etc", "refused"],
    ];
    for (const [target, want] of cases) {
      const got = dependencyLinkTarget({
        projectDir,
        artifactDir: "/h/deployments/builds/r1",
        layout,
        workspaceId: "w1",
        target,
      });
      if (want === "refused") assert.ok("problem" in got && /node_modules link/.test(got.problem), target);
      else assert.deepEqual(got, { deps: want }, target);
    }
  });

  test("bind sources below a platform folder are named relative to it, for the holder to resolve without links", () => {
    assert.deepEqual(
      bindRecord(3, { src: "/h/deployments/deps/w/k", dest: "/deployment/deps/w/k", beneath: "/h/deployments/deps" }),
      ["3", "r", "/h/deployments/deps", "w/k", "/deployment/deps/w/k"],
    );
    assert.deepEqual(bindRecord(0, { src: "/srv/wharf/src" }), ["0", "r", "/srv/wharf/src", "", "/srv/wharf/src"]);
    assert.deepEqual(bindRecord(5, { src: "/srv/wharf/package.json", dest: "/opt/wharf/package.json", copy: true }), [
      "5",
      "c",
      "/srv/wharf/package.json",
      "",
      "/opt/wharf/package.json",
    ]);
    assert.deepEqual(
      bindRecord(4, { src: "/h/deployments/state/d", dest: "/state", rw: true, beneath: "/h/deployments/state" }),
      ["4", "b", "/h/deployments/state", "d", "/state"],
    );
    assert.deepEqual(bindRecord(1, { src: "/tmp/x", dest: "/tmp/y", rw: true, overlay: "overlay-0" }), [
      "1",
      "o",
      "/tmp/x",
      "",
      "/tmp/y",
    ]);
    assert.throws(() => bindRecord(2, { src: "/h/other", beneath: "/h/deployments" }), /not below its folder/);
    assert.throws(() => bindRecord(2, { src: "/h/deployments", beneath: "/h/deployments" }), /not below its folder/);
  });

  test("the environment reaches bubblewrap through a descriptor, never its command line", () => {
    const env = { SECRET: "v4lue with spaces", EMPTY: "" };
    const args = serviceBwrapArgs({ binds: [], env, cwd: "/", argv: ["/bin/true"] }, "/nonexistent");
    assert.ok(!args.some((a) => a.includes("v4lue")), args.join(" "));
    assert.deepEqual(args.slice(args.indexOf("--clearenv"), args.indexOf("--clearenv") + 3), [
      "--clearenv",
      "--args",
      "7",
    ]);
    assert.equal(envArgs(env).toString(), "--setenv\0SECRET\0v4lue with spaces\0--setenv\0EMPTY\0\0");
    assert.throws(() => envArgs({ "A=B": "x" }), /cannot be passed/);
    assert.throws(() => envArgs({ A: "x\0y" }), /cannot be passed/);
  });
});
