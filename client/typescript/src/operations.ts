// Long-running operations (a reflection): their types, their conversion from the generated
// messages, and the error a failed one throws (the one a call doing its work would have thrown).
import { randomUUID } from "node:crypto";
import { create } from "@bufbuild/protobuf";
import * as cv from "./convert";
import { CelestialError, type StatusName, statusName } from "./errors";
import * as pb from "./gen/celestial/v1/memory_pb.js";
import type { Reflection, ReflectOptions } from "./types";

/** How far an operation got, in order: "done" once it has ended. */
export const OPERATION_STAGES = ["queued", "reading", "asking_model", "writing", "done"] as const;
export type OperationStage = (typeof OPERATION_STAGES)[number];

/** Why an operation ended without a result: what a call doing its work would have failed with. */
export interface OperationError {
  /**
   * The status by name: "CANCELLED" (cancelled), "RESOURCE_EXHAUSTED" (the tenant's model
   * budget), "ABORTED" (the server stopped or restarted while it ran: start it again),
   * "UNAVAILABLE" (the model failed), "INTERNAL".
   */
  code: StatusName;
  /**
   * A stable identifier to branch on, as a failed call's `reason`: "CANCELLED", "MODEL_BUDGET",
   * "INTERRUPTED", "MODEL_UNAVAILABLE", "INTERNAL".
   */
  reason: string;
  /** What went wrong, for people. */
  message: string;
  /** When starting it again may succeed, in ms; absent when no time is known. */
  retryAfterMs?: number;
}

/**
 * A long-running operation (a reflection): its `name` for getOperation, watchOperation and
 * cancelOperation; its progress; once `done`, its `result` or its `error`.
 */
export interface Operation {
  /** "operations/<uuid>". */
  name: string;
  /** What it is: "reflection". */
  kind: string;
  /** Whether it has ended; then exactly one of `result` and `error` is set. */
  done: boolean;
  stage: OperationStage;
  /** Whether the reflection was asked for a dry run (nothing written). */
  dryRun: boolean;
  /** Memories read (the window, without insights); 0 until read. */
  memoriesRead: number;
  /** Model calls made so far. */
  modelCalls: number;
  /** Model calls it will make, known once the memories are read. */
  plannedModelCalls: number;
  /** Tokens the calls made cost, as the model reported them. */
  modelTokens: number;
  createdAt: Date;
  /** When it last changed. */
  updatedAt: Date;
  /** Absent until it ends. */
  endedAt?: Date;
  /** Whether a cancel was asked for (one that came too late leaves it set on a result). */
  cancelRequested: boolean;
  /** Started by the server's trigger (CELESTIAL_REFLECT_AFTER), not by a caller. */
  automatic: boolean;
  /** What the reflection wrote (or, in a dry run, would write). */
  result?: Reflection;
  /** Why it ended without a result. */
  error?: OperationError;
}

export interface StartReflectionOptions extends Omit<ReflectOptions, "signal"> {
  /**
   * An idempotency key: starting again with the same one (within the tenant) answers the
   * operation the first start made. Absent: the client makes one, so that a retried start
   * starts one reflection.
   */
  requestId?: string;
}

export interface OperationPage {
  /** Newest first. */
  operations: Operation[];
  /** Pass as pageToken for the next page; "" after the last page. */
  nextPageToken: string;
}

export function startRequest(tenant: string, o: StartReflectionOptions): pb.StartReflectionRequest {
  return create(pb.StartReflectionRequestSchema, {
    reflection: {
      tenant, dryRun: o.dryRun ?? true, window: o.window, entities: o.entities,
    },
    requestId: o.requestId || randomUUID(),
  });
}

function stage(s: pb.OperationStage, done: boolean): OperationStage {
  // Unset or unknown (a newer contract): the nearest stage this client knows.
  return OPERATION_STAGES[s - 1] ?? (done ? "done" : "queued");
}

export function operation(o: pb.Operation | undefined): Operation {
  if (o === undefined) {
    throw new Error("the server sent a response without its operation");
  }
  const m = o.metadata ?? create(pb.OperationMetadataSchema);
  const out: Operation = {
    name: o.name, kind: m.kind, done: o.done, stage: stage(m.stage, o.done),
    dryRun: m.request?.dryRun ?? false, memoriesRead: m.memoriesRead, modelCalls: m.modelCalls,
    plannedModelCalls: m.plannedModelCalls, modelTokens: Number(m.modelTokens),
    createdAt: cv.date(m.createTime), updatedAt: cv.date(m.updateTime),
    cancelRequested: m.cancelRequested, automatic: m.automatic,
  };
  if (m.endTime !== undefined) {
    out.endedAt = cv.date(m.endTime);
  }
  if (o.result.case === "response") {
    out.result = cv.reflection(o.result.value);
  }
  if (o.result.case === "error") {
    const e = o.result.value;
    out.error = { code: statusName(e.code), reason: e.reason, message: e.message };
    const ms = cv.millis(e.retryDelay);
    if (ms !== undefined) {
      out.error.retryAfterMs = ms;
    }
  }
  return out;
}

export function page(r: pb.ListOperationsResponse): OperationPage {
  return { operations: r.operations.map(operation), nextPageToken: r.nextPageToken };
}

/** The client's error for an operation's. */
export function errorOf(e: OperationError): CelestialError {
  return new CelestialError({
    code: e.code, details: e.message, reason: e.reason, retryAfterMs: e.retryAfterMs,
  });
}

/** The reflection of an operation that is done; its error thrown when it failed. */
export function result(op: Operation): Reflection {
  if (op.error !== undefined) {
    throw errorOf(op.error);
  }
  if (op.result === undefined) {
    throw new CelestialError({ code: "UNKNOWN", details: `operation ${op.name} is not done` });
  }
  return op.result;
}
