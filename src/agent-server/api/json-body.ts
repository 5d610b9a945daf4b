import type { HonoRequest } from "hono";

const parsed = new WeakMap<Request, Promise<unknown>>();

/**
 * Makes `c.req.json()` parse the body once per request and hand out that one object. A project's
 * `http.app` middleware may edit the body it parsed (`(await c.req.json()).config = …`) and the
 * API then runs the edited body, as on the LangGraph server; Hono alone re-parses on each call.
 */
export function shareJsonBody(req: HonoRequest): void {
  const parse = req.json.bind(req);
  req.json = (() => {
    let p = parsed.get(req.raw);
    if (!p) parsed.set(req.raw, (p = parse()));
    return p;
  }) as HonoRequest["json"];
}

/** The body a project's middleware already parsed (and maybe edited), if it did. */
export function sharedJsonBody(req: HonoRequest): Promise<unknown> | undefined {
  return parsed.get(req.raw);
}
