import { z } from "zod";
import { decl, int, flag, text, list } from "./declare.ts";

/** The settings of deployments. */
export const DEPLOYMENT_SETTINGS = {
  WHARF_DEPLOYMENT_ISOLATION: decl({
    part: "deployments",
    type: "enum",
    defaultText: "on where the host can (root with bubblewrap)",
    description: "`off` runs deployed code unconfined, as the platform's user",
    schema: z.enum(["on", "off"]).optional(),
  }),
  WHARF_DEPLOYMENT_DB_STATEMENT_TIMEOUT_SECONDS: decl({
    part: "deployments",
    type: "seconds",
    default: "300",
    description:
      "on PostgreSQL, longest statement of a deployment's role and longest it may sit idle inside a transaction: its `statement_timeout` and `idle_in_transaction_session_timeout`, and a platform sweep cancels longer statements and ends such sessions (the role could lift its own)",
    schema: int(1, 86_400),
  }),
  WHARF_DEPLOYMENT_DB_TEMP_FILE_LIMIT_BYTES: decl({
    part: "deployments",
    type: "bytes",
    default: String(1024 ** 3),
    description: "on PostgreSQL, temporary file space one session of a deployment's role may use (`temp_file_limit`)",
    schema: int(1024),
  }),
  WHARF_DEPLOYMENT_STATE_BYTES: decl({
    part: "deployments",
    type: "bytes",
    default: String(10 * 1024 ** 3),
    description:
      "size of a confined deployment's state folder `/state` (a sparse ext4 image; a full one is ENOSPC inside); an existing image keeps its size",
    schema: int(16 * 1024 * 1024),
  }),
  WHARF_DEPLOYMENT_WORKSPACE_MAX: decl({
    part: "deployments",
    type: "integer",
    default: "50",
    description: "deployments one workspace may have (429 beyond)",
    schema: int(1),
  }),
  WHARF_DEPLOYMENT_UPLOADS_MAX: decl({
    part: "deployments",
    type: "integer",
    default: "100",
    description: "uploaded source tarballs one workspace may keep (429 beyond)",
    schema: int(1),
  }),
  WHARF_DEPLOYMENT_UPLOADS_MAX_BYTES: decl({
    part: "deployments",
    type: "bytes",
    default: String(10 * 1024 ** 3),
    description: "bytes of uploaded source tarballs one workspace may keep in all (429 beyond)",
    schema: int(1024),
  }),
  WHARF_DEPLOYMENT_UPLOAD_TTL_SECONDS: decl({
    part: "deployments",
    type: "seconds",
    default: "86400",
    description: "an uploaded tarball no deployment or unfinished revision uses is removed once this old",
    schema: int(1),
  }),
  WHARF_DEPLOY_LOCAL_ROOTS: decl({
    part: "deployments",
    type: "path list",
    default: "",
    description:
      "comma-separated folders whose subfolders deployments may build from with `local_path` (`wharf deploy --local`); empty refuses `local_path`",
    schema: list().refine((dirs) => dirs.every((d) => d.startsWith("/")), {
      message: "every folder must be an absolute path",
    }),
  }),
  WHARF_BUILD_REGISTRIES_INTERNAL: decl({
    part: "deployments",
    type: "0/1",
    default: "0",
    description:
      "1 lets build steps reach the host's own package registries (npm's `registry`, pip's `index-url`/`extra-index-url`, as `npm config get` and `pip config list` report them) at internal addresses: the one setting for a company mirror. Only those hosts, only builds",
    schema: flag(),
  }),
  WHARF_EXAMPLE_PROJECT: decl({
    part: "deployments",
    type: "path",
    defaultText: "`examples/chat-agent`",
    description: "the project `wharf up` deploys as the deployment `example`, or `off`",
    schema: text().optional(),
  }),
} as const;
