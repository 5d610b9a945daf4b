/** A URL fit for messages and logs: any password replaced by `***`. Unparseable input is `fallback`. */
export function redactUrl(url: string, fallback = "(unparseable url)"): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = "***";
    return u.toString();
  } catch {
    return fallback;
  }
}
