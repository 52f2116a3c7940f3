/**
 * TypeScript client for the Celestial Memory gRPC service.
 *
 *     const client = new CelestialClient({ address: "localhost:50051" });
 *     const { memory } = await client.store("Alice prefers espresso", { importance: 0.8 });
 *     for (const r of await client.recall("what does Alice drink?")) console.log(r.memory.content);
 *     client.close();
 *
 * The generated messages (Protobuf-ES) and the `MemoryService` descriptor are exported as
 * `proto`; `client.stub` is the Connect client of that service, for what the wrapper leaves out
 * (Export, Import, SetClock, DeleteByFilter); `toCelestialError` reads the errors of those calls.
 */
export { CelestialClient } from "./client";
export type {
  CelestialClientOptions, Pem, RetryPolicy, TlsOptions, TransportOptions,
} from "./connection";
export { CelestialError, TLS_EXPECTED_HINT, TLS_UNEXPECTED_HINT, toCelestialError } from "./errors";
export type { CelestialErrorInit, FieldViolation, StatusName } from "./errors";
export { MEMORY_TYPES, TURN_ACTIONS, ZONES } from "./types";
export type * from "./types";
export { OPERATION_STAGES } from "./operations";
export type {
  Operation, OperationError, OperationPage, OperationStage, StartReflectionOptions,
} from "./operations";
export * as proto from "./gen/celestial/v1/memory_pb.js";
