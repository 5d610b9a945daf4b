export { createConsoleFeature } from "./feature.ts";
export { CSRF_HEADER, cookieRequestRefusal, csrfTokenFor } from "./csrf.ts";
export {
  SESSION_COOKIE,
  SESSION_COOKIE_PATHS,
  closeSession,
  openSession,
  resolveSession,
  sessionCookieOf,
} from "./sessions.ts";
export { CONSOLE_CSP, CONSOLE_DIST, mountStaticConsole } from "./static-files.ts";
