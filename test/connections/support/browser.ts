/**
 * A minimal browser for driving authorization servers over real HTTP: follows redirects one hop at
 * a time (fetch with redirect: "manual"), keeps cookies per host, and submits the development
 * login and consent forms of oidc-provider as a person would.
 */
export interface BrowserResult {
  status: number;
  url: string;
  body: string;
  headers: Headers;
  /** Every URL visited, in order. */
  trail: string[];
}

export class Browser {
  private readonly jar = new Map<string, Map<string, string>>();

  constructor(private readonly login = "alice") {}

  private cookieHeader(url: URL): string {
    return [...(this.jar.get(url.host) ?? new Map()).entries()].map(([k, v]) => `${k}=${v}`).join("; ");
  }

  private remember(url: URL, headers: Headers): void {
    const jar = this.jar.get(url.host) ?? new Map<string, string>();
    for (const line of headers.getSetCookie()) {
      const [pair, ...attrs] = line.split(";");
      const eq = pair.indexOf("=");
      const name = pair.slice(0, eq).trim();
      const value = pair.slice(eq + 1).trim();
      const expired = attrs.some(
        (a) => /^\s*max-age=0/i.test(a) || (/^\s*expires=/i.test(a) && Date.parse(a.split("=")[1]) < Date.now()),
      );
      if (!value || expired) jar.delete(name);
      else jar.set(name, value);
    }
    this.jar.set(url.host, jar);
  }

  async open(start: string, maxHops = 20): Promise<BrowserResult> {
    let url = new URL(start);
    let method = "GET";
    let body: string | undefined;
    const trail: string[] = [];
    for (let hop = 0; hop < maxHops; hop++) {
      trail.push(url.href);
      const headers: Record<string, string> = {
        accept: "text/html,application/xhtml+xml",
        cookie: this.cookieHeader(url),
      };
      if (body !== undefined) headers["content-type"] = "application/x-www-form-urlencoded";
      const res = await fetch(url, { method, headers, body, redirect: "manual" });
      this.remember(url, res.headers);
      const location = res.headers.get("location");
      if (res.status >= 300 && res.status < 400 && location) {
        await res.arrayBuffer();
        url = new URL(location, url);
        method = "GET";
        body = undefined;
        continue;
      }
      const text = await res.text();
      const form = /<form[^>]*action="([^"]+)"[^>]*>([\s\S]*?)<\/form>/i.exec(text);
      const prompt = form && /name="prompt"\s+value="(\w+)"/i.exec(form[2]);
      if (res.status === 200 && form && prompt) {
        const fields = new URLSearchParams({ prompt: prompt[1] });
        if (prompt[1] === "login") {
          fields.set("login", this.login);
          fields.set("password", "any");
        }
        url = new URL(form[1].replace(/&amp;/g, "&"), url);
        method = "POST";
        body = fields.toString();
        continue;
      }
      return { status: res.status, url: url.href, body: text, headers: res.headers, trail };
    }
    throw new Error(`too many redirects from ${start}`);
  }
}
