"""Operations (domain/operations.py) as the API's messages, and an operation's failure as the
service error a call doing its work would have raised (status.py maps both the same way)."""

from __future__ import annotations

from celestial_client.v1 import memory_pb2 as pb
from celestial_memory import errors
from celestial_memory.api.grpc.status import status_of
from celestial_memory.domain.operations import Failure, Operation, Reflection
from google.protobuf import duration_pb2, timestamp_pb2


def reflection_to_pb(r: Reflection) -> pb.ReflectResponse:
    return pb.ReflectResponse(
        insights=[pb.Insight(id=i.id, content=i.content, entity=i.entity,
                             source_ids=i.sources, created=i.created) for i in r.insights],
        summaries=[pb.EntitySummary(entity=x.entity, summary=x.summary, id=x.id,
                                    source_ids=x.sources) for x in r.summaries],
        dry_run=r.dry_run, memories_read=r.read, model_calls=r.calls, model_tokens=r.tokens)


def _time(t: float) -> timestamp_pb2.Timestamp:
    ts = timestamp_pb2.Timestamp()
    ts.FromNanoseconds(int(t * 1e9))
    return ts


def error(f: Failure) -> errors.CelestialError:
    """The service error ``f`` records (a class this server no longer has: an internal one)."""
    cls = getattr(errors, f.error, None)
    if not (isinstance(cls, type) and issubclass(cls, errors.CelestialError)):
        return errors.CelestialError(f.message)
    if issubclass(cls, errors.RetryLater):
        return cls(f.message, f.retry_after_s)
    if issubclass(cls, errors.InvalidArgument | errors.AlreadyExists):
        return cls("reflection", f.message)
    try:
        return cls(f.message)
    except TypeError:  # a class that takes more than a message
        return errors.CelestialError(f.message)


def error_to_pb(f: Failure) -> pb.OperationError:
    code, reason = status_of(error(f))
    out = pb.OperationError(code=code.value[0], reason=reason,
                            message=f.message if reason != "INTERNAL" else "internal error")
    if f.retry_after_s > 0:
        delay = duration_pb2.Duration()
        delay.FromNanoseconds(int(f.retry_after_s * 1e9))
        out.retry_delay.CopyFrom(delay)
    return out


def operation_to_pb(op: Operation) -> pb.Operation:
    a = op.asked
    meta = pb.OperationMetadata(
        kind=op.kind, tenant=op.tenant, stage=int(op.stage),  # type: ignore[arg-type]
        request=pb.ReflectRequest(tenant=op.tenant, dry_run=a.dry_run, window=a.window,
                                  entities=list(a.entities)),
        memories_read=op.read, model_calls=op.calls, planned_model_calls=op.planned_calls,
        model_tokens=op.tokens, create_time=_time(op.created_at),
        update_time=_time(op.updated_at), cancel_requested=op.cancel_requested,
        automatic=op.automatic)
    if op.ended_at is not None:
        meta.end_time.CopyFrom(_time(op.ended_at))
    out = pb.Operation(name=op.name, metadata=meta, done=op.done)
    if op.result is not None:
        out.response.CopyFrom(reflection_to_pb(op.result))
    elif op.failure is not None:
        out.error.CopyFrom(error_to_pb(op.failure))
    return out
