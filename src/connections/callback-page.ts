const escapeHtml = (s: string) => s.replace(/[&<>"']/g, (ch) => `&#${ch.charCodeAt(0)};`);

/** Does the client want a page (a browser following the provider's redirect) rather than JSON? */
export const wantsHtml = (accept: string | undefined) => Boolean(accept && /\btext\/html\b/i.test(accept));

/** The small page the browser lands on after the provider's redirect. No script, nothing secret. */
export function callbackPage(ok: boolean, title: string, message: string): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer"><title>${escapeHtml(title)}</title>
<style>body{font:16px/1.5 system-ui,sans-serif;max-width:32rem;margin:4rem auto;padding:0 1rem;color:#1f2328}
h1{font-size:1.4rem;color:${ok ? "#1a7f37" : "#cf222e"}}</style></head>
<body><h1>${escapeHtml(title)}</h1><p>${escapeHtml(message)}</p></body></html>
`;
}
