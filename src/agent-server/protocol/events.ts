/** A protocol event as sent: numbered per thread (`seq`, `event_id`), so a client resumes with `since`. */
export interface ProtocolEvent {
  type: "event";
  event_id: string;
  seq: number;
  method: string;
  params: { namespace: string[]; timestamp: number; node?: string; data: unknown };
}

/** An event before the thread numbers it. */
export interface EventBody {
  method: string;
  namespace: string[];
  node?: string;
  data: unknown;
}

export type ErrorCode =
  | "invalid_argument"
  | "unknown_command"
  | "unknown_error"
  | "no_such_run"
  | "no_such_subscription"
  | "no_such_namespace"
  | "no_such_interrupt"
  | "no_such_checkpoint"
  | "permission_denied"
  | "not_supported";

export interface ProtocolSuccess {
  type: "success";
  id: number;
  result: Record<string, unknown>;
  meta?: { thread_id: string; applied_through_seq: number };
}

export interface ProtocolError {
  type: "error";
  id: number | null;
  error: ErrorCode;
  message: string;
  meta?: { thread_id: string; applied_through_seq: number };
}

export type ProtocolResponse = ProtocolSuccess | ProtocolError;

export const protocolError = (id: number | null, error: ErrorCode, message: string): ProtocolError => ({
  type: "error",
  id,
  error,
  message,
});
