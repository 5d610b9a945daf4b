import assert from "node:assert/strict";
import { test } from "node:test";
import { cookieRequestRefusal, csrfTokenFor, sessionCookieOf } from "../../src/console/index.ts";
import { DIALECTS } from "../support/dialects.ts";
import { startTestPlatform } from "../support/platform.ts";

const V = "a".repeat(43);
const T = csrfTokenFor(V);
const h = (o: Record<string, string>) => new Headers({ host: "wharf.test:8123", ...o });

test("cookie request rules (CSRF, Origin, WebSocket)", () => {
  const table: Array<[string, string | undefined, Record<string, string>, boolean]> = [
    ["GET without token", "GET", {}, true],
    ["GET same origin", "GET", { origin: "http://wharf.test:8123" }, true],
    ["GET cross origin", "GET", { origin: "https://evil.test" }, false],
    ["POST without token", "POST", {}, false],
    ["POST wrong token", "POST", { "x-wharf-csrf": "nope" }, false],
    ["POST with token", "POST", { "x-wharf-csrf": T }, true],
    ["POST token, cross origin", "POST", { "x-wharf-csrf": T, origin: "http://evil.test" }, false],
    ["POST token, null origin", "POST", { "x-wharf-csrf": T, origin: "null" }, false],
    ["unknown method needs token", undefined, {}, false],
    ["unknown method with token", undefined, { "x-wharf-csrf": T }, true],
    ["WebSocket same origin", "GET", { upgrade: "websocket", origin: "http://wharf.test:8123" }, true],
    ["WebSocket without Origin", undefined, { upgrade: "websocket" }, false],
    ["WebSocket cross origin", undefined, { upgrade: "websocket", origin: "http://evil.test" }, false],
    [
      "behind a proxy",
      "POST",
      { "x-wharf-csrf": T, origin: "https://console.example", "x-forwarded-host": "console.example" },
      true,
    ],
  ];
  for (const [name, method, headers, ok] of table) {
    assert.equal(cookieRequestRefusal({ method, headers: h(headers), sessionValue: V }) === null, ok, name);
  }
});

test("the session cookie is read strictly", () => {
  assert.equal(sessionCookieOf(`a=1; wharf_session=${V}; b=2`), V);
  assert.equal(sessionCookieOf("wharf_session=short"), null);
  assert.equal(sessionCookieOf(null), null);
});

for (const dialect of DIALECTS) {
  test(`sign in with a key or a token, CSRF on writes, sign out ends the session (${dialect})`, async (t) => {
    const p = await startTestPlatform(t, { dialect });
    if (!p) return;
    const signIn = (body: unknown, headers: Record<string, string> = {}) =>
      fetch(`${p.url}/console/api/session`, {
        method: "POST",
        headers: { "content-type": "application/json", ...headers },
        body: JSON.stringify(body),
      });

    assert.equal((await signIn({ api_key: "wharf_bogus" })).status, 401);
    assert.equal((await signIn({})).status, 422);
    assert.equal((await signIn({ api_key: p.apiKey }, { origin: "http://evil.test" })).status, 403);
    const form = await fetch(`${p.url}/console/api/session`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: `api_key=${p.apiKey}`,
    });
    assert.equal(form.status, 415);

    const res = await signIn({ api_key: p.apiKey });
    assert.equal(res.status, 201);
    // One cookie per path the console calls, none for the rest of the origin (stable URLs, links, services).
    const setCookies = res.headers.getSetCookie();
    assert.deepEqual(
      setCookies.map((c) => c.replace(/=[\w-]{43};/, "=V;").replace(/Max-Age=\d+/, "Max-Age=N")),
      [
        ...["/v2", "/sandboxes/dp", "/console/api"].map(
          (path) => `wharf_session=V; Path=${path}; HttpOnly; SameSite=Strict; Max-Age=N`,
        ),
        "wharf_session=; Path=/; HttpOnly; SameSite=Strict; Max-Age=N",
      ],
    );
    assert.match(setCookies[3], /Max-Age=0$/, "the Path=/ cookie of earlier versions is cleared");
    const setCookie = setCookies[0];
    const session = (await res.json()) as { csrf_token: string; workspace_id: string };
    assert.ok(
      !JSON.stringify(session).includes(setCookie.split(";")[0].split("=")[1]),
      "the cookie value is not in the body",
    );
    const cookie = setCookie.split(";")[0];

    const me = await fetch(`${p.url}/v2/me`, { headers: { cookie } });
    assert.equal(me.status, 200);
    assert.equal(((await me.json()) as { scheme: string }).scheme, "session");
    const put = (headers: Record<string, string>) =>
      fetch(`${p.url}/v2/secrets`, {
        method: "PUT",
        headers: { cookie, "content-type": "application/json", ...headers },
        body: JSON.stringify([{ key: "A", value: "b" }]),
      });
    assert.equal((await put({})).status, 403, "a write without the CSRF header is refused");
    assert.equal((await put({ "x-wharf-csrf": session.csrf_token, origin: "http://evil.test" })).status, 403);
    assert.equal((await put({ "x-wharf-csrf": session.csrf_token })).status, 200);
    assert.equal((await fetch(`${p.url}/console/api/session`, { headers: { cookie } })).status, 200);

    // A bearer token works too, and the session ends no later than the token.
    const tok = (await (await p.api("/v2/tokens", { method: "POST", json: { expires_in_seconds: 120 } })).json()) as {
      access_token: string;
    };
    const viaToken = await signIn({ token: tok.access_token });
    assert.equal(viaToken.status, 201);
    assert.match(viaToken.headers.getSetCookie()[0], /Max-Age=1[01]\d$/);

    assert.equal(
      (await fetch(`${p.url}/console/api/session`, { method: "DELETE", headers: { cookie } })).status,
      403,
      "sign-out needs the CSRF header",
    );
    const out = await fetch(`${p.url}/console/api/session`, {
      method: "DELETE",
      headers: { cookie, "x-wharf-csrf": session.csrf_token },
    });
    assert.equal(out.status, 204);
    assert.match(out.headers.get("set-cookie")!, /Max-Age=0/);
    assert.equal((await fetch(`${p.url}/v2/me`, { headers: { cookie } })).status, 401);
    assert.equal(
      (await fetch(`${p.url}/console/api/session`, { headers: { cookie } })).status,
      204,
      "signed out is an answer (no failed request logged in the browser)",
    );
    assert.ok(
      !p.logs().includes(cookie.split("=")[1]) && !p.logs().includes(p.apiKey),
      "neither the session nor the key is logged",
    );
  });
}

test("revoking the key a session was opened with ends the session", async (t) => {
  const p = await startTestPlatform(t);
  if (!p) return;
  const created = (await (await p.api("/v2/api-keys", { method: "POST", json: { name: "console" } })).json()) as {
    id: string;
    key: string;
  };
  const res = await fetch(`${p.url}/console/api/session`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ api_key: created.key }),
  });
  const cookie = res.headers.get("set-cookie")!.split(";")[0];
  assert.equal((await fetch(`${p.url}/v2/me`, { headers: { cookie } })).status, 200);
  const listed = (await (await p.api("/v2/api-keys")).json()) as Array<{ id: string; last_used_at: string | null }>;
  assert.ok(listed.find((k) => k.id === created.id)?.last_used_at, "a session's requests count as uses of its key");
  assert.equal((await p.api(`/v2/api-keys/${created.id}`, { method: "DELETE" })).status, 200);
  assert.equal((await fetch(`${p.url}/v2/me`, { headers: { cookie } })).status, 401);
});

test("a browser's / goes to /console/; the page carries a CSP without inline scripts", async (t) => {
  const p = await startTestPlatform(t);
  if (!p) return;
  const root = await fetch(`${p.url}/`, { headers: { accept: "text/html" }, redirect: "manual" });
  assert.equal(root.status, 302);
  assert.equal(root.headers.get("location"), "/console/");
  assert.equal((await fetch(`${p.url}/`, { redirect: "manual" })).status, 404, "API clients still get JSON");
  const page = await fetch(`${p.url}/console/`);
  assert.ok(page.status === 200 || page.status === 503);
  if (page.status === 200) {
    const csp = page.headers.get("content-security-policy")!;
    assert.match(csp, /script-src 'self'(;|$)/);
    assert.doesNotMatch(csp, /script-src[^;]*unsafe-inline/);
  }
  assert.equal((await fetch(`${p.url}/console/assets/..%2f..%2fpackage.json`)).status, 404);
});
