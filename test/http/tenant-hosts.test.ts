import assert from "node:assert/strict";
import { test } from "node:test";
import { DATAPLANE_PREFIX } from "../../src/sandboxes/dataplane/dataplane.ts";
import { DOWNLOAD_LINK_PREFIX } from "../../src/sandboxes/dataplane/downloads.ts";
import { SERVICE_PREFIX } from "../../src/sandboxes/links/service-urls.ts";
import { SESSION_COOKIE, SESSION_COOKIE_PATHS } from "../../src/console/index.ts";
import { consoleOriginDownload } from "../../src/sandboxes/dataplane/downloads.ts";
import {
  allowedSetCookies,
  parseTenantHost,
  PLATFORM_COOKIES,
  routedTarget,
  TENANT_PATHS,
  tenantHostsForApiClients,
  tenantOrigin,
  withAllowedSetCookies,
  withoutPlatformCookies,
} from "../../src/http/tenant-hosts.ts";

const ID = "01a21742-e6fb-723c-b395-d245c535444a";

test("tenant hosts: which Host names a tenant", () => {
  const table: Array<[string | undefined, string, ReturnType<typeof parseTenantHost>]> = [
    [`svc-8080-${ID}.localhost:8123`, "localhost", { kind: "service", port: 8080, sandboxId: ID }],
    [`SVC-8080-${ID.toUpperCase()}.LOCALHOST`, "localhost", { kind: "service", port: 8080, sandboxId: ID }],
    [`dl-${ID}.tenant.example.net`, "tenant.example.net", { kind: "download", sandboxId: ID }],
    [`dep-${ID}.tenant.example.net.`, "tenant.example.net", { kind: "deployment", deploymentId: ID }],
    [`svc-0-${ID}.localhost`, "localhost", "unknown"],
    [`svc-70000-${ID}.localhost`, "localhost", "unknown"],
    [`x.dep-${ID}.localhost`, "localhost", "unknown"],
    ["anything.localhost", "localhost", "unknown"],
    ["localhost:8123", "localhost", null],
    ["127.0.0.1:8123", "localhost", null],
    [`dep-${ID}.evil-localhost`, "localhost", null],
    [`dep-${ID}.localhost`, "tenant.example.net", null],
    [undefined, "localhost", null],
  ];
  for (const [host, domain, want] of table) assert.deepEqual(parseTenantHost(host, domain), want, String(host));
});

test("tenant hosts: requests are served by the path-style routes, nothing else on a tenant host", () => {
  const table: Array<[string, string, string]> = [
    [`svc-8080-${ID}.localhost:1`, "/a/b?c=1", `${SERVICE_PREFIX}/${ID}/8080/a/b?c=1`],
    [`dl-${ID}.localhost`, "/TOKEN", `${DOWNLOAD_LINK_PREFIX}/TOKEN`],
    [`dep-${ID}.localhost`, "/runs/wait", `${TENANT_PATHS.deployment}/${ID}/runs/wait`],
    [`dep-${ID}.localhost`, "/console/api/session", `${TENANT_PATHS.deployment}/${ID}/console/api/session`],
    ["nobody.localhost", "/console/", "/__wharf/no-such-tenant"],
    ["127.0.0.1:8123", "/console/", "/console/"],
  ];
  for (const [host, target, want] of table)
    assert.equal(routedTarget(host, target, "localhost"), want, `${host} ${target}`);
  assert.equal(
    tenantOrigin({ kind: "service", sandboxId: ID, port: 80 }, "localhost", "http://127.0.0.1:8123"),
    `http://svc-80-${ID}.localhost:8123`,
  );
  assert.equal(
    tenantOrigin({ kind: "deployment", deploymentId: ID }, "t.example", "https://wharf.example"),
    `https://dep-${ID}.t.example`,
  );
  assert.equal(tenantHostsForApiClients("localhost"), false);
  assert.equal(tenantHostsForApiClients("t.example"), true);
});

test("tenant hosts: the platform's cookies neither come from nor go to tenant code", () => {
  assert.deepEqual(PLATFORM_COOKIES, [SESSION_COOKIE, "wharf_sandbox_service"]);
  const set = [
    "wharf_session=x; Path=/",
    "__Host-wharf_session=x; Path=/; Secure",
    "WHARF_SANDBOX_SERVICE=y",
    "app=1; Path=/",
  ];
  assert.deepEqual(allowedSetCookies(set, false), ["app=1; Path=/"]);
  assert.deepEqual(allowedSetCookies(set, true), [], "nothing on the console's origin");
  const head =
    "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nSet-Cookie: wharf_session=x\r\nset-cookie: app=1\r\n\r\n";
  assert.equal(
    withAllowedSetCookies(head, false),
    "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nset-cookie: app=1\r\n\r\n",
  );
  assert.equal(withAllowedSetCookies(head, true), "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n");
  const V = "a".repeat(43);
  assert.equal(withoutPlatformCookies(`a=1; wharf_session=${V}; wharf_sandbox_service=t; b=2`), "a=1; b=2");
  assert.equal(withoutPlatformCookies(`wharf_session=${V}`), null);
  assert.equal(withoutPlatformCookies("theme=dark"), "theme=dark");
});

test("the console's session cookie covers exactly the paths the console calls with it", () => {
  assert.deepEqual(SESSION_COOKIE_PATHS, ["/v2", DATAPLANE_PREFIX, "/console/api"]);
  for (const tenant of Object.values(TENANT_PATHS))
    assert.ok(!SESSION_COOKIE_PATHS.some((p) => tenant.startsWith(p)), tenant);
});

test("download links on the console's origin: always an attachment, never an active type", () => {
  const table: Array<[string | undefined, string | undefined]> = [
    [undefined, undefined],
    ["text/html", "application/octet-stream"],
    ["TEXT/HTML; charset=utf-8", "application/octet-stream"],
    ["application/xhtml+xml", "application/octet-stream"],
    ["image/svg+xml", "application/octet-stream"],
    ["text/javascript", "application/octet-stream"],
    ["application/pdf", "application/octet-stream"],
    ["image/png", "image/png"],
    ["text/csv", "text/csv"],
  ];
  for (const [asked, served] of table) {
    assert.deepEqual(
      consoleOriginDownload({ contentType: asked, disposition: "inline" }),
      { contentType: served, disposition: "attachment" },
      String(asked),
    );
  }
});
