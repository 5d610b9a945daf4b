export { createConsoleFeature } from "./feature.ts";
export { CSRF_HEADER, cookieRequestRefusal, csrfTokenFor } from "./csrf.ts";
export { SESSION_COOKIE, closeSession, openSession, resolveSession, sessionCookieOf, withoutSessionCookie } from "./sessions.ts";
export { CONSOLE_CSP, CONSOLE_DIST } from "./static-files.ts";
