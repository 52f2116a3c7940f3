"""One typed settings object, built once at the edge (CLI or tests) and passed down.

Every field reads from a ``CELESTIAL_``-prefixed environment variable (lists as JSON, e.g.
``CELESTIAL_ZONE_CAPACITIES='[20,100,1000,0,0]'``) and can be overridden by a CLI flag of
``celestial serve``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from celestial_memory.config_checks import check
from celestial_memory.config_serving import ServingSettings
from pydantic import Field, SecretStr, model_validator
from pydantic_settings import SettingsConfigDict

BUNDLED_MODEL = "all-MiniLM-L6-v2"
# Journaled write-behind on the embedded store: a bound short enough that reads which flush
# first rarely find much to write, long enough that a burst of recalls shares one flush.
DEFAULT_EDGE_FLUSH_MS = 20.0


class Settings(ServingSettings):
    """Every setting: the serving ones (config_serving.py) first, then these."""

    model_config = SettingsConfigDict(env_prefix="CELESTIAL_", extra="ignore")

    # Storage
    backend: Literal["edge", "qdrant"] = Field("edge", description="edge (embedded) or qdrant")
    data_dir: Path = Field(Path("./data"), description="where the embedded store keeps its files")
    # Original vectors memory-mapped, their int8 copies (what the HNSW search reads) in RAM:
    # less memory per memory at the cost of page reads when rescoring (docs/encoder.md).
    vectors_on_disk: bool = Field(
        False, description="keep original vectors and the keyword indexes on disk "
                           "(memory-mapped); int8 copies and the HNSW graph stay in RAM")
    payload_on_disk: bool = Field(
        False, description="keep payloads and their float and keyword indexes on disk "
                           "(memory-mapped); the tenant and zone indexes stay in RAM. Indexes "
                           "take it when they are created")
    qdrant_url: str = Field(":memory:", description="qdrant backend: URL (https: TLS), or :memory: (local)")
    qdrant_api_key: SecretStr | None = Field(None, description="qdrant backend: API key")
    qdrant_host: str = Field("", description="qdrant backend: host (instead of the URL)")
    qdrant_port: int = Field(6333, gt=0, lt=65536, description="qdrant backend: REST port")
    qdrant_grpc_port: int = Field(6334, gt=0, lt=65536, description="qdrant backend: gRPC port")
    qdrant_https: bool = Field(False, description="qdrant backend: TLS (https URLs imply it)")
    qdrant_timeout_s: float = Field(10.0, gt=0, description="qdrant backend: per-call timeout")
    qdrant_retries: int = Field(3, ge=0, description="retries on UNAVAILABLE/RESOURCE_EXHAUSTED")
    qdrant_backoff_s: float = Field(0.2, ge=0, description="first retry delay; doubles, max 5 s")
    qdrant_breaker_failures: int = Field(
        1, ge=1, description="calls in a row finding Qdrant down before calls fail fast")
    qdrant_breaker_cooldown_s: float = Field(
        2.0, gt=0, description="how long calls fail fast before one may try Qdrant again")
    health_interval_s: float = Field(
        1.0, gt=0, description="how often the health check asks whether the store answers")
    # Cluster layout, applied when the collection is created (None: Qdrant's default).
    qdrant_shard_number: int | None = Field(None, gt=0, description="shards of a new collection")
    qdrant_replication_factor: int | None = Field(
        None, gt=0, description="copies of each shard of a new collection")
    qdrant_write_consistency_factor: int | None = Field(
        None, gt=0, description="copies that must apply a write before it is acknowledged")
    collection: str | None = Field(None, description="collection name; default memories_<model>_<dimension>")

    # Embeddings
    model: str = Field(BUNDLED_MODEL, description="sentence-transformers name or path")
    device: str = Field("cpu", description="torch device for the embedding model")
    # Every core by default (torch's own default): a recall's query encodes fastest so, and under
    # load the batched encodes gain too. On a machine shared with another CPU-heavy process, fewer
    # threads avoid oversubscription (docs/design.md, "Concurrency", has the measurements).
    embed_threads: int = Field(
        0, ge=0,
        description="encoder threads; 0 = the encoder's default (torch: all cores; ONNX Runtime: 1)")
    # docs/encoder.md: ONNX Runtime runs the bundled model in a third of torch's time and
    # releases the GIL while it computes; torch stays for other models and as the fallback.
    embed_backend: Literal["auto", "onnx", "torch"] = Field(
        "auto", description="auto (ONNX Runtime where it can run, else torch), onnx or torch")
    # Off by default: int8 vectors are close to fp32's (cosine about 0.99) but not equal, and a
    # store's vectors should all come from one encoder (docs/encoder.md, "int8").
    embed_int8: bool = Field(
        False, description="ONNX Runtime runs an int8 copy of the model (about twice the encode "
                           "rate; vectors at cosine ~0.99 to the fp32 model's)")
    embed_onnx_dir: Path | None = Field(
        None, description="where the ONNX file made from the model is cached; default "
                          "<data_dir>/encoders")
    embed_batch_window_ms: float = Field(
        1.0, ge=0, le=100, description="concurrent calls' texts: wait this long for more")
    embed_max_batch: int = Field(64, gt=0, description="most texts in one encode")
    # ONNX Runtime only (encoding/onnx_encoder.py): a large encode's chunks run this many at a
    # time, each with embed_threads threads; torch uses every core in one encode already.
    embed_lanes: int = Field(
        0, ge=0, le=64,
        description="ONNX Runtime: chunks of a large encode run at once; 0 = cores / threads, at most 8")

    # Memory function (docs/design.md, "The memory function")
    w_recall: float = Field(0.25, ge=0, description="weight of R, the recall count")
    w_freshness: float = Field(0.30, ge=0, description="weight of F, freshness")
    w_importance: float = Field(0.25, ge=0, description="weight of A, importance")
    w_context: float = Field(0.20, ge=0, description="weight of C, context")
    recall_cap: int = Field(1000, gt=0, description="recall count at which R saturates")
    freshness_alpha: float = Field(0.001, gt=0, description="freshness decay per second")
    freshness_floor: float = Field(-86.4, lt=0, description="raw freshness floor")

    # Zones: thresholds on I for core, inner, outer, belt (cloud takes the rest) and
    # capacities for all five (0 = unbounded).
    zone_thresholds: list[float] = Field(default_factory=lambda: [0.50, 0.30, 0.10, -0.10],
                                         description="core, inner, outer, belt minimum scores")
    zone_capacities: list[int] = Field(default_factory=lambda: [20, 100, 1000, 0, 0],
                                       description="capacity of each zone, core to cloud; 0 = unbounded")

    # A model: the OpenAI-compatible chat endpoint every model-backed feature asks
    # (understanding/chat.py). Memories are sent to it: point it at a model you trust with them.
    llm_base_url: str = Field(
        "", description="the model endpoint's base URL, e.g. http://localhost:11434/v1")
    llm_model: str = Field("", description="the model to ask")
    llm_api_key: SecretStr | None = Field(None, description="the model endpoint's API key")
    llm_timeout_s: float = Field(30.0, gt=0, description="longest one model call may take")
    # Understanding (understanding/): "llm" queues every new memory for the model, which adds
    # entities and subject-relation-object triples after the Store has answered.
    extractor: Literal["rules", "llm"] = Field(
        "rules", description="rules: entities by rules at store time; llm: a model adds more later")
    understand_batch: int = Field(8, gt=0, le=64, description="memories sent in one model call")
    understand_calls_per_minute: float = Field(
        60.0, gt=0, description="model calls per tenant per minute, at most")
    understand_tokens_per_minute: int = Field(
        100_000, gt=0, description="model tokens per tenant per minute, at most")
    understand_max_tries: int = Field(
        5, gt=0, description="tries of a memory before it is left with its error recorded")
    understand_backoff_s: float = Field(
        10.0, gt=0, description="wait before a failed memory is tried again (doubled each try)")
    understand_poll_s: float = Field(
        1.0, gt=0, description="how often an idle queue is looked at")
    # Three resolutions (understanding/resolutions.py): a memory's one-line summary, by rules
    # at store time and by the model with extractor=llm.
    summary_max_chars: int = Field(
        160, ge=20, le=1000, description="longest one-line summary of a memory, in characters")
    # Reflection (reflection/): insights about the entities of a tenant's recent memories, by
    # the llm_* model; Reflect is refused without one.
    reflect_after: int = Field(
        0, ge=0, description="reflect on a tenant after this many new memories; 0 = only on request")
    reflect_window: int = Field(
        200, gt=0, le=2000, description="newest memories of a tenant one reflection reads")
    reflect_max_entities: int = Field(
        8, gt=0, le=64, description="entities one reflection writes about (most mentioned first)")
    reflect_min_mentions: int = Field(
        2, gt=0, description="memories of the window an entity needs to be reflected on")
    reflect_entities_per_call: int = Field(
        4, gt=0, le=16, description="entities sent to the model in one call")
    reflect_max_insights: int = Field(
        3, gt=0, le=10, description="insights kept per entity")

    # Importance
    importance_evaluator: Literal["rules", "default", "llm"] = Field(
        "rules", description="importance of a memory stored without one: rules, a constant, a model")
    # "llm": the model rates new memories (understanding/llm_importance.py); its endpoint, model and key are
    # the llm_* settings unless these override them.
    importance_llm_base_url: str = Field(
        "", description="llm evaluator: another endpoint than CELESTIAL_LLM_BASE_URL")
    importance_llm_model: str = Field("", description="llm evaluator: another model than llm_model")
    importance_llm_api_key: SecretStr | None = Field(
        None, description="llm evaluator: another API key than llm_api_key")
    importance_llm_budget_ms: float = Field(
        1500.0, gt=0, description="llm evaluator: longest a Store waits before using the rules")
    importance_llm_cache_size: int = Field(10_000, ge=0, description="llm evaluator: texts rated")
    default_importance: float = Field(0.5, ge=0, le=1, description="the default evaluator's value")

    # Recall (recall/retrieval.py): relevance gate, zone margin, fusion weights, candidates
    min_relevance: float = Field(0.2, ge=0, le=1, description="relevance gate for a match")
    zone_margin: float = Field(
        0.95, ge=0, le=1, description="an inner zone goes first within this share of the best"
    )
    relevance_weights: list[float] = Field(
        default_factory=lambda: [1.0, 0.5, 0.5, 0.5],
        description="dense, context dense, keywords, context keywords",
    )
    recall_candidates: int = Field(30, gt=0, description="candidates per zone (at least 3 × the limit)")
    ranker: Literal["learned", "weights"] = Field(
        "learned", description="a recall's order within the zone tiers: the learned model "
        "(ranking/) or the weighted relevance alone; the relevance gates either way")
    ranker_model: Path | None = Field(
        None, description="the learned model's folder (card.json and ranker.txt, as make "
        "train-ranker writes them); unset: the shipped model")
    ranker_feedback: bool = Field(
        False, description="Feedback votes tune each tenant's learned ranking (ranking/tuning.py)")
    ranker_feedback_rate: float = Field(
        0.05, gt=0, le=1, description="learning rate of one vote's update of the tenant's weights")
    ranker_feedback_bound: float = Field(
        1.0, gt=0, le=10, description="most the votes move a learned score; each weight's bound")
    recall_hnsw_ef: int = Field(
        48, ge=0, description="HNSW beam for candidates (at least the candidates; 0 = engine's)"
    )
    keyword_k1: float = Field(1.2, gt=0, description="BM25 term saturation")
    keyword_b: float = Field(0.4, ge=0, le=1, description="BM25 length normalisation")
    keyword_avg_len: float = Field(14.0, gt=0, description="BM25 average content length (terms)")
    context_keyword_avg_len: float = Field(34.0, gt=0, description="same, content plus context")
    max_context_chars: int = Field(32_768, gt=0, description="longest context text")
    # The encoder reads a text's first 256 tokens (about 1,000 characters of English); a
    # longer memory is also embedded in short passages (recall/passages.py).
    passages_over_chars: int = Field(
        1000, ge=0, description="a memory longer than this is also embedded in passages; 0 = never")
    passage_chars: int = Field(
        300, ge=40, le=1000, description="widest passage (characters; one outside ASCII counts 4)")
    default_recall_limit: int = Field(10, gt=0, description="results of a recall that sets no limit")
    max_recall_limit: int = Field(100, gt=0, description="largest recall limit")
    max_prompt_tokens: int = Field(32_768, gt=0, description="the largest Context block asked for")

    # Input limits
    max_content_chars: int = Field(32_768, gt=0, description="longest content")
    max_batch: int = Field(10_000, gt=0, description="most items in one StoreBatch")
    max_batch_bytes: int = Field(
        64 * 2**20, gt=0, description="most bytes of one StoreBatch's messages together")
    max_tags: int = Field(64, gt=0, le=4096, description="most tags on one memory")
    max_metadata_entries: int = Field(
        64, gt=0, le=4096, description="most metadata entries on one memory")
    max_metadata_value_chars: int = Field(1024, gt=0, description="one metadata value")
    max_label_chars: int = Field(256, gt=0, description="a tag, session id or agent id")
    max_tenant_chars: int = Field(128, gt=0, description="a tenant's name")
    max_merged_bytes: int = Field(
        1024 * 1024, gt=0, description="wording of merged repeats a memory keeps (UTF-8 bytes)")

    # Rebalance
    rebalance_interval_s: float = Field(300.0, ge=0, description="0 disables the schedule")
    capacity_interval_ms: float = Field(
        1000.0, ge=0, le=10_000, description="capacity after reinforcements: at most this late"
    )
    background_yield_ms: float = Field(
        200.0, ge=0, le=10_000,
        description="background writes wait at most this long for a moment with no call; 0 = never")
    optimize_interval_s: float = Field(
        120.0, ge=0, description="embedded store: build vector indexes this often; 0 = never"
    )
    auto_forget_days: float = Field(
        90.0, gt=0, description="archive unpinned cloud memories not recalled for this many days")
    archive_retention_days: float = Field(
        0.0, ge=0, description="delete archived memories for good after this long; 0 = never")
    merge_repeats: bool = Field(
        True, description="a Store that repeats a live memory reinforces it instead (memory/repeats.py)")
    merge_similarity: float = Field(
        0.9, gt=0, le=1, description="content cosine at or above which a repeat may merge")
    # The turn policy (policy/, memory/observing.py; docs/design.md, "The turn policy")
    policy_save_s: float = Field(
        1.0, ge=0, le=60, description="each tenant's turn policy is saved this often at most "
        "after it changes (0: before every Observe answers); a kill loses what it learnt since")
    policy_exploration: float = Field(
        0.05, ge=0, le=0.5, description="share of the turn policy's bandit decisions drawn at "
        "random (exploration: every action keeps a known chance, so the log can evaluate "
        "another policy)")
    # Sharing what the turn policies learnt with other nodes (sharing/; docs/sharing.md). Off
    # unless peers are listed.
    policy_peers: list[str] = Field(
        default_factory=list, description="host:port of the nodes this one shares its turn "
        "policy's parameters with (gossip); empty: sharing off")
    policy_share_address: str = Field(
        "", description="this node's host:port as its peers list it; empty: the address")
    policy_share_interval_s: float = Field(
        30.0, ge=0.2, le=86_400, description="a gossip round every this many seconds")
    policy_share_fanout: int = Field(
        2, ge=1, le=64, description="peers dialled each round, at random")
    policy_share_tenants: list[str] = Field(
        default_factory=list, description="tenants whose policies are shared and take the "
        "peers' aggregate; empty: every tenant whose policy this node holds")
    policy_share_aggregation: Literal["multi-krum", "mean"] = Field(
        "multi-krum", description="how the peers' updates are combined: Multi-Krum "
        "(tolerates policy_share_byzantine bad peers) or a plain mean (a baseline: one bad "
        "peer moves it anywhere)")
    policy_share_krum_keep: int = Field(
        0, ge=0, le=64, description="updates Multi-Krum averages, the most central first (0: "
        "all but policy_share_byzantine; 2 holds one bad peer closer, docs/design.md)")
    policy_share_evidence: Literal["typical", "sum"] = Field(
        "typical", description="the evidence a merged arm carries: a typical peer's, or the "
        "sum of every node's (each then sends only what it learnt itself, so nothing counts "
        "twice: surer, as one policy on all their data)")
    policy_share_byzantine: int = Field(
        1, ge=0, le=16, description="bad peers Multi-Krum tolerates: a merge waits for more "
        "than 2f + 2 updates, its own included")
    policy_peer_key: SecretStr | None = Field(
        None, description="the API key this node presents to its peers (a peer-role key in "
        "their key files)")
    policy_peer_ca: Path | None = Field(
        None, description="CA (PEM) that signs the peers' certificates; set: peers are dialled "
        "over TLS")
    policy_peer_cert: Path | None = Field(
        None, description="this node's client certificate (PEM) toward peers that ask for one")
    policy_peer_cert_key: Path | None = Field(None, description="its private key (PEM)")
    policy_share_noise: float = Field(
        0.0, ge=0, le=100, description="Gaussian noise multiplier on each update sent (0: none); "
        "with noise, the privacy spent is accounted (the privacy extra)")
    policy_share_epsilon: float = Field(
        0.0, ge=0, description="privacy budget: once the updates sent have spent this epsilon, "
        "the node sends no more (0: no budget)")
    policy_share_delta: float = Field(
        1e-6, gt=0, lt=1, description="the delta epsilon is accounted at")
    # Feedback (understanding/feedback.py; docs/design.md, "Types, protection and feedback")
    feedback_step: float = Field(
        0.2, gt=0, le=1, description="share of the way to 1 (helpful) or 0 a vote moves importance")
    # Connected memory (graph/; docs/design.md, "Connected memory")
    max_relations: int = Field(
        256, gt=0, description="relations one memory may hold (both directions)")
    session_weight: float = Field(
        0.5, ge=0, le=1, description="weight of the relation from a memory to its session's previous one")
    recall_expand: int = Field(
        0, ge=0, le=2, description="graph expansion of a recall: steps along relations (0: off)")
    entity_weight: float = Field(
        0.1, ge=0, le=1,
        description="recall: weight of the query's entities a memory mentions; 0 turns it off")
    graph_weight: float = Field(
        0.3, ge=0, le=1, description="share of a neighbour's relevance its seed can lift")
    deep_recall: bool = Field(
        True, description="a recall that finds fewer than its limit also searches the archive")
    # A live result counts toward the limit a deep recall needs only at this relevance: at the
    # plain gate (0.2) ten weak matches always turn up in a large tenant and the archive would
    # never be searched (docs/design.md, "Forgetting", has the measurements).
    deep_recall_gate: float = Field(
        0.75, ge=0, le=1, description="relevance a live result needs to spare the archive search")
    rebalance_lease_s: float = Field(60.0, gt=0, description="replicas: rebalance lease expiry")
    # The same host and address after a restart is the same replica: a server killed while it
    # held the rebalance lease takes it back at once instead of waiting for it to expire. Two
    # replicas on one host bind different addresses, so they never share a name.
    instance_id: str = Field(
        "", description="this replica's name in the rebalance lease; default host/address")

    # Reinforcement: 0 = written before the Recall returns; > 0 = written behind, within this
    # bound, journaled first when ``reinforce_journal`` (zones/reinforcement.py). Unset: journaled
    # write-behind on the embedded store, whose data directory the journal shares;
    # write-through on a Qdrant server, whose replicas may have no disk of their own.
    reinforce_flush_ms: float | None = Field(
        None, ge=0, le=100,
        description="0 = write-through; else the write-behind bound; unset: 20 on edge, 0 on qdrant")
    reinforce_journal: bool = Field(
        True, description="journal reinforcements written behind, so a crash loses none")

    default_tenant: str = Field("default", description="tenant of requests that name none")
    # Replays of history: lets an admin call set the server's clock (SetClock). Off by default;
    # when on, the scheduled rebalance is off too (the replay decides when to rebalance).
    admin_clock: bool = Field(
        False, description="allow the admin SetClock RPC (replays); turns the scheduled rebalance off")
    log_level: str = Field("INFO", description="DEBUG, INFO, WARNING or ERROR")
    log_format: Literal["text", "json"] = Field(
        "text", description="json: one JSON object per line (request id, tenant, method, status)")
    # Observability (observability/metrics.py, ops/http.py, observability/telemetry.py)
    metrics_address: str = Field(
        "", description="host:port serving /metrics and /orrery over HTTP; empty: off")
    metrics_top_tenants: int = Field(
        10, ge=0, description="tenants with zone gauges of their own; the rest are 'other'")
    metrics_zone_refresh_s: float = Field(
        15.0, ge=0, description="zone gauges are read from the store at most this often")
    orrery_max_dots: int = Field(
        3000, gt=0, description="most memories the orrery draws; a larger tenant is sampled")
    metrics_hide_tenants: bool = Field(
        False, description="/metrics labels tenants by a hash instead of their names")
    otlp_endpoint: str = Field(
        "", description="OTLP/gRPC collector for traces (the otel extra); empty: no tracing")

    @model_validator(mode="after")
    def _check(self) -> Settings:
        check(self)
        return self

    def largest_memory_bytes(self) -> int:
        """The most one memory can take in an answer or an export item: every text at its limit
        in 4-byte characters, its merged repeats, summary and triples, two vectors of a large
        model and framing. A
        memory must always fit one message, or it could be neither read nor exported."""
        label = 4 * self.max_label_chars + 8
        metadata = self.max_metadata_entries * (64 + 4 * self.max_metadata_value_chars + 16)
        texts = 4 * (self.max_content_chars + self.max_context_chars) + 16
        vectors = 2 * 4 * 4096
        # Its summary and triples: the rules' or the model's, whichever is longer (16 triples of
        # three 120-character parts, a 300-character summary: understanding/extraction.py).
        understood = 4 * (max(self.summary_max_chars, 300) + 16 * 3 * 120) + 16 * 16
        return (texts + metadata + (self.max_tags + 2) * label + self.max_merged_bytes
                + vectors + understood + 4096)

    def reinforce_flush_s(self) -> float:
        """The write-behind bound in seconds; 0 = write-through."""
        if self.reinforce_flush_ms is not None:
            return self.reinforce_flush_ms / 1000
        return DEFAULT_EDGE_FLUSH_MS / 1000 if self.backend == "edge" else 0.0

    @property
    def has_model(self) -> bool:
        """Whether a chat model is configured (the llm_* settings)."""
        return bool(self.llm_base_url and self.llm_model)

    def collection_name(self, dimension: int) -> str:
        if self.collection:
            return self.collection
        slug = "".join(ch if ch.isalnum() else "_" for ch in Path(self.model).name.lower())
        return f"memories_{slug}_{dimension}"
