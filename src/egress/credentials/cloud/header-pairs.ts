/**
 * Request headers as ordered name/value pairs, the way they came off the wire. Signing needs the
 * exact values and repeats (SigV4 joins repeated headers with ","), which a Node header object
 * would already have merged with ", ".
 */
export type HeaderPairs = Array<[name: string, value: string]>;

/** Node's `req.rawHeaders` (flat name, value, name, value …) as pairs. */
export function pairsFromRawHeaders(raw: string[]): HeaderPairs {
  const out: HeaderPairs = [];
  for (let i = 0; i + 1 < raw.length; i += 2) out.push([raw[i], raw[i + 1]]);
  return out;
}

/** All values of one header (case-insensitive name), in wire order. */
export function headerValues(headers: HeaderPairs, name: string): string[] {
  const lower = name.toLowerCase();
  const out: string[] = [];
  for (const [n, v] of headers) if (n.toLowerCase() === lower) out.push(v);
  return out;
}

/** The single value of a header, or undefined when absent; repeats are joined with ",". */
export function headerValue(headers: HeaderPairs, name: string): string | undefined {
  const values = headerValues(headers, name);
  return values.length === 0 ? undefined : values.join(",");
}

export function withoutHeaders(headers: HeaderPairs, names: Iterable<string>): HeaderPairs {
  const drop = new Set([...names].map((n) => n.toLowerCase()));
  return headers.filter(([n]) => !drop.has(n.toLowerCase()));
}

/** Replaces every copy of `name` by one header with `value`, kept at the first copy's position. */
export function replaceHeader(headers: HeaderPairs, name: string, value: string): HeaderPairs {
  const lower = name.toLowerCase();
  const out: HeaderPairs = [];
  let placed = false;
  for (const pair of headers) {
    if (pair[0].toLowerCase() !== lower) out.push(pair);
    else if (!placed) {
      out.push([pair[0], value]);
      placed = true;
    }
  }
  if (!placed) out.push([name, value]);
  return out;
}
