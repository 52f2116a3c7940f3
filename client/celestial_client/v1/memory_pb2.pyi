import datetime

from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Zone(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ZONE_UNSPECIFIED: _ClassVar[Zone]
    ZONE_CORE: _ClassVar[Zone]
    ZONE_INNER: _ClassVar[Zone]
    ZONE_OUTER: _ClassVar[Zone]
    ZONE_BELT: _ClassVar[Zone]
    ZONE_CLOUD: _ClassVar[Zone]

class MemoryType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    MEMORY_TYPE_UNSPECIFIED: _ClassVar[MemoryType]
    MEMORY_TYPE_FACT: _ClassVar[MemoryType]
    MEMORY_TYPE_PREFERENCE: _ClassVar[MemoryType]
    MEMORY_TYPE_TRIPLE: _ClassVar[MemoryType]
    MEMORY_TYPE_INSIGHT: _ClassVar[MemoryType]
    MEMORY_TYPE_EPISODE: _ClassVar[MemoryType]

class Verdict(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    VERDICT_UNSPECIFIED: _ClassVar[Verdict]
    VERDICT_HELPFUL: _ClassVar[Verdict]
    VERDICT_NOT_HELPFUL: _ClassVar[Verdict]

class Resolution(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    RESOLUTION_UNSPECIFIED: _ClassVar[Resolution]
    RESOLUTION_FULL: _ClassVar[Resolution]
    RESOLUTION_SUMMARY: _ClassVar[Resolution]
    RESOLUTION_TRIPLE: _ClassVar[Resolution]

class ZoneEventKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ZONE_EVENT_KIND_UNSPECIFIED: _ClassVar[ZoneEventKind]
    ZONE_EVENT_KIND_CAPACITY: _ClassVar[ZoneEventKind]
    ZONE_EVENT_KIND_FORGOTTEN: _ClassVar[ZoneEventKind]
    ZONE_EVENT_KIND_RESTORED: _ClassVar[ZoneEventKind]
    ZONE_EVENT_KIND_PURGED: _ClassVar[ZoneEventKind]
    ZONE_EVENT_KIND_DELETED: _ClassVar[ZoneEventKind]
    ZONE_EVENT_KIND_MERGED: _ClassVar[ZoneEventKind]
    ZONE_EVENT_KIND_FEEDBACK_HELPFUL: _ClassVar[ZoneEventKind]
    ZONE_EVENT_KIND_FEEDBACK_NOT_HELPFUL: _ClassVar[ZoneEventKind]
    ZONE_EVENT_KIND_SKIPPED: _ClassVar[ZoneEventKind]

class StorageBackend(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    STORAGE_BACKEND_UNSPECIFIED: _ClassVar[StorageBackend]
    STORAGE_BACKEND_EDGE: _ClassVar[StorageBackend]
    STORAGE_BACKEND_QDRANT_LOCAL: _ClassVar[StorageBackend]
    STORAGE_BACKEND_QDRANT_REMOTE: _ClassVar[StorageBackend]

class OperationStage(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    OPERATION_STAGE_UNSPECIFIED: _ClassVar[OperationStage]
    OPERATION_STAGE_QUEUED: _ClassVar[OperationStage]
    OPERATION_STAGE_READING: _ClassVar[OperationStage]
    OPERATION_STAGE_ASKING_MODEL: _ClassVar[OperationStage]
    OPERATION_STAGE_WRITING: _ClassVar[OperationStage]
    OPERATION_STAGE_DONE: _ClassVar[OperationStage]

class TurnAction(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TURN_ACTION_UNSPECIFIED: _ClassVar[TurnAction]
    TURN_ACTION_SAVE: _ClassVar[TurnAction]
    TURN_ACTION_SKIP: _ClassVar[TurnAction]
    TURN_ACTION_RETRIEVE: _ClassVar[TurnAction]

class ConfigSource(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CONFIG_SOURCE_UNSPECIFIED: _ClassVar[ConfigSource]
    CONFIG_SOURCE_DEFAULT: _ClassVar[ConfigSource]
    CONFIG_SOURCE_ENV: _ClassVar[ConfigSource]
    CONFIG_SOURCE_FLAG: _ClassVar[ConfigSource]
ZONE_UNSPECIFIED: Zone
ZONE_CORE: Zone
ZONE_INNER: Zone
ZONE_OUTER: Zone
ZONE_BELT: Zone
ZONE_CLOUD: Zone
MEMORY_TYPE_UNSPECIFIED: MemoryType
MEMORY_TYPE_FACT: MemoryType
MEMORY_TYPE_PREFERENCE: MemoryType
MEMORY_TYPE_TRIPLE: MemoryType
MEMORY_TYPE_INSIGHT: MemoryType
MEMORY_TYPE_EPISODE: MemoryType
VERDICT_UNSPECIFIED: Verdict
VERDICT_HELPFUL: Verdict
VERDICT_NOT_HELPFUL: Verdict
RESOLUTION_UNSPECIFIED: Resolution
RESOLUTION_FULL: Resolution
RESOLUTION_SUMMARY: Resolution
RESOLUTION_TRIPLE: Resolution
ZONE_EVENT_KIND_UNSPECIFIED: ZoneEventKind
ZONE_EVENT_KIND_CAPACITY: ZoneEventKind
ZONE_EVENT_KIND_FORGOTTEN: ZoneEventKind
ZONE_EVENT_KIND_RESTORED: ZoneEventKind
ZONE_EVENT_KIND_PURGED: ZoneEventKind
ZONE_EVENT_KIND_DELETED: ZoneEventKind
ZONE_EVENT_KIND_MERGED: ZoneEventKind
ZONE_EVENT_KIND_FEEDBACK_HELPFUL: ZoneEventKind
ZONE_EVENT_KIND_FEEDBACK_NOT_HELPFUL: ZoneEventKind
ZONE_EVENT_KIND_SKIPPED: ZoneEventKind
STORAGE_BACKEND_UNSPECIFIED: StorageBackend
STORAGE_BACKEND_EDGE: StorageBackend
STORAGE_BACKEND_QDRANT_LOCAL: StorageBackend
STORAGE_BACKEND_QDRANT_REMOTE: StorageBackend
OPERATION_STAGE_UNSPECIFIED: OperationStage
OPERATION_STAGE_QUEUED: OperationStage
OPERATION_STAGE_READING: OperationStage
OPERATION_STAGE_ASKING_MODEL: OperationStage
OPERATION_STAGE_WRITING: OperationStage
OPERATION_STAGE_DONE: OperationStage
TURN_ACTION_UNSPECIFIED: TurnAction
TURN_ACTION_SAVE: TurnAction
TURN_ACTION_SKIP: TurnAction
TURN_ACTION_RETRIEVE: TurnAction
CONFIG_SOURCE_UNSPECIFIED: ConfigSource
CONFIG_SOURCE_DEFAULT: ConfigSource
CONFIG_SOURCE_ENV: ConfigSource
CONFIG_SOURCE_FLAG: ConfigSource

class ScoreBreakdown(_message.Message):
    __slots__ = ("recall", "freshness", "importance", "context", "total")
    RECALL_FIELD_NUMBER: _ClassVar[int]
    FRESHNESS_FIELD_NUMBER: _ClassVar[int]
    IMPORTANCE_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    recall: float
    freshness: float
    importance: float
    context: float
    total: float
    def __init__(self, recall: _Optional[float] = ..., freshness: _Optional[float] = ..., importance: _Optional[float] = ..., context: _Optional[float] = ..., total: _Optional[float] = ...) -> None: ...

class Memory(_message.Message):
    __slots__ = ("id", "tenant", "content", "zone", "score", "importance", "recall_count", "created_at", "last_recalled_at", "tags", "session_id", "agent_id", "metadata", "pinned", "breakdown", "context", "archived", "archived_at", "merged", "relations", "entities", "triples", "understanding", "next_move", "memory_type", "immutable", "summary")
    class MetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ID_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    ZONE_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    IMPORTANCE_FIELD_NUMBER: _ClassVar[int]
    RECALL_COUNT_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    LAST_RECALLED_AT_FIELD_NUMBER: _ClassVar[int]
    TAGS_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    PINNED_FIELD_NUMBER: _ClassVar[int]
    BREAKDOWN_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    ARCHIVED_FIELD_NUMBER: _ClassVar[int]
    ARCHIVED_AT_FIELD_NUMBER: _ClassVar[int]
    MERGED_FIELD_NUMBER: _ClassVar[int]
    RELATIONS_FIELD_NUMBER: _ClassVar[int]
    ENTITIES_FIELD_NUMBER: _ClassVar[int]
    TRIPLES_FIELD_NUMBER: _ClassVar[int]
    UNDERSTANDING_FIELD_NUMBER: _ClassVar[int]
    NEXT_MOVE_FIELD_NUMBER: _ClassVar[int]
    MEMORY_TYPE_FIELD_NUMBER: _ClassVar[int]
    IMMUTABLE_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    id: str
    tenant: str
    content: str
    zone: Zone
    score: float
    importance: float
    recall_count: int
    created_at: _timestamp_pb2.Timestamp
    last_recalled_at: _timestamp_pb2.Timestamp
    tags: _containers.RepeatedScalarFieldContainer[str]
    session_id: str
    agent_id: str
    metadata: _containers.ScalarMap[str, str]
    pinned: bool
    breakdown: ScoreBreakdown
    context: str
    archived: bool
    archived_at: _timestamp_pb2.Timestamp
    merged: _containers.RepeatedCompositeFieldContainer[MergedRepeat]
    relations: _containers.RepeatedCompositeFieldContainer[Relation]
    entities: _containers.RepeatedScalarFieldContainer[str]
    triples: _containers.RepeatedCompositeFieldContainer[Triple]
    understanding: str
    next_move: NextMove
    memory_type: MemoryType
    immutable: bool
    summary: str
    def __init__(self, id: _Optional[str] = ..., tenant: _Optional[str] = ..., content: _Optional[str] = ..., zone: _Optional[_Union[Zone, str]] = ..., score: _Optional[float] = ..., importance: _Optional[float] = ..., recall_count: _Optional[int] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., last_recalled_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., tags: _Optional[_Iterable[str]] = ..., session_id: _Optional[str] = ..., agent_id: _Optional[str] = ..., metadata: _Optional[_Mapping[str, str]] = ..., pinned: _Optional[bool] = ..., breakdown: _Optional[_Union[ScoreBreakdown, _Mapping]] = ..., context: _Optional[str] = ..., archived: _Optional[bool] = ..., archived_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., merged: _Optional[_Iterable[_Union[MergedRepeat, _Mapping]]] = ..., relations: _Optional[_Iterable[_Union[Relation, _Mapping]]] = ..., entities: _Optional[_Iterable[str]] = ..., triples: _Optional[_Iterable[_Union[Triple, _Mapping]]] = ..., understanding: _Optional[str] = ..., next_move: _Optional[_Union[NextMove, _Mapping]] = ..., memory_type: _Optional[_Union[MemoryType, str]] = ..., immutable: _Optional[bool] = ..., summary: _Optional[str] = ...) -> None: ...

class Triple(_message.Message):
    __slots__ = ("subject", "relation", "object")
    SUBJECT_FIELD_NUMBER: _ClassVar[int]
    RELATION_FIELD_NUMBER: _ClassVar[int]
    OBJECT_FIELD_NUMBER: _ClassVar[int]
    subject: str
    relation: str
    object: str
    def __init__(self, subject: _Optional[str] = ..., relation: _Optional[str] = ..., object: _Optional[str] = ...) -> None: ...

class NextMove(_message.Message):
    __slots__ = ("zone", "at", "archive")
    ZONE_FIELD_NUMBER: _ClassVar[int]
    AT_FIELD_NUMBER: _ClassVar[int]
    ARCHIVE_FIELD_NUMBER: _ClassVar[int]
    zone: Zone
    at: _timestamp_pb2.Timestamp
    archive: bool
    def __init__(self, zone: _Optional[_Union[Zone, str]] = ..., at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., archive: _Optional[bool] = ...) -> None: ...

class Relation(_message.Message):
    __slots__ = ("id", "relation", "weight", "made_by", "created_at", "outgoing")
    ID_FIELD_NUMBER: _ClassVar[int]
    RELATION_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_FIELD_NUMBER: _ClassVar[int]
    MADE_BY_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    OUTGOING_FIELD_NUMBER: _ClassVar[int]
    id: str
    relation: str
    weight: float
    made_by: str
    created_at: _timestamp_pb2.Timestamp
    outgoing: bool
    def __init__(self, id: _Optional[str] = ..., relation: _Optional[str] = ..., weight: _Optional[float] = ..., made_by: _Optional[str] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., outgoing: _Optional[bool] = ...) -> None: ...

class MergedRepeat(_message.Message):
    __slots__ = ("content", "created_at", "id", "session_id", "agent_id", "metadata", "context")
    class MetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    content: str
    created_at: _timestamp_pb2.Timestamp
    id: str
    session_id: str
    agent_id: str
    metadata: _containers.ScalarMap[str, str]
    context: str
    def __init__(self, content: _Optional[str] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., id: _Optional[str] = ..., session_id: _Optional[str] = ..., agent_id: _Optional[str] = ..., metadata: _Optional[_Mapping[str, str]] = ..., context: _Optional[str] = ...) -> None: ...

class StoreRequest(_message.Message):
    __slots__ = ("tenant", "content", "importance", "tags", "session_id", "agent_id", "metadata", "created_at", "vector", "id", "pinned", "context", "request_id", "upsert", "memory_type", "immutable")
    class MetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    TENANT_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    IMPORTANCE_FIELD_NUMBER: _ClassVar[int]
    TAGS_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    VECTOR_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    PINNED_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    UPSERT_FIELD_NUMBER: _ClassVar[int]
    MEMORY_TYPE_FIELD_NUMBER: _ClassVar[int]
    IMMUTABLE_FIELD_NUMBER: _ClassVar[int]
    tenant: str
    content: str
    importance: float
    tags: _containers.RepeatedScalarFieldContainer[str]
    session_id: str
    agent_id: str
    metadata: _containers.ScalarMap[str, str]
    created_at: _timestamp_pb2.Timestamp
    vector: _containers.RepeatedScalarFieldContainer[float]
    id: str
    pinned: bool
    context: str
    request_id: str
    upsert: bool
    memory_type: MemoryType
    immutable: bool
    def __init__(self, tenant: _Optional[str] = ..., content: _Optional[str] = ..., importance: _Optional[float] = ..., tags: _Optional[_Iterable[str]] = ..., session_id: _Optional[str] = ..., agent_id: _Optional[str] = ..., metadata: _Optional[_Mapping[str, str]] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., vector: _Optional[_Iterable[float]] = ..., id: _Optional[str] = ..., pinned: _Optional[bool] = ..., context: _Optional[str] = ..., request_id: _Optional[str] = ..., upsert: _Optional[bool] = ..., memory_type: _Optional[_Union[MemoryType, str]] = ..., immutable: _Optional[bool] = ...) -> None: ...

class StoreResponse(_message.Message):
    __slots__ = ("memory", "created", "merged_into")
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    MERGED_INTO_FIELD_NUMBER: _ClassVar[int]
    memory: Memory
    created: bool
    merged_into: str
    def __init__(self, memory: _Optional[_Union[Memory, _Mapping]] = ..., created: _Optional[bool] = ..., merged_into: _Optional[str] = ...) -> None: ...

class StoreBatchResponse(_message.Message):
    __slots__ = ("ids", "stored", "existing", "merged")
    IDS_FIELD_NUMBER: _ClassVar[int]
    STORED_FIELD_NUMBER: _ClassVar[int]
    EXISTING_FIELD_NUMBER: _ClassVar[int]
    MERGED_FIELD_NUMBER: _ClassVar[int]
    ids: _containers.RepeatedScalarFieldContainer[str]
    stored: int
    existing: int
    merged: int
    def __init__(self, ids: _Optional[_Iterable[str]] = ..., stored: _Optional[int] = ..., existing: _Optional[int] = ..., merged: _Optional[int] = ...) -> None: ...

class RecallFilter(_message.Message):
    __slots__ = ("zones", "tags_any", "tags_all", "session_id", "agent_id", "created_after", "created_before", "recalled_after", "recalled_before", "min_importance", "metadata", "entities_any", "memory_types")
    class MetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ZONES_FIELD_NUMBER: _ClassVar[int]
    TAGS_ANY_FIELD_NUMBER: _ClassVar[int]
    TAGS_ALL_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    CREATED_AFTER_FIELD_NUMBER: _ClassVar[int]
    CREATED_BEFORE_FIELD_NUMBER: _ClassVar[int]
    RECALLED_AFTER_FIELD_NUMBER: _ClassVar[int]
    RECALLED_BEFORE_FIELD_NUMBER: _ClassVar[int]
    MIN_IMPORTANCE_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    ENTITIES_ANY_FIELD_NUMBER: _ClassVar[int]
    MEMORY_TYPES_FIELD_NUMBER: _ClassVar[int]
    zones: _containers.RepeatedScalarFieldContainer[Zone]
    tags_any: _containers.RepeatedScalarFieldContainer[str]
    tags_all: _containers.RepeatedScalarFieldContainer[str]
    session_id: str
    agent_id: str
    created_after: _timestamp_pb2.Timestamp
    created_before: _timestamp_pb2.Timestamp
    recalled_after: _timestamp_pb2.Timestamp
    recalled_before: _timestamp_pb2.Timestamp
    min_importance: float
    metadata: _containers.ScalarMap[str, str]
    entities_any: _containers.RepeatedScalarFieldContainer[str]
    memory_types: _containers.RepeatedScalarFieldContainer[MemoryType]
    def __init__(self, zones: _Optional[_Iterable[_Union[Zone, str]]] = ..., tags_any: _Optional[_Iterable[str]] = ..., tags_all: _Optional[_Iterable[str]] = ..., session_id: _Optional[str] = ..., agent_id: _Optional[str] = ..., created_after: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., created_before: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., recalled_after: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., recalled_before: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., min_importance: _Optional[float] = ..., metadata: _Optional[_Mapping[str, str]] = ..., entities_any: _Optional[_Iterable[str]] = ..., memory_types: _Optional[_Iterable[_Union[MemoryType, str]]] = ...) -> None: ...

class RecallRequest(_message.Message):
    __slots__ = ("tenant", "query", "limit", "filter", "no_reinforce", "context", "query_vector", "min_relevance", "ignore_zones", "include_archived", "deep", "expand")
    TENANT_FIELD_NUMBER: _ClassVar[int]
    QUERY_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    FILTER_FIELD_NUMBER: _ClassVar[int]
    NO_REINFORCE_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    QUERY_VECTOR_FIELD_NUMBER: _ClassVar[int]
    MIN_RELEVANCE_FIELD_NUMBER: _ClassVar[int]
    IGNORE_ZONES_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_ARCHIVED_FIELD_NUMBER: _ClassVar[int]
    DEEP_FIELD_NUMBER: _ClassVar[int]
    EXPAND_FIELD_NUMBER: _ClassVar[int]
    tenant: str
    query: str
    limit: int
    filter: RecallFilter
    no_reinforce: bool
    context: str
    query_vector: _containers.RepeatedScalarFieldContainer[float]
    min_relevance: float
    ignore_zones: bool
    include_archived: bool
    deep: bool
    expand: int
    def __init__(self, tenant: _Optional[str] = ..., query: _Optional[str] = ..., limit: _Optional[int] = ..., filter: _Optional[_Union[RecallFilter, _Mapping]] = ..., no_reinforce: _Optional[bool] = ..., context: _Optional[str] = ..., query_vector: _Optional[_Iterable[float]] = ..., min_relevance: _Optional[float] = ..., ignore_zones: _Optional[bool] = ..., include_archived: _Optional[bool] = ..., deep: _Optional[bool] = ..., expand: _Optional[int] = ...) -> None: ...

class RecallResult(_message.Message):
    __slots__ = ("memory", "found_in", "relevance", "breakdown", "archived", "via")
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    FOUND_IN_FIELD_NUMBER: _ClassVar[int]
    RELEVANCE_FIELD_NUMBER: _ClassVar[int]
    BREAKDOWN_FIELD_NUMBER: _ClassVar[int]
    ARCHIVED_FIELD_NUMBER: _ClassVar[int]
    VIA_FIELD_NUMBER: _ClassVar[int]
    memory: Memory
    found_in: Zone
    relevance: float
    breakdown: ScoreBreakdown
    archived: bool
    via: Via
    def __init__(self, memory: _Optional[_Union[Memory, _Mapping]] = ..., found_in: _Optional[_Union[Zone, str]] = ..., relevance: _Optional[float] = ..., breakdown: _Optional[_Union[ScoreBreakdown, _Mapping]] = ..., archived: _Optional[bool] = ..., via: _Optional[_Union[Via, _Mapping]] = ...) -> None: ...

class Via(_message.Message):
    __slots__ = ("from_id", "relation", "weight", "hops")
    FROM_ID_FIELD_NUMBER: _ClassVar[int]
    RELATION_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_FIELD_NUMBER: _ClassVar[int]
    HOPS_FIELD_NUMBER: _ClassVar[int]
    from_id: str
    relation: str
    weight: float
    hops: int
    def __init__(self, from_id: _Optional[str] = ..., relation: _Optional[str] = ..., weight: _Optional[float] = ..., hops: _Optional[int] = ...) -> None: ...

class RecallResponse(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[RecallResult]
    def __init__(self, results: _Optional[_Iterable[_Union[RecallResult, _Mapping]]] = ...) -> None: ...

class ContextRequest(_message.Message):
    __slots__ = ("recall", "max_tokens", "neighbours")
    RECALL_FIELD_NUMBER: _ClassVar[int]
    MAX_TOKENS_FIELD_NUMBER: _ClassVar[int]
    NEIGHBOURS_FIELD_NUMBER: _ClassVar[int]
    recall: RecallRequest
    max_tokens: int
    neighbours: bool
    def __init__(self, recall: _Optional[_Union[RecallRequest, _Mapping]] = ..., max_tokens: _Optional[int] = ..., neighbours: _Optional[bool] = ...) -> None: ...

class ContextResponse(_message.Message):
    __slots__ = ("text", "tokens", "tokenizer", "included_ids", "folded_ids", "omitted_ids", "included_resolutions")
    TEXT_FIELD_NUMBER: _ClassVar[int]
    TOKENS_FIELD_NUMBER: _ClassVar[int]
    TOKENIZER_FIELD_NUMBER: _ClassVar[int]
    INCLUDED_IDS_FIELD_NUMBER: _ClassVar[int]
    FOLDED_IDS_FIELD_NUMBER: _ClassVar[int]
    OMITTED_IDS_FIELD_NUMBER: _ClassVar[int]
    INCLUDED_RESOLUTIONS_FIELD_NUMBER: _ClassVar[int]
    text: str
    tokens: int
    tokenizer: str
    included_ids: _containers.RepeatedScalarFieldContainer[str]
    folded_ids: _containers.RepeatedScalarFieldContainer[str]
    omitted_ids: _containers.RepeatedScalarFieldContainer[str]
    included_resolutions: _containers.RepeatedScalarFieldContainer[Resolution]
    def __init__(self, text: _Optional[str] = ..., tokens: _Optional[int] = ..., tokenizer: _Optional[str] = ..., included_ids: _Optional[_Iterable[str]] = ..., folded_ids: _Optional[_Iterable[str]] = ..., omitted_ids: _Optional[_Iterable[str]] = ..., included_resolutions: _Optional[_Iterable[_Union[Resolution, str]]] = ...) -> None: ...

class GetRequest(_message.Message):
    __slots__ = ("tenant", "id")
    TENANT_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    tenant: str
    id: str
    def __init__(self, tenant: _Optional[str] = ..., id: _Optional[str] = ...) -> None: ...

class GetResponse(_message.Message):
    __slots__ = ("memory",)
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    memory: Memory
    def __init__(self, memory: _Optional[_Union[Memory, _Mapping]] = ...) -> None: ...

class UpdateRequest(_message.Message):
    __slots__ = ("tenant", "id", "content", "importance", "tags", "metadata", "pinned", "vector")
    TENANT_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    IMPORTANCE_FIELD_NUMBER: _ClassVar[int]
    TAGS_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    PINNED_FIELD_NUMBER: _ClassVar[int]
    VECTOR_FIELD_NUMBER: _ClassVar[int]
    tenant: str
    id: str
    content: str
    importance: float
    tags: StringList
    metadata: StringMap
    pinned: bool
    vector: _containers.RepeatedScalarFieldContainer[float]
    def __init__(self, tenant: _Optional[str] = ..., id: _Optional[str] = ..., content: _Optional[str] = ..., importance: _Optional[float] = ..., tags: _Optional[_Union[StringList, _Mapping]] = ..., metadata: _Optional[_Union[StringMap, _Mapping]] = ..., pinned: _Optional[bool] = ..., vector: _Optional[_Iterable[float]] = ...) -> None: ...

class StringList(_message.Message):
    __slots__ = ("values",)
    VALUES_FIELD_NUMBER: _ClassVar[int]
    values: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, values: _Optional[_Iterable[str]] = ...) -> None: ...

class StringMap(_message.Message):
    __slots__ = ("values",)
    class ValuesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    VALUES_FIELD_NUMBER: _ClassVar[int]
    values: _containers.ScalarMap[str, str]
    def __init__(self, values: _Optional[_Mapping[str, str]] = ...) -> None: ...

class UpdateResponse(_message.Message):
    __slots__ = ("memory",)
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    memory: Memory
    def __init__(self, memory: _Optional[_Union[Memory, _Mapping]] = ...) -> None: ...

class RestoreRequest(_message.Message):
    __slots__ = ("tenant", "id")
    TENANT_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    tenant: str
    id: str
    def __init__(self, tenant: _Optional[str] = ..., id: _Optional[str] = ...) -> None: ...

class RestoreResponse(_message.Message):
    __slots__ = ("memory",)
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    memory: Memory
    def __init__(self, memory: _Optional[_Union[Memory, _Mapping]] = ...) -> None: ...

class ConsolidateRequest(_message.Message):
    __slots__ = ("tenant", "dry_run")
    TENANT_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    tenant: str
    dry_run: bool
    def __init__(self, tenant: _Optional[str] = ..., dry_run: _Optional[bool] = ...) -> None: ...

class Merge(_message.Message):
    __slots__ = ("into", "ids")
    INTO_FIELD_NUMBER: _ClassVar[int]
    IDS_FIELD_NUMBER: _ClassVar[int]
    into: str
    ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, into: _Optional[str] = ..., ids: _Optional[_Iterable[str]] = ...) -> None: ...

class ConsolidateResponse(_message.Message):
    __slots__ = ("merges", "scanned", "dry_run", "unlisted")
    MERGES_FIELD_NUMBER: _ClassVar[int]
    SCANNED_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    UNLISTED_FIELD_NUMBER: _ClassVar[int]
    merges: _containers.RepeatedCompositeFieldContainer[Merge]
    scanned: int
    dry_run: bool
    unlisted: int
    def __init__(self, merges: _Optional[_Iterable[_Union[Merge, _Mapping]]] = ..., scanned: _Optional[int] = ..., dry_run: _Optional[bool] = ..., unlisted: _Optional[int] = ...) -> None: ...

class DeleteRequest(_message.Message):
    __slots__ = ("tenant", "id")
    TENANT_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    tenant: str
    id: str
    def __init__(self, tenant: _Optional[str] = ..., id: _Optional[str] = ...) -> None: ...

class DeleteResponse(_message.Message):
    __slots__ = ("deleted",)
    DELETED_FIELD_NUMBER: _ClassVar[int]
    deleted: bool
    def __init__(self, deleted: _Optional[bool] = ...) -> None: ...

class DeleteByFilterRequest(_message.Message):
    __slots__ = ("tenant", "filter")
    TENANT_FIELD_NUMBER: _ClassVar[int]
    FILTER_FIELD_NUMBER: _ClassVar[int]
    tenant: str
    filter: RecallFilter
    def __init__(self, tenant: _Optional[str] = ..., filter: _Optional[_Union[RecallFilter, _Mapping]] = ...) -> None: ...

class DeleteByFilterResponse(_message.Message):
    __slots__ = ("deleted",)
    DELETED_FIELD_NUMBER: _ClassVar[int]
    deleted: int
    def __init__(self, deleted: _Optional[int] = ...) -> None: ...

class RebalanceRequest(_message.Message):
    __slots__ = ("tenant", "dry_run", "full", "no_forget")
    TENANT_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    FULL_FIELD_NUMBER: _ClassVar[int]
    NO_FORGET_FIELD_NUMBER: _ClassVar[int]
    tenant: str
    dry_run: bool
    full: bool
    no_forget: bool
    def __init__(self, tenant: _Optional[str] = ..., dry_run: _Optional[bool] = ..., full: _Optional[bool] = ..., no_forget: _Optional[bool] = ...) -> None: ...

class ZoneMove(_message.Message):
    __slots__ = ("from_zone", "to_zone", "count")
    FROM_ZONE_FIELD_NUMBER: _ClassVar[int]
    TO_ZONE_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    from_zone: Zone
    to_zone: Zone
    count: int
    def __init__(self, from_zone: _Optional[_Union[Zone, str]] = ..., to_zone: _Optional[_Union[Zone, str]] = ..., count: _Optional[int] = ...) -> None: ...

class RebalanceResponse(_message.Message):
    __slots__ = ("scanned", "moved", "evicted", "forgotten", "dry_run", "duration_ms", "full", "skipped_by", "duration", "purged")
    SCANNED_FIELD_NUMBER: _ClassVar[int]
    MOVED_FIELD_NUMBER: _ClassVar[int]
    EVICTED_FIELD_NUMBER: _ClassVar[int]
    FORGOTTEN_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    DURATION_MS_FIELD_NUMBER: _ClassVar[int]
    FULL_FIELD_NUMBER: _ClassVar[int]
    SKIPPED_BY_FIELD_NUMBER: _ClassVar[int]
    DURATION_FIELD_NUMBER: _ClassVar[int]
    PURGED_FIELD_NUMBER: _ClassVar[int]
    scanned: int
    moved: _containers.RepeatedCompositeFieldContainer[ZoneMove]
    evicted: int
    forgotten: int
    dry_run: bool
    duration_ms: float
    full: bool
    skipped_by: str
    duration: _duration_pb2.Duration
    purged: int
    def __init__(self, scanned: _Optional[int] = ..., moved: _Optional[_Iterable[_Union[ZoneMove, _Mapping]]] = ..., evicted: _Optional[int] = ..., forgotten: _Optional[int] = ..., dry_run: _Optional[bool] = ..., duration_ms: _Optional[float] = ..., full: _Optional[bool] = ..., skipped_by: _Optional[str] = ..., duration: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., purged: _Optional[int] = ...) -> None: ...

class LedgerRequest(_message.Message):
    __slots__ = ("tenant", "since", "limit", "memory_id", "page_size", "page_token")
    TENANT_FIELD_NUMBER: _ClassVar[int]
    SINCE_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    MEMORY_ID_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    tenant: str
    since: _timestamp_pb2.Timestamp
    limit: int
    memory_id: str
    page_size: int
    page_token: str
    def __init__(self, tenant: _Optional[str] = ..., since: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., limit: _Optional[int] = ..., memory_id: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ZoneEvent(_message.Message):
    __slots__ = ("id", "tenant", "memory_id", "from_zone", "to_zone", "reason", "at", "content_hash", "kind")
    ID_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    MEMORY_ID_FIELD_NUMBER: _ClassVar[int]
    FROM_ZONE_FIELD_NUMBER: _ClassVar[int]
    TO_ZONE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    AT_FIELD_NUMBER: _ClassVar[int]
    CONTENT_HASH_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    id: str
    tenant: str
    memory_id: str
    from_zone: Zone
    to_zone: Zone
    reason: str
    at: _timestamp_pb2.Timestamp
    content_hash: str
    kind: ZoneEventKind
    def __init__(self, id: _Optional[str] = ..., tenant: _Optional[str] = ..., memory_id: _Optional[str] = ..., from_zone: _Optional[_Union[Zone, str]] = ..., to_zone: _Optional[_Union[Zone, str]] = ..., reason: _Optional[str] = ..., at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., content_hash: _Optional[str] = ..., kind: _Optional[_Union[ZoneEventKind, str]] = ...) -> None: ...

class LedgerResponse(_message.Message):
    __slots__ = ("events", "admin_events", "next_page_token")
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    ADMIN_EVENTS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    events: _containers.RepeatedCompositeFieldContainer[ZoneEvent]
    admin_events: _containers.RepeatedCompositeFieldContainer[AdminEvent]
    next_page_token: str
    def __init__(self, events: _Optional[_Iterable[_Union[ZoneEvent, _Mapping]]] = ..., admin_events: _Optional[_Iterable[_Union[AdminEvent, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class AdminEvent(_message.Message):
    __slots__ = ("id", "tenant", "method", "key_id", "at")
    ID_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    METHOD_FIELD_NUMBER: _ClassVar[int]
    KEY_ID_FIELD_NUMBER: _ClassVar[int]
    AT_FIELD_NUMBER: _ClassVar[int]
    id: str
    tenant: str
    method: str
    key_id: str
    at: _timestamp_pb2.Timestamp
    def __init__(self, id: _Optional[str] = ..., tenant: _Optional[str] = ..., method: _Optional[str] = ..., key_id: _Optional[str] = ..., at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class StatsRequest(_message.Message):
    __slots__ = ("tenant",)
    TENANT_FIELD_NUMBER: _ClassVar[int]
    tenant: str
    def __init__(self, tenant: _Optional[str] = ...) -> None: ...

class ZoneStats(_message.Message):
    __slots__ = ("zone", "count", "capacity", "min_score")
    ZONE_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    CAPACITY_FIELD_NUMBER: _ClassVar[int]
    MIN_SCORE_FIELD_NUMBER: _ClassVar[int]
    zone: Zone
    count: int
    capacity: int
    min_score: float
    def __init__(self, zone: _Optional[_Union[Zone, str]] = ..., count: _Optional[int] = ..., capacity: _Optional[int] = ..., min_score: _Optional[float] = ...) -> None: ...

class StatsResponse(_message.Message):
    __slots__ = ("zones", "total", "embedding_model", "dimension", "backend", "storage_backend", "archived")
    ZONES_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    EMBEDDING_MODEL_FIELD_NUMBER: _ClassVar[int]
    DIMENSION_FIELD_NUMBER: _ClassVar[int]
    BACKEND_FIELD_NUMBER: _ClassVar[int]
    STORAGE_BACKEND_FIELD_NUMBER: _ClassVar[int]
    ARCHIVED_FIELD_NUMBER: _ClassVar[int]
    zones: _containers.RepeatedCompositeFieldContainer[ZoneStats]
    total: int
    embedding_model: str
    dimension: int
    backend: str
    storage_backend: StorageBackend
    archived: int
    def __init__(self, zones: _Optional[_Iterable[_Union[ZoneStats, _Mapping]]] = ..., total: _Optional[int] = ..., embedding_model: _Optional[str] = ..., dimension: _Optional[int] = ..., backend: _Optional[str] = ..., storage_backend: _Optional[_Union[StorageBackend, str]] = ..., archived: _Optional[int] = ...) -> None: ...

class ExportRequest(_message.Message):
    __slots__ = ("tenant", "after_id")
    TENANT_FIELD_NUMBER: _ClassVar[int]
    AFTER_ID_FIELD_NUMBER: _ClassVar[int]
    tenant: str
    after_id: str
    def __init__(self, tenant: _Optional[str] = ..., after_id: _Optional[str] = ...) -> None: ...

class ExportedMemory(_message.Message):
    __slots__ = ("memory", "vector", "context_vector", "context_score", "created_at_s", "last_recalled_at_s", "written_at_s", "tenant", "written_at", "replace", "ranker_tuning", "turn_policy")
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    VECTOR_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_VECTOR_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_SCORE_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_S_FIELD_NUMBER: _ClassVar[int]
    LAST_RECALLED_AT_S_FIELD_NUMBER: _ClassVar[int]
    WRITTEN_AT_S_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    WRITTEN_AT_FIELD_NUMBER: _ClassVar[int]
    REPLACE_FIELD_NUMBER: _ClassVar[int]
    RANKER_TUNING_FIELD_NUMBER: _ClassVar[int]
    TURN_POLICY_FIELD_NUMBER: _ClassVar[int]
    memory: Memory
    vector: _containers.RepeatedScalarFieldContainer[float]
    context_vector: _containers.RepeatedScalarFieldContainer[float]
    context_score: float
    created_at_s: float
    last_recalled_at_s: float
    written_at_s: float
    tenant: str
    written_at: _timestamp_pb2.Timestamp
    replace: bool
    ranker_tuning: RankerTuning
    turn_policy: TurnPolicyState
    def __init__(self, memory: _Optional[_Union[Memory, _Mapping]] = ..., vector: _Optional[_Iterable[float]] = ..., context_vector: _Optional[_Iterable[float]] = ..., context_score: _Optional[float] = ..., created_at_s: _Optional[float] = ..., last_recalled_at_s: _Optional[float] = ..., written_at_s: _Optional[float] = ..., tenant: _Optional[str] = ..., written_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., replace: _Optional[bool] = ..., ranker_tuning: _Optional[_Union[RankerTuning, _Mapping]] = ..., turn_policy: _Optional[_Union[TurnPolicyState, _Mapping]] = ...) -> None: ...

class TurnPolicyState(_message.Message):
    __slots__ = ("state",)
    STATE_FIELD_NUMBER: _ClassVar[int]
    state: str
    def __init__(self, state: _Optional[str] = ...) -> None: ...

class RankerTuning(_message.Message):
    __slots__ = ("features", "weights", "votes")
    FEATURES_FIELD_NUMBER: _ClassVar[int]
    WEIGHTS_FIELD_NUMBER: _ClassVar[int]
    VOTES_FIELD_NUMBER: _ClassVar[int]
    features: _containers.RepeatedScalarFieldContainer[str]
    weights: _containers.RepeatedScalarFieldContainer[float]
    votes: int
    def __init__(self, features: _Optional[_Iterable[str]] = ..., weights: _Optional[_Iterable[float]] = ..., votes: _Optional[int] = ...) -> None: ...

class RecentRequest(_message.Message):
    __slots__ = ("tenant", "limit", "filter", "page_size", "page_token", "archived")
    TENANT_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    FILTER_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    ARCHIVED_FIELD_NUMBER: _ClassVar[int]
    tenant: str
    limit: int
    filter: RecallFilter
    page_size: int
    page_token: str
    archived: bool
    def __init__(self, tenant: _Optional[str] = ..., limit: _Optional[int] = ..., filter: _Optional[_Union[RecallFilter, _Mapping]] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., archived: _Optional[bool] = ...) -> None: ...

class RecentResponse(_message.Message):
    __slots__ = ("memories", "next_page_token")
    MEMORIES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    memories: _containers.RepeatedCompositeFieldContainer[Memory]
    next_page_token: str
    def __init__(self, memories: _Optional[_Iterable[_Union[Memory, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class ListRequest(_message.Message):
    __slots__ = ("tenant", "filter", "page_size", "page_token", "archived")
    TENANT_FIELD_NUMBER: _ClassVar[int]
    FILTER_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    ARCHIVED_FIELD_NUMBER: _ClassVar[int]
    tenant: str
    filter: RecallFilter
    page_size: int
    page_token: str
    archived: bool
    def __init__(self, tenant: _Optional[str] = ..., filter: _Optional[_Union[RecallFilter, _Mapping]] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., archived: _Optional[bool] = ...) -> None: ...

class ListResponse(_message.Message):
    __slots__ = ("memories", "next_page_token")
    MEMORIES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    memories: _containers.RepeatedCompositeFieldContainer[Memory]
    next_page_token: str
    def __init__(self, memories: _Optional[_Iterable[_Union[Memory, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class SetClockRequest(_message.Message):
    __slots__ = ("now",)
    NOW_FIELD_NUMBER: _ClassVar[int]
    now: _timestamp_pb2.Timestamp
    def __init__(self, now: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class SetClockResponse(_message.Message):
    __slots__ = ("now",)
    NOW_FIELD_NUMBER: _ClassVar[int]
    now: _timestamp_pb2.Timestamp
    def __init__(self, now: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ImportResponse(_message.Message):
    __slots__ = ("imported", "skipped")
    IMPORTED_FIELD_NUMBER: _ClassVar[int]
    SKIPPED_FIELD_NUMBER: _ClassVar[int]
    imported: int
    skipped: int
    def __init__(self, imported: _Optional[int] = ..., skipped: _Optional[int] = ...) -> None: ...

class RelateRequest(_message.Message):
    __slots__ = ("tenant", "from_id", "to_id", "relation", "weight")
    TENANT_FIELD_NUMBER: _ClassVar[int]
    FROM_ID_FIELD_NUMBER: _ClassVar[int]
    TO_ID_FIELD_NUMBER: _ClassVar[int]
    RELATION_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_FIELD_NUMBER: _ClassVar[int]
    tenant: str
    from_id: str
    to_id: str
    relation: str
    weight: float
    def __init__(self, tenant: _Optional[str] = ..., from_id: _Optional[str] = ..., to_id: _Optional[str] = ..., relation: _Optional[str] = ..., weight: _Optional[float] = ...) -> None: ...

class RelateResponse(_message.Message):
    __slots__ = ("created", "relation")
    CREATED_FIELD_NUMBER: _ClassVar[int]
    RELATION_FIELD_NUMBER: _ClassVar[int]
    created: bool
    relation: Relation
    def __init__(self, created: _Optional[bool] = ..., relation: _Optional[_Union[Relation, _Mapping]] = ...) -> None: ...

class UnrelateRequest(_message.Message):
    __slots__ = ("tenant", "from_id", "to_id", "relation")
    TENANT_FIELD_NUMBER: _ClassVar[int]
    FROM_ID_FIELD_NUMBER: _ClassVar[int]
    TO_ID_FIELD_NUMBER: _ClassVar[int]
    RELATION_FIELD_NUMBER: _ClassVar[int]
    tenant: str
    from_id: str
    to_id: str
    relation: str
    def __init__(self, tenant: _Optional[str] = ..., from_id: _Optional[str] = ..., to_id: _Optional[str] = ..., relation: _Optional[str] = ...) -> None: ...

class UnrelateResponse(_message.Message):
    __slots__ = ("removed",)
    REMOVED_FIELD_NUMBER: _ClassVar[int]
    removed: int
    def __init__(self, removed: _Optional[int] = ...) -> None: ...

class RelatedRequest(_message.Message):
    __slots__ = ("tenant", "id", "depth", "relations", "page_size", "page_token")
    TENANT_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    DEPTH_FIELD_NUMBER: _ClassVar[int]
    RELATIONS_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    tenant: str
    id: str
    depth: int
    relations: _containers.RepeatedScalarFieldContainer[str]
    page_size: int
    page_token: str
    def __init__(self, tenant: _Optional[str] = ..., id: _Optional[str] = ..., depth: _Optional[int] = ..., relations: _Optional[_Iterable[str]] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class Hop(_message.Message):
    __slots__ = ("from_id", "to_id", "relation", "weight")
    FROM_ID_FIELD_NUMBER: _ClassVar[int]
    TO_ID_FIELD_NUMBER: _ClassVar[int]
    RELATION_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_FIELD_NUMBER: _ClassVar[int]
    from_id: str
    to_id: str
    relation: str
    weight: float
    def __init__(self, from_id: _Optional[str] = ..., to_id: _Optional[str] = ..., relation: _Optional[str] = ..., weight: _Optional[float] = ...) -> None: ...

class RelatedMemory(_message.Message):
    __slots__ = ("memory", "path")
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    memory: Memory
    path: _containers.RepeatedCompositeFieldContainer[Hop]
    def __init__(self, memory: _Optional[_Union[Memory, _Mapping]] = ..., path: _Optional[_Iterable[_Union[Hop, _Mapping]]] = ...) -> None: ...

class RelatedResponse(_message.Message):
    __slots__ = ("memories", "next_page_token")
    MEMORIES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    memories: _containers.RepeatedCompositeFieldContainer[RelatedMemory]
    next_page_token: str
    def __init__(self, memories: _Optional[_Iterable[_Union[RelatedMemory, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class EntitiesRequest(_message.Message):
    __slots__ = ("tenant", "entity", "page_size", "page_token")
    TENANT_FIELD_NUMBER: _ClassVar[int]
    ENTITY_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    tenant: str
    entity: str
    page_size: int
    page_token: str
    def __init__(self, tenant: _Optional[str] = ..., entity: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class Entity(_message.Message):
    __slots__ = ("id", "kind", "key", "mentions")
    ID_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    MENTIONS_FIELD_NUMBER: _ClassVar[int]
    id: str
    kind: str
    key: str
    mentions: int
    def __init__(self, id: _Optional[str] = ..., kind: _Optional[str] = ..., key: _Optional[str] = ..., mentions: _Optional[int] = ...) -> None: ...

class EntityProfile(_message.Message):
    __slots__ = ("entity", "first_seen", "last_seen", "most_recalled", "summary", "summary_id")
    ENTITY_FIELD_NUMBER: _ClassVar[int]
    FIRST_SEEN_FIELD_NUMBER: _ClassVar[int]
    LAST_SEEN_FIELD_NUMBER: _ClassVar[int]
    MOST_RECALLED_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_ID_FIELD_NUMBER: _ClassVar[int]
    entity: Entity
    first_seen: _timestamp_pb2.Timestamp
    last_seen: _timestamp_pb2.Timestamp
    most_recalled: _containers.RepeatedCompositeFieldContainer[Memory]
    summary: str
    summary_id: str
    def __init__(self, entity: _Optional[_Union[Entity, _Mapping]] = ..., first_seen: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., last_seen: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., most_recalled: _Optional[_Iterable[_Union[Memory, _Mapping]]] = ..., summary: _Optional[str] = ..., summary_id: _Optional[str] = ...) -> None: ...

class EntitiesResponse(_message.Message):
    __slots__ = ("entities", "next_page_token", "profile")
    ENTITIES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    PROFILE_FIELD_NUMBER: _ClassVar[int]
    entities: _containers.RepeatedCompositeFieldContainer[Entity]
    next_page_token: str
    profile: EntityProfile
    def __init__(self, entities: _Optional[_Iterable[_Union[Entity, _Mapping]]] = ..., next_page_token: _Optional[str] = ..., profile: _Optional[_Union[EntityProfile, _Mapping]] = ...) -> None: ...

class FeedbackRequest(_message.Message):
    __slots__ = ("tenant", "id", "verdict")
    TENANT_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    VERDICT_FIELD_NUMBER: _ClassVar[int]
    tenant: str
    id: str
    verdict: Verdict
    def __init__(self, tenant: _Optional[str] = ..., id: _Optional[str] = ..., verdict: _Optional[_Union[Verdict, str]] = ...) -> None: ...

class FeedbackResponse(_message.Message):
    __slots__ = ("memory", "importance_before")
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    IMPORTANCE_BEFORE_FIELD_NUMBER: _ClassVar[int]
    memory: Memory
    importance_before: float
    def __init__(self, memory: _Optional[_Union[Memory, _Mapping]] = ..., importance_before: _Optional[float] = ...) -> None: ...

class ReflectRequest(_message.Message):
    __slots__ = ("tenant", "dry_run", "window", "entities")
    TENANT_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    WINDOW_FIELD_NUMBER: _ClassVar[int]
    ENTITIES_FIELD_NUMBER: _ClassVar[int]
    tenant: str
    dry_run: bool
    window: int
    entities: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, tenant: _Optional[str] = ..., dry_run: _Optional[bool] = ..., window: _Optional[int] = ..., entities: _Optional[_Iterable[str]] = ...) -> None: ...

class Insight(_message.Message):
    __slots__ = ("id", "content", "entity", "source_ids", "created")
    ID_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    ENTITY_FIELD_NUMBER: _ClassVar[int]
    SOURCE_IDS_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    id: str
    content: str
    entity: str
    source_ids: _containers.RepeatedScalarFieldContainer[str]
    created: bool
    def __init__(self, id: _Optional[str] = ..., content: _Optional[str] = ..., entity: _Optional[str] = ..., source_ids: _Optional[_Iterable[str]] = ..., created: _Optional[bool] = ...) -> None: ...

class EntitySummary(_message.Message):
    __slots__ = ("entity", "summary", "id", "source_ids")
    ENTITY_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    SOURCE_IDS_FIELD_NUMBER: _ClassVar[int]
    entity: str
    summary: str
    id: str
    source_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, entity: _Optional[str] = ..., summary: _Optional[str] = ..., id: _Optional[str] = ..., source_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class ReflectResponse(_message.Message):
    __slots__ = ("insights", "summaries", "dry_run", "memories_read", "model_calls", "model_tokens")
    INSIGHTS_FIELD_NUMBER: _ClassVar[int]
    SUMMARIES_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    MEMORIES_READ_FIELD_NUMBER: _ClassVar[int]
    MODEL_CALLS_FIELD_NUMBER: _ClassVar[int]
    MODEL_TOKENS_FIELD_NUMBER: _ClassVar[int]
    insights: _containers.RepeatedCompositeFieldContainer[Insight]
    summaries: _containers.RepeatedCompositeFieldContainer[EntitySummary]
    dry_run: bool
    memories_read: int
    model_calls: int
    model_tokens: int
    def __init__(self, insights: _Optional[_Iterable[_Union[Insight, _Mapping]]] = ..., summaries: _Optional[_Iterable[_Union[EntitySummary, _Mapping]]] = ..., dry_run: _Optional[bool] = ..., memories_read: _Optional[int] = ..., model_calls: _Optional[int] = ..., model_tokens: _Optional[int] = ...) -> None: ...

class StartReflectionRequest(_message.Message):
    __slots__ = ("reflection", "request_id")
    REFLECTION_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    reflection: ReflectRequest
    request_id: str
    def __init__(self, reflection: _Optional[_Union[ReflectRequest, _Mapping]] = ..., request_id: _Optional[str] = ...) -> None: ...

class StartReflectionResponse(_message.Message):
    __slots__ = ("operation",)
    OPERATION_FIELD_NUMBER: _ClassVar[int]
    operation: Operation
    def __init__(self, operation: _Optional[_Union[Operation, _Mapping]] = ...) -> None: ...

class Operation(_message.Message):
    __slots__ = ("name", "metadata", "done", "response", "error")
    NAME_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    DONE_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    name: str
    metadata: OperationMetadata
    done: bool
    response: ReflectResponse
    error: OperationError
    def __init__(self, name: _Optional[str] = ..., metadata: _Optional[_Union[OperationMetadata, _Mapping]] = ..., done: _Optional[bool] = ..., response: _Optional[_Union[ReflectResponse, _Mapping]] = ..., error: _Optional[_Union[OperationError, _Mapping]] = ...) -> None: ...

class OperationMetadata(_message.Message):
    __slots__ = ("kind", "tenant", "stage", "request", "memories_read", "model_calls", "planned_model_calls", "model_tokens", "create_time", "update_time", "end_time", "cancel_requested", "automatic")
    KIND_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    STAGE_FIELD_NUMBER: _ClassVar[int]
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    MEMORIES_READ_FIELD_NUMBER: _ClassVar[int]
    MODEL_CALLS_FIELD_NUMBER: _ClassVar[int]
    PLANNED_MODEL_CALLS_FIELD_NUMBER: _ClassVar[int]
    MODEL_TOKENS_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    END_TIME_FIELD_NUMBER: _ClassVar[int]
    CANCEL_REQUESTED_FIELD_NUMBER: _ClassVar[int]
    AUTOMATIC_FIELD_NUMBER: _ClassVar[int]
    kind: str
    tenant: str
    stage: OperationStage
    request: ReflectRequest
    memories_read: int
    model_calls: int
    planned_model_calls: int
    model_tokens: int
    create_time: _timestamp_pb2.Timestamp
    update_time: _timestamp_pb2.Timestamp
    end_time: _timestamp_pb2.Timestamp
    cancel_requested: bool
    automatic: bool
    def __init__(self, kind: _Optional[str] = ..., tenant: _Optional[str] = ..., stage: _Optional[_Union[OperationStage, str]] = ..., request: _Optional[_Union[ReflectRequest, _Mapping]] = ..., memories_read: _Optional[int] = ..., model_calls: _Optional[int] = ..., planned_model_calls: _Optional[int] = ..., model_tokens: _Optional[int] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., update_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., end_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., cancel_requested: _Optional[bool] = ..., automatic: _Optional[bool] = ...) -> None: ...

class OperationError(_message.Message):
    __slots__ = ("code", "message", "reason", "retry_delay")
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    RETRY_DELAY_FIELD_NUMBER: _ClassVar[int]
    code: int
    message: str
    reason: str
    retry_delay: _duration_pb2.Duration
    def __init__(self, code: _Optional[int] = ..., message: _Optional[str] = ..., reason: _Optional[str] = ..., retry_delay: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class GetOperationRequest(_message.Message):
    __slots__ = ("tenant", "name")
    TENANT_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    tenant: str
    name: str
    def __init__(self, tenant: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...

class GetOperationResponse(_message.Message):
    __slots__ = ("operation",)
    OPERATION_FIELD_NUMBER: _ClassVar[int]
    operation: Operation
    def __init__(self, operation: _Optional[_Union[Operation, _Mapping]] = ...) -> None: ...

class WatchOperationRequest(_message.Message):
    __slots__ = ("tenant", "name")
    TENANT_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    tenant: str
    name: str
    def __init__(self, tenant: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...

class WatchOperationResponse(_message.Message):
    __slots__ = ("operation",)
    OPERATION_FIELD_NUMBER: _ClassVar[int]
    operation: Operation
    def __init__(self, operation: _Optional[_Union[Operation, _Mapping]] = ...) -> None: ...

class CancelOperationRequest(_message.Message):
    __slots__ = ("tenant", "name")
    TENANT_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    tenant: str
    name: str
    def __init__(self, tenant: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...

class CancelOperationResponse(_message.Message):
    __slots__ = ("operation",)
    OPERATION_FIELD_NUMBER: _ClassVar[int]
    operation: Operation
    def __init__(self, operation: _Optional[_Union[Operation, _Mapping]] = ...) -> None: ...

class ListOperationsRequest(_message.Message):
    __slots__ = ("tenant", "page_size", "page_token")
    TENANT_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    tenant: str
    page_size: int
    page_token: str
    def __init__(self, tenant: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListOperationsResponse(_message.Message):
    __slots__ = ("operations", "next_page_token")
    OPERATIONS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    operations: _containers.RepeatedCompositeFieldContainer[Operation]
    next_page_token: str
    def __init__(self, operations: _Optional[_Iterable[_Union[Operation, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class ObserveRequest(_message.Message):
    __slots__ = ("tenant", "session_id", "role", "text", "previous", "dry_run", "agent_id", "limit", "max_tokens")
    TENANT_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    PREVIOUS_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    MAX_TOKENS_FIELD_NUMBER: _ClassVar[int]
    tenant: str
    session_id: str
    role: str
    text: str
    previous: _containers.RepeatedScalarFieldContainer[str]
    dry_run: bool
    agent_id: str
    limit: int
    max_tokens: int
    def __init__(self, tenant: _Optional[str] = ..., session_id: _Optional[str] = ..., role: _Optional[str] = ..., text: _Optional[str] = ..., previous: _Optional[_Iterable[str]] = ..., dry_run: _Optional[bool] = ..., agent_id: _Optional[str] = ..., limit: _Optional[int] = ..., max_tokens: _Optional[int] = ...) -> None: ...

class PolicyTrace(_message.Message):
    __slots__ = ("phase", "rule", "importance", "parts", "scores", "probability", "explored", "features", "keep_by")
    class PartsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    class ScoresEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    class FeaturesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    PHASE_FIELD_NUMBER: _ClassVar[int]
    RULE_FIELD_NUMBER: _ClassVar[int]
    IMPORTANCE_FIELD_NUMBER: _ClassVar[int]
    PARTS_FIELD_NUMBER: _ClassVar[int]
    SCORES_FIELD_NUMBER: _ClassVar[int]
    PROBABILITY_FIELD_NUMBER: _ClassVar[int]
    EXPLORED_FIELD_NUMBER: _ClassVar[int]
    FEATURES_FIELD_NUMBER: _ClassVar[int]
    KEEP_BY_FIELD_NUMBER: _ClassVar[int]
    phase: int
    rule: str
    importance: float
    parts: _containers.ScalarMap[str, float]
    scores: _containers.ScalarMap[str, float]
    probability: float
    explored: bool
    features: _containers.ScalarMap[str, float]
    keep_by: str
    def __init__(self, phase: _Optional[int] = ..., rule: _Optional[str] = ..., importance: _Optional[float] = ..., parts: _Optional[_Mapping[str, float]] = ..., scores: _Optional[_Mapping[str, float]] = ..., probability: _Optional[float] = ..., explored: _Optional[bool] = ..., features: _Optional[_Mapping[str, float]] = ..., keep_by: _Optional[str] = ...) -> None: ...

class PolicyDecision(_message.Message):
    __slots__ = ("id", "action", "keep", "trace", "at", "dry_run")
    ID_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    KEEP_FIELD_NUMBER: _ClassVar[int]
    TRACE_FIELD_NUMBER: _ClassVar[int]
    AT_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    id: int
    action: TurnAction
    keep: bool
    trace: PolicyTrace
    at: _timestamp_pb2.Timestamp
    dry_run: bool
    def __init__(self, id: _Optional[int] = ..., action: _Optional[_Union[TurnAction, str]] = ..., keep: _Optional[bool] = ..., trace: _Optional[_Union[PolicyTrace, _Mapping]] = ..., at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., dry_run: _Optional[bool] = ...) -> None: ...

class ObserveResponse(_message.Message):
    __slots__ = ("decision", "memory", "created", "merged_into", "results", "context", "context_tokens")
    DECISION_FIELD_NUMBER: _ClassVar[int]
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    MERGED_INTO_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    decision: PolicyDecision
    memory: Memory
    created: bool
    merged_into: str
    results: _containers.RepeatedCompositeFieldContainer[RecallResult]
    context: str
    context_tokens: int
    def __init__(self, decision: _Optional[_Union[PolicyDecision, _Mapping]] = ..., memory: _Optional[_Union[Memory, _Mapping]] = ..., created: _Optional[bool] = ..., merged_into: _Optional[str] = ..., results: _Optional[_Iterable[_Union[RecallResult, _Mapping]]] = ..., context: _Optional[str] = ..., context_tokens: _Optional[int] = ...) -> None: ...

class GetPolicyRequest(_message.Message):
    __slots__ = ("tenant", "last")
    TENANT_FIELD_NUMBER: _ClassVar[int]
    LAST_FIELD_NUMBER: _ClassVar[int]
    tenant: str
    last: int
    def __init__(self, tenant: _Optional[str] = ..., last: _Optional[int] = ...) -> None: ...

class GetPolicyResponse(_message.Message):
    __slots__ = ("fingerprint", "exploration", "decisions", "phases", "kept", "explored", "rewards", "reward_sum", "updates", "reward_by_rule", "last", "saved_at", "sharing")
    class DecisionsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    class PhasesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    class RewardByRuleEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    FINGERPRINT_FIELD_NUMBER: _ClassVar[int]
    EXPLORATION_FIELD_NUMBER: _ClassVar[int]
    DECISIONS_FIELD_NUMBER: _ClassVar[int]
    PHASES_FIELD_NUMBER: _ClassVar[int]
    KEPT_FIELD_NUMBER: _ClassVar[int]
    EXPLORED_FIELD_NUMBER: _ClassVar[int]
    REWARDS_FIELD_NUMBER: _ClassVar[int]
    REWARD_SUM_FIELD_NUMBER: _ClassVar[int]
    UPDATES_FIELD_NUMBER: _ClassVar[int]
    REWARD_BY_RULE_FIELD_NUMBER: _ClassVar[int]
    LAST_FIELD_NUMBER: _ClassVar[int]
    SAVED_AT_FIELD_NUMBER: _ClassVar[int]
    SHARING_FIELD_NUMBER: _ClassVar[int]
    fingerprint: str
    exploration: float
    decisions: _containers.ScalarMap[str, int]
    phases: _containers.ScalarMap[str, int]
    kept: int
    explored: int
    rewards: int
    reward_sum: float
    updates: int
    reward_by_rule: _containers.ScalarMap[str, float]
    last: _containers.RepeatedCompositeFieldContainer[PolicyDecision]
    saved_at: _timestamp_pb2.Timestamp
    sharing: PolicySharingStatus
    def __init__(self, fingerprint: _Optional[str] = ..., exploration: _Optional[float] = ..., decisions: _Optional[_Mapping[str, int]] = ..., phases: _Optional[_Mapping[str, int]] = ..., kept: _Optional[int] = ..., explored: _Optional[int] = ..., rewards: _Optional[int] = ..., reward_sum: _Optional[float] = ..., updates: _Optional[int] = ..., reward_by_rule: _Optional[_Mapping[str, float]] = ..., last: _Optional[_Iterable[_Union[PolicyDecision, _Mapping]]] = ..., saved_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., sharing: _Optional[_Union[PolicySharingStatus, _Mapping]] = ...) -> None: ...

class PolicySharingStatus(_message.Message):
    __slots__ = ("rounds", "merges", "waiting", "peers", "noise", "released", "epsilon", "delta", "epsilon_budget", "budget_spent")
    ROUNDS_FIELD_NUMBER: _ClassVar[int]
    MERGES_FIELD_NUMBER: _ClassVar[int]
    WAITING_FIELD_NUMBER: _ClassVar[int]
    PEERS_FIELD_NUMBER: _ClassVar[int]
    NOISE_FIELD_NUMBER: _ClassVar[int]
    RELEASED_FIELD_NUMBER: _ClassVar[int]
    EPSILON_FIELD_NUMBER: _ClassVar[int]
    DELTA_FIELD_NUMBER: _ClassVar[int]
    EPSILON_BUDGET_FIELD_NUMBER: _ClassVar[int]
    BUDGET_SPENT_FIELD_NUMBER: _ClassVar[int]
    rounds: int
    merges: int
    waiting: str
    peers: _containers.RepeatedCompositeFieldContainer[PeerSharingStatus]
    noise: float
    released: int
    epsilon: float
    delta: float
    epsilon_budget: float
    budget_spent: bool
    def __init__(self, rounds: _Optional[int] = ..., merges: _Optional[int] = ..., waiting: _Optional[str] = ..., peers: _Optional[_Iterable[_Union[PeerSharingStatus, _Mapping]]] = ..., noise: _Optional[float] = ..., released: _Optional[int] = ..., epsilon: _Optional[float] = ..., delta: _Optional[float] = ..., epsilon_budget: _Optional[float] = ..., budget_spent: _Optional[bool] = ...) -> None: ...

class PeerSharingStatus(_message.Message):
    __slots__ = ("peer", "exchanged", "refused", "last_at", "last_error")
    class RefusedEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    PEER_FIELD_NUMBER: _ClassVar[int]
    EXCHANGED_FIELD_NUMBER: _ClassVar[int]
    REFUSED_FIELD_NUMBER: _ClassVar[int]
    LAST_AT_FIELD_NUMBER: _ClassVar[int]
    LAST_ERROR_FIELD_NUMBER: _ClassVar[int]
    peer: str
    exchanged: int
    refused: _containers.ScalarMap[str, int]
    last_at: _timestamp_pb2.Timestamp
    last_error: str
    def __init__(self, peer: _Optional[str] = ..., exchanged: _Optional[int] = ..., refused: _Optional[_Mapping[str, int]] = ..., last_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., last_error: _Optional[str] = ...) -> None: ...

class SharedPolicy(_message.Message):
    __slots__ = ("fingerprint", "parameters", "counts")
    FINGERPRINT_FIELD_NUMBER: _ClassVar[int]
    PARAMETERS_FIELD_NUMBER: _ClassVar[int]
    COUNTS_FIELD_NUMBER: _ClassVar[int]
    fingerprint: str
    parameters: _containers.RepeatedScalarFieldContainer[float]
    counts: _containers.RepeatedScalarFieldContainer[float]
    def __init__(self, fingerprint: _Optional[str] = ..., parameters: _Optional[_Iterable[float]] = ..., counts: _Optional[_Iterable[float]] = ...) -> None: ...

class ExchangePolicyRequest(_message.Message):
    __slots__ = ("node", "update")
    NODE_FIELD_NUMBER: _ClassVar[int]
    UPDATE_FIELD_NUMBER: _ClassVar[int]
    node: str
    update: SharedPolicy
    def __init__(self, node: _Optional[str] = ..., update: _Optional[_Union[SharedPolicy, _Mapping]] = ...) -> None: ...

class ExchangePolicyResponse(_message.Message):
    __slots__ = ("node", "update")
    NODE_FIELD_NUMBER: _ClassVar[int]
    UPDATE_FIELD_NUMBER: _ClassVar[int]
    node: str
    update: SharedPolicy
    def __init__(self, node: _Optional[str] = ..., update: _Optional[_Union[SharedPolicy, _Mapping]] = ...) -> None: ...

class ResetPolicyRequest(_message.Message):
    __slots__ = ("tenant",)
    TENANT_FIELD_NUMBER: _ClassVar[int]
    tenant: str
    def __init__(self, tenant: _Optional[str] = ...) -> None: ...

class ResetPolicyResponse(_message.Message):
    __slots__ = ("decisions",)
    DECISIONS_FIELD_NUMBER: _ClassVar[int]
    decisions: int
    def __init__(self, decisions: _Optional[int] = ...) -> None: ...

class GetConfigRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetConfigResponse(_message.Message):
    __slots__ = ("settings",)
    SETTINGS_FIELD_NUMBER: _ClassVar[int]
    settings: _containers.RepeatedCompositeFieldContainer[ConfigSetting]
    def __init__(self, settings: _Optional[_Iterable[_Union[ConfigSetting, _Mapping]]] = ...) -> None: ...

class ConfigSetting(_message.Message):
    __slots__ = ("name", "value", "source", "env", "secret")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    ENV_FIELD_NUMBER: _ClassVar[int]
    SECRET_FIELD_NUMBER: _ClassVar[int]
    name: str
    value: str
    source: ConfigSource
    env: str
    secret: bool
    def __init__(self, name: _Optional[str] = ..., value: _Optional[str] = ..., source: _Optional[_Union[ConfigSource, str]] = ..., env: _Optional[str] = ..., secret: _Optional[bool] = ...) -> None: ...
