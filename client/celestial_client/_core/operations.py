"""Long-running operations (a reflection) between the wire and the client's types, and the
error a failed one raises: the one a call doing its work would have raised."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

import grpc
from celestial_client._core import convert as cv
from celestial_client.errors import _BY_CODE, CelestialClientError
from celestial_client.types import Operation, OperationError, Page, Reflection
from celestial_client.v1 import memory_pb2 as pb

STAGES = {pb.OPERATION_STAGE_QUEUED: "queued", pb.OPERATION_STAGE_READING: "reading",
          pb.OPERATION_STAGE_ASKING_MODEL: "asking_model",
          pb.OPERATION_STAGE_WRITING: "writing", pb.OPERATION_STAGE_DONE: "done"}
_CODES = {c.value[0]: c for c in grpc.StatusCode}


def start_request(tenant: str, dry_run: bool, window: int, entities: Sequence[str],
                  request_id: str) -> pb.StartReflectionRequest:
    """With a request id always (one of the client's own when none is given), so a start that
    gRPC retries starts one reflection."""
    return pb.StartReflectionRequest(
        reflection=pb.ReflectRequest(tenant=tenant, dry_run=dry_run, window=window,
                                     entities=list(entities)),
        request_id=request_id or str(uuid.uuid4()))


def operation(o: pb.Operation) -> Operation:
    m = o.metadata
    error = None
    if o.HasField("error"):
        e = o.error
        error = OperationError(
            _CODES.get(e.code, grpc.StatusCode.UNKNOWN).name, e.reason, e.message,
            e.retry_delay.ToNanoseconds() / 1e9 if e.HasField("retry_delay") else None)
    return Operation(
        name=o.name, kind=m.kind, done=o.done, stage=STAGES.get(m.stage, "unspecified"),
        dry_run=m.request.dry_run, memories_read=m.memories_read, model_calls=m.model_calls,
        planned_model_calls=m.planned_model_calls, model_tokens=int(m.model_tokens),
        created_at=cv.to_datetime(m.create_time), updated_at=cv.to_datetime(m.update_time),
        ended_at=cv.to_datetime(m.end_time) if m.HasField("end_time") else None,
        cancel_requested=m.cancel_requested, automatic=m.automatic,
        result=cv.reflection(o.response) if o.HasField("response") else None, error=error)


def operations_page(r: pb.ListOperationsResponse) -> Page[Operation]:
    return Page([operation(o) for o in r.operations], r.next_page_token)


def error_of(e: OperationError) -> CelestialClientError:
    """The client's error for an operation's: the class of its status code."""
    code = grpc.StatusCode[e.code] if e.code in grpc.StatusCode.__members__ else \
        grpc.StatusCode.UNKNOWN
    cls = _BY_CODE.get(code, CelestialClientError)
    return cls(e.message, code, reason=e.reason, retry_after=e.retry_after)


def result(op: Operation) -> Reflection:
    """The reflection of an operation that is done; its error raised when it failed."""
    if op.error is not None:
        raise error_of(op.error)
    if op.result is None:
        raise CelestialClientError(f"operation {op.name} is not done")
    return op.result
