import { ConnectError } from "@connectrpc/connect";
import {
  BadRequestSchema, ErrorInfoSchema, RetryInfoSchema,
} from "./gen/google/rpc/error_details_pb.js";

/** A gRPC status code by name, as `CelestialError.code` gives it. */
export type StatusName =
  | "OK"
  | "CANCELLED"
  | "UNKNOWN"
  | "INVALID_ARGUMENT"
  | "DEADLINE_EXCEEDED"
  | "NOT_FOUND"
  | "ALREADY_EXISTS"
  | "PERMISSION_DENIED"
  | "RESOURCE_EXHAUSTED"
  | "FAILED_PRECONDITION"
  | "ABORTED"
  | "OUT_OF_RANGE"
  | "UNIMPLEMENTED"
  | "INTERNAL"
  | "UNAVAILABLE"
  | "DATA_LOSS"
  | "UNAUTHENTICATED";

// Indexed by the numeric code.
const STATUS_NAMES: readonly StatusName[] = [
  "OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
  "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED",
  "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED",
];

/** A status code by name, as google.rpc.Code (and Connect's `Code`) numbers it; "UNKNOWN" if unknown. */
export function statusName(code: number): StatusName {
  return STATUS_NAMES[code] ?? "UNKNOWN";
}

/** One field the server refused, from `google.rpc.BadRequest`. */
export interface FieldViolation {
  /** The request field at fault, e.g. "content" or "requests[3].vector". */
  field: string;
  description: string;
}

export interface CelestialErrorInit {
  code: StatusName;
  details: string;
  reason?: string;
  domain?: string;
  /** `google.rpc.ErrorInfo.metadata`, e.g. `{ field: "request_id" }` for ALREADY_EXISTS. */
  info?: Record<string, string>;
  violations?: FieldViolation[];
  retryAfterMs?: number;
  /** The call's response headers and trailers. */
  metadata?: Headers;
  cause?: unknown;
}

/**
 * Every failed call rejects with this: the gRPC status and the server's error details
 * (`grpc-status-details-bin`). A detail the server did not send is `undefined` (or `[]`).
 */
export class CelestialError extends Error {
  static {
    // On the prototype, so that the stack trace V8 captures in the constructor names it too.
    this.prototype.name = "CelestialError";
  }

  /** The gRPC status by name, e.g. "INVALID_ARGUMENT". */
  readonly code: StatusName;
  /** The same status as gRPC numbers it (Connect's `Code`), e.g. 3. */
  readonly grpcCode: number;
  /** The server's readable message, e.g. "content: must not be empty". */
  readonly details: string;
  /** `google.rpc.ErrorInfo.reason`, e.g. "INVALID_ARGUMENT" or "RATE_LIMITED". */
  readonly reason: string | undefined;
  /** `google.rpc.ErrorInfo.domain`: "celestial-memory" for the server's own errors. */
  readonly domain: string | undefined;
  /** `google.rpc.ErrorInfo.metadata` (empty when none was sent). */
  readonly info: Record<string, string>;
  /**
   * The field at fault: the first violation's for INVALID_ARGUMENT, ErrorInfo's `field` for
   * ALREADY_EXISTS (the id or request_id that is taken).
   */
  readonly field: string | undefined;
  /** `google.rpc.BadRequest.field_violations`. */
  readonly violations: FieldViolation[];
  /** `google.rpc.RetryInfo.retry_delay` in milliseconds: how long to wait before retrying. */
  readonly retryAfterMs: number | undefined;
  /** The call's response headers and trailers, when the error came from a call. */
  declare readonly metadata: Headers | undefined;

  constructor(init: CelestialErrorInit) {
    super(`${init.code}: ${init.details}`, init.cause === undefined ? undefined : { cause: init.cause });
    this.code = init.code;
    this.grpcCode = STATUS_NAMES.indexOf(init.code);
    this.details = init.details;
    this.reason = init.reason;
    this.domain = init.domain;
    this.info = init.info ?? {};
    this.violations = init.violations ?? [];
    this.field = this.violations[0]?.field ?? this.info.field;
    this.retryAfterMs = init.retryAfterMs;
    // Not enumerable, so that logging the error shows its details rather than raw trailers.
    Object.defineProperty(this, "metadata", { value: init.metadata, enumerable: false });
  }

  /** The error as plain data, for logs (the trailers and cause are left out). */
  toJSON(): Record<string, unknown> {
    return {
      name: this.name, code: this.code, grpcCode: this.grpcCode, details: this.details,
      reason: this.reason, domain: this.domain, info: this.info, field: this.field,
      violations: this.violations,
      retryAfterMs: this.retryAfterMs,
    };
  }
}

/** Added to a failed connection's details when a plaintext client may have met a TLS port. */
export const TLS_EXPECTED_HINT = "the server may expect TLS: connect with the tls option";
/** Added when a TLS client may have met a plaintext port. */
export const TLS_UNEXPECTED_HINT = "the server may not serve TLS: connect without the tls option";

// How a connection whose two ends disagree about TLS fails: a TLS server hangs up on a plaintext
// client before HTTP/2 starts (the stream is closed, or the socket reset, before any answer); a
// TLS client reads a plaintext answer as a record of the wrong version.
function transportHint(code: StatusName, details: string, tls: boolean | undefined): string {
  if (code !== "UNAVAILABLE" || tls === undefined) {
    return details;
  }
  if (!tls && /stream closed with error code|ECONNRESET|socket hang up|Premature close/i.test(details)) {
    return `${details} (${TLS_EXPECTED_HINT})`;
  }
  if (tls && /wrong version number|packet length too long/i.test(details)) {
    return `${details} (${TLS_UNEXPECTED_HINT})`;
  }
  return details;
}

/**
 * The status of an error: a call that got no answer at all (no gRPC status, no response
 * headers: the connection failed, a TLS handshake too) is UNAVAILABLE, as gRPC says and as the
 * retries expect, whatever code the transport gave its failure.
 */
function statusOf(err: ConnectError, ownCall: boolean): StatusName {
  const code = statusName(err.code);
  const answered = err.metadata.has("grpc-status") || err.metadata.has("content-type");
  if (ownCall && !answered && (code === "CANCELLED" || code === "INTERNAL" || code === "UNKNOWN")) {
    return "UNAVAILABLE";
  }
  return code;
}

/**
 * A failed call's error (a `ConnectError`) as a `CelestialError`; anything else is returned as it
 * is. `tls`: whether the transport uses TLS, when known, so that a failed connection can hint at
 * a TLS mismatch.
 */
export function toCelestialError(err: unknown, tls?: boolean): unknown {
  if (err instanceof CelestialError || !(err instanceof ConnectError)) {
    return err;
  }
  const code = statusOf(err, tls !== undefined);
  const details = transportHint(code, err.rawMessage.trim() || code, tls);
  const init: CelestialErrorInit = { code, details, metadata: err.metadata, cause: err };
  // Details that do not decode are left out (findDetails skips them).
  const [info] = err.findDetails(ErrorInfoSchema);
  if (info) {
    init.reason = info.reason;
    init.domain = info.domain;
    init.info = { ...info.metadata };
  }
  const [bad] = err.findDetails(BadRequestSchema);
  if (bad) {
    init.violations = bad.fieldViolations.map((v) => ({ field: v.field, description: v.description }));
  }
  const [retry] = err.findDetails(RetryInfoSchema);
  if (retry?.retryDelay) {
    init.retryAfterMs = Number(retry.retryDelay.seconds) * 1000 + retry.retryDelay.nanos / 1e6;
  }
  return new CelestialError(init);
}
