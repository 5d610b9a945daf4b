/** The console's only way to the server: the public API, with the session cookie and CSRF header. */

import type { ValidationItem } from "./decisions.ts";

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly detail: unknown,
  ) {
    super(describe(status, detail));
  }
  /** 422 items, when the API answered with FastAPI-shaped validation errors. */
  get issues(): ValidationItem[] {
    return Array.isArray(this.detail) ? (this.detail as ValidationItem[]) : [];
  }
}

function describe(status: number, detail: unknown): string {
  if (typeof detail === "string") return detail;
  if (Array.isArray(detail)) return detail.map((d: ValidationItem) => `${d.loc.join(".")}: ${d.msg}`).join("; ");
  if (detail && typeof detail === "object" && "message" in detail)
    return String((detail as { message: unknown }).message);
  return `HTTP ${status}`;
}

let csrf = "";
let tenant: string | null = null;
let onSignedOut: () => void = () => {};

export function configureApi(opts: { csrf: string; tenant?: string | null; onSignedOut?: () => void }): void {
  csrf = opts.csrf;
  if (opts.tenant !== undefined) tenant = opts.tenant;
  if (opts.onSignedOut) onSignedOut = opts.onSignedOut;
}
export const setTenant = (id: string | null) => void (tenant = id);
export const currentTenant = () => tenant;

/** Headers every call carries: the CSRF token and the selected workspace. */
export function sessionHeaders(): Record<string, string> {
  const h: Record<string, string> = { "x-wharf-csrf": csrf };
  if (tenant) h["x-tenant-id"] = tenant;
  return h;
}

export interface CallInit {
  method?: string;
  json?: unknown;
  body?: BodyInit;
  headers?: Record<string, string>;
  signal?: AbortSignal;
}

export async function call(path: string, init: CallInit = {}): Promise<Response> {
  const headers: Record<string, string> = { ...sessionHeaders(), ...init.headers };
  let body = init.body;
  if (init.json !== undefined) {
    headers["content-type"] = "application/json";
    body = JSON.stringify(init.json);
  }
  const res = await fetch(path, {
    method: init.method ?? "GET",
    headers,
    body,
    signal: init.signal,
    credentials: "same-origin",
  });
  if (!res.ok) {
    let detail: unknown = res.statusText;
    try {
      detail = ((await res.json()) as { detail?: unknown }).detail ?? detail;
    } catch {
      // not JSON: keep the status text
    }
    if (res.status === 401) onSignedOut();
    throw new ApiError(res.status, detail);
  }
  return res;
}

export async function api<T>(path: string, init: CallInit = {}): Promise<T> {
  const res = await call(path, init);
  if (res.status === 204) return undefined as T;
  const text = await res.text();
  return (text ? JSON.parse(text) : undefined) as T;
}

/** A same-origin path for an absolute URL the API returned (data planes, deployment URLs). */
export const localPath = (url: string) => {
  const u = new URL(url, location.href);
  return u.pathname + u.search;
};

/** PUT/POST with upload progress (fetch cannot report it). */
export function upload(
  url: string,
  method: string,
  body: Blob | FormData,
  onProgress: (fraction: number) => void,
  headers: Record<string, string> = {},
): Promise<string> {
  return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest();
    xhr.open(method, url);
    for (const [k, v] of Object.entries({ ...sessionHeaders(), ...headers })) xhr.setRequestHeader(k, v);
    xhr.upload.onprogress = (e) => e.lengthComputable && onProgress(e.loaded / e.total);
    xhr.onload = () => {
      if (xhr.status >= 200 && xhr.status < 300) resolve(xhr.responseText);
      else {
        let detail: unknown = xhr.statusText;
        try {
          detail = (JSON.parse(xhr.responseText) as { detail?: unknown }).detail ?? detail;
        } catch {
          // not JSON
        }
        reject(new ApiError(xhr.status, detail));
      }
    };
    xhr.onerror = () => reject(new ApiError(0, "network error"));
    xhr.send(body);
  });
}
