/** `{KEY}`: a workspace secret reference inside a header value (text may surround it). */
export const SECRET_REF_SYNTAX = "\\{([A-Za-z_][A-Za-z0-9_.-]{0,127})\\}";

/** Keys referenced by a workspace_secret header value, in order. */
export function secretRefs(value: string): string[] {
  return [...value.matchAll(new RegExp(SECRET_REF_SYNTAX, "g"))].map((m) => m[1]);
}

/** Visible ASCII, Latin-1 and tabs/spaces inside; RFC 9110 field-value (no CR, LF, NUL or other controls). */
const FIELD_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;

/** Why a header value cannot be injected, or null when it can. */
export function headerValueProblem(type: string, value: string): string | null {
  if (!FIELD_VALUE.test(value)) return "header values must not contain CR, LF, NUL or other control characters";
  if (value !== value.trim()) return "header values must not start or end with whitespace";
  if (type === "workspace_secret") {
    const refs = secretRefs(value);
    if (refs.length === 0)
      return 'a workspace_secret value must reference a secret as {KEY} (for example "Bearer {OPENAI_API_KEY}")';
    const rest = value.replace(new RegExp(SECRET_REF_SYNTAX, "g"), "");
    if (/[{}]/.test(rest))
      return "malformed {KEY} reference: keys are letters, digits, _ . - and do not start with a digit";
  }
  if (type !== "workspace_secret" && value.length === 0) return "header value must not be empty";
  return null;
}
