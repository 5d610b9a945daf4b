import { z } from "zod";

export type SettingPart =
  | "control plane"
  | "storage"
  | "encryption"
  | "logging"
  | "connections"
  | "egress"
  | "sandboxes"
  | "deployments"
  | "agent server"
  | "CLI and graph clients"
  | "install";

export interface SettingDeclaration<S extends z.ZodTypeAny = z.ZodTypeAny> {
  part: SettingPart;
  /** Shown in the help and the table. */
  type: string;
  /** The value used when the variable is unset or empty, as the operator would write it. */
  default?: string;
  /** How the default reads when it is not a literal value (for example "`$WHARF_HOME/…`"). */
  defaultText?: string;
  description: string;
  /** Parses the raw string (or undefined when unset without a default). */
  schema: S;
}

export const int = (min: number, max: number = Number.MAX_SAFE_INTEGER) => z.coerce.number().int().min(min).max(max);
export const flag = () => z.enum(["0", "1", "true", "false"]).transform((v) => v === "1" || v === "true");
export const text = () => z.string().min(1);
export const list = () =>
  z.string().transform((v) =>
    v
      .split(",")
      .map((s) => s.trim())
      .filter(Boolean),
  );
export const decl = <S extends z.ZodTypeAny>(d: SettingDeclaration<S>) => d;
