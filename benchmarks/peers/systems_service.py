"""The systems that run in the service's own virtual environment: Celestial Memory through gRPC,
and the floors (the raw model and the raw engine the service embeds, with no service around)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any, ClassVar

from harness import Conversation, Dataset, System, Turn, free_port, summary, timed


def _versions(*names: str) -> dict[str, str]:
    return {n: metadata.version(n) for n in names}


class Celestial(System):
    """``celestial serve`` as a subprocess on the default embedded store, called through the
    Python client over loopback."""

    name = "celestial"
    extra_env: ClassVar[dict[str, str]] = {}
    # The server builds its HNSW index on a timer (here 5 s, see open): the window must outlast
    # it, so that a build due after the last write has started before the window ends.
    idle_window_s = 12.0

    def open(self, data: Dataset, root: Path) -> None:
        from celestial_client import CelestialClient

        self._dir = root / "celestial-data"
        bin_dir = Path(sys.executable).parent
        port = free_port()
        self.target = f"127.0.0.1:{port}"
        env = {
            **os.environ,
            "CELESTIAL_DATA_DIR": str(self._dir),
            "CELESTIAL_ADDRESS": self.target,
            # The protocol's "now" follows the conversation (set_clock); with the admin clock
            # the server also runs no scheduled rebalance, so nothing is forgotten mid-run.
            "CELESTIAL_ADMIN_CLOCK": "true",
            # Build the index soon after ingest instead of within 120 s: the timed recalls
            # should see the indexed store a long-running server has.
            "CELESTIAL_OPTIMIZE_INTERVAL_S": "5",
            "HF_HUB_OFFLINE": "1",
            "TOKENIZERS_PARALLELISM": "false",
            **self.extra_env,
        }
        self._log = (root / "celestial-server.log").open("w")
        self._proc = subprocess.Popen([str(bin_dir / "celestial"), "serve"], env=env,
                                      stdout=self._log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 300
        health = [sys.executable, "-m", "celestial_memory.ops.healthcheck", self.target]
        while subprocess.run(health, capture_output=True).returncode != 0:
            if self._proc.poll() is not None or time.monotonic() > deadline:
                # The log lives in the run's temp folder, which goes with the run: quote it.
                self._log.flush()
                tail = Path(self._log.name).read_text()[-2000:]
                raise RuntimeError(f"celestial serve did not come up:\n{tail}")
            time.sleep(0.5)
        self._client = CelestialClient(self.target, timeout=600)
        self._clients: dict[str, Any] = {}

    def _c(self, coll: str) -> Any:
        if coll not in self._clients:
            self._clients[coll] = self._client.with_options(tenant=coll)
        return self._clients[coll]

    def data_pid(self) -> int:
        return self._proc.pid

    def data_dir(self) -> Path:
        return self._dir

    def _items(self, turns: Sequence[Turn], context: bool, created: bool) -> list[Any]:
        from celestial_client import StoreItem

        return [StoreItem(content=t.text, metadata=t.metadata(), session_id=f"session_{t.session}",
                          created_at=t.created_at if created else None,
                          context=t.context if context else "")
                for t in turns]

    def ingest(self, coll: str, turns: Sequence[Turn]) -> None:
        self._c(coll).store_batch(self._items(turns, context=False, created=False))

    def add(self, coll: str, turn: Turn) -> None:
        self._c(coll).store(self._items([turn], context=False, created=False)[0])

    @staticmethod
    def _ids(results: Any) -> list[str]:
        return [r.memory.metadata.get("dia_id", "") for r in results]

    def text_recall(self, coll: str, query: str, k: int) -> list[str]:
        return self._ids(self._c(coll).recall(query, k))

    def _plain(self, coll: str, query: str, k: int) -> list[str]:
        return self._ids(self._c(coll).recall(query, k, reinforce=False))

    def vector_recall(self, coll: str, vector: Sequence[float], k: int) -> list[str]:
        return self._ids(self._c(coll).recall("", k, query_vector=vector))

    def extra_text_recalls(self) -> dict[str, Callable[[str, str, int], list[str]]]:
        return {"no_reinforce": self._plain}

    def variants(self) -> list[str]:
        # "": the protocol's input, the same as every peer gets; "context": also the two
        # previous turns as each memory's context, as `make eval-locomo` stores them.
        return ["", "context"]

    def load_conversation(self, coll: str, conv: Conversation, variant: str, batch: int) -> None:
        # As `celestial eval locomo`'s zone setting: the clock follows the sessions and a
        # rebalance (without forgetting) follows each; recall then runs with its defaults.
        c = self._c(coll)
        for start, turns in conv.sessions:
            self._client.set_clock(start + len(turns))
            c.store_batch(self._items(turns, context=variant == "context", created=True))
            c.rebalance(forget=False)

    def before_questions(self, coll: str, conv: Conversation) -> None:
        self._client.set_clock(conv.sessions[-1][0] + 3600)
        self._c(coll).rebalance(forget=False)

    def extra_results(self) -> dict[str, Any]:
        # The server's background index builds over the whole run, from its log.
        self._log.flush()
        builds = [float(m) for m in re.findall(r"vector indexes built in ([0-9.]+) s",
                                                Path(self._log.name).read_text())]
        return {"index_builds": {"count": len(builds), "seconds": sum(builds)}}

    def versions(self) -> dict[str, str]:
        return _versions("celestial-memory", "celestial-memory-client", "qdrant-edge-py", "torch",
                         "sentence-transformers", "grpcio")

    def close(self) -> None:
        self._client.close()
        self._proc.terminate()
        self._proc.wait(timeout=60)
        self._log.close()
        shutil.rmtree(self._dir, ignore_errors=True)


class CelestialInt8(Celestial):
    """The same, with the encoder on the model's int8 copy (CELESTIAL_EMBED_INT8)."""

    name = "celestial-int8"
    extra_env: ClassVar[dict[str, str]] = {"CELESTIAL_EMBED_INT8": "true"}


class Floor(System):
    """The raw model and Qdrant Edge configured as the service configures its content vector
    (cosine, int8 scalar quantization kept in RAM, HNSW), searched as the service searches it
    (beam 48, rescored with oversampling 2), one shard per collection, no service around."""

    name = "floor"

    def open(self, data: Dataset, root: Path) -> None:
        import qdrant_edge as qe
        import torch
        from sentence_transformers import SentenceTransformer

        if data.torch_threads > 0:  # as the service: 0 leaves torch's default
            torch.set_num_threads(data.torch_threads)
        self._qe = qe
        self._model = SentenceTransformer(data.model_path, device="cpu")
        self._dir = root / "floor-data"
        self._shards: dict[str, Any] = {}
        self._next_id = 0
        self._params = qe.SearchParams(hnsw_ef=48, quantization=qe.QuantizationSearchParams(
            rescore=True, oversampling=2.0))
        self._warmup = len(data.warmup)  # the first bench recalls are the warm-up's
        self.encode_ms: list[float] = []
        self.search_ms: list[float] = []

    def _shard(self, coll: str) -> Any:
        qe = self._qe
        if coll not in self._shards:
            path = self._dir / coll
            path.mkdir(parents=True)
            config = qe.EdgeConfig(vectors={"dense": qe.EdgeVectorParams(
                size=self._model.get_embedding_dimension(), distance=qe.Distance.Cosine,
                quantization_config=qe.ScalarQuantizationConfig(qe.ScalarType.Int8, always_ram=True),
            )})
            self._shards[coll] = qe.EdgeShard.create(str(path), config)
        return self._shards[coll]

    def _encode(self, texts: list[str]) -> Any:
        # The service's encode call (encoding/embedding.py).
        return self._model.encode(texts, batch_size=64, normalize_embeddings=True,
                                  convert_to_numpy=True, show_progress_bar=False)

    def ingest(self, coll: str, turns: Sequence[Turn]) -> None:
        qe = self._qe
        vectors = self._encode([t.text for t in turns])
        points = [qe.Point(self._next_id + i, {"dense": v.tolist()}, t.metadata())
                  for i, (t, v) in enumerate(zip(turns, vectors, strict=True))]
        self._next_id += len(points)
        self._shard(coll).update(qe.UpdateOperation.upsert_points(points))

    def add(self, coll: str, turn: Turn) -> None:
        self.ingest(coll, [turn])

    def _search(self, coll: str, vector: Sequence[float], k: int) -> list[str]:
        qe = self._qe
        hits = self._shard(coll).query(qe.QueryRequest(
            limit=k, query=qe.Query.Nearest(list(vector), using="dense"), with_payload=True,
            params=self._params))
        return [(h.payload or {}).get("dia_id", "") for h in hits]

    def text_recall(self, coll: str, query: str, k: int) -> list[str]:
        # Encode and search timed apart as well, so that the table can show each floor.
        enc_ms, vecs = timed(self._encode, [query])
        search_ms, got = timed(self._search, coll, vecs[0].tolist(), k)
        if coll == "bench":
            self.encode_ms.append(enc_ms)
            self.search_ms.append(search_ms)
        return got

    def vector_recall(self, coll: str, vector: Sequence[float], k: int) -> list[str]:
        return self._search(coll, vector, k)

    def before_questions(self, coll: str, conv: Conversation) -> None:
        self._shard(coll).optimize()

    def after_ingest(self, coll: str) -> None:
        # The HNSW build the service runs in the background, here in the foreground.
        self._shard(coll).optimize()

    def extra_results(self) -> dict[str, Any]:
        w = self._warmup
        return {"encode_one": summary(self.encode_ms[w:]), "search_one": summary(self.search_ms[w:])}

    def data_dir(self) -> Path:
        return self._dir

    def versions(self) -> dict[str, str]:
        import torch

        return {**_versions("qdrant-edge-py", "torch", "sentence-transformers", "transformers"),
                "torch threads": str(torch.get_num_threads())}

    def close(self) -> None:
        for shard in self._shards.values():
            shard.close()
        shutil.rmtree(self._dir, ignore_errors=True)


class OnnxFloor(Floor):
    """The service's own encoder (ONNX Runtime, as ``celestial serve`` opens it: same model
    file, precision and threads) and Qdrant Edge searched the way a hybrid search needs at the
    least: the content vector (as the floor) and a BM25 keyword vector (the service's keyword
    encoder, IDF applied by the engine), one query fusing both by RRF, in-process. The service
    does more per recall (five zone searches, exact rescoring by four signals, entities, the
    memory function, reinforcement); this floor is what a hybrid search costs before any of
    that."""

    name = "floor-onnx"

    def open(self, data: Dataset, root: Path) -> None:
        import qdrant_edge as qe
        from celestial_memory.config import Settings
        from celestial_memory.encoding.choice import open_encoder
        from celestial_memory.recall.keywords import KeywordEncoder

        settings = Settings()
        self._qe = qe
        self._encoder = open_encoder(settings)
        self._keywords = KeywordEncoder(settings.keyword_k1, settings.keyword_b,
                                        settings.keyword_avg_len, settings.context_keyword_avg_len)
        self._dir = root / "floor-onnx-data"
        self._shards = {}
        self._next_id = 0
        self._params = qe.SearchParams(hnsw_ef=48, quantization=qe.QuantizationSearchParams(
            rescore=True, oversampling=2.0))
        self._warmup = len(data.warmup)
        self._candidates = settings.recall_candidates
        self.encode_ms = []
        self.search_ms = []

    def _shard(self, coll: str) -> Any:
        qe = self._qe
        if coll not in self._shards:
            path = self._dir / coll
            path.mkdir(parents=True)
            config = qe.EdgeConfig(
                vectors={"dense": qe.EdgeVectorParams(
                    size=self._encoder.dimension, distance=qe.Distance.Cosine,
                    quantization_config=qe.ScalarQuantizationConfig(qe.ScalarType.Int8,
                                                                    always_ram=True))},
                sparse_vectors={"keywords": qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf)})
            self._shards[coll] = qe.EdgeShard.create(str(path), config)
        return self._shards[coll]

    def _encode(self, texts: list[str]) -> Any:
        # What the service computes for a query: its vector and its keyword vector.
        return [(v, self._keywords.query(t)) for t, v in
                zip(texts, self._encoder.embed(texts), strict=True)]

    def ingest(self, coll: str, turns: Sequence[Turn]) -> None:
        qe = self._qe
        texts = [t.text for t in turns]
        vectors = [v for s in range(0, len(texts), 64) for v in self._encoder.embed(texts[s:s + 64])]
        points = []
        for i, (t, v) in enumerate(zip(turns, vectors, strict=True)):
            kw = self._keywords.document(t.text)
            points.append(qe.Point(self._next_id + i, {
                "dense": list(map(float, v)), "keywords": qe.SparseVector(kw.indices, kw.values)},
                t.metadata()))
        self._next_id += len(points)
        self._shard(coll).update(qe.UpdateOperation.upsert_points(points))

    def _hybrid(self, coll: str, vector: Sequence[float], keywords: Any, k: int) -> list[str]:
        qe = self._qe
        dense = qe.Query.Nearest(list(map(float, vector)), using="dense")
        if keywords is None or not len(keywords.indices):
            request = qe.QueryRequest(limit=k, query=dense, with_payload=True, params=self._params)
        else:
            n = max(self._candidates, k)
            request = qe.QueryRequest(
                limit=k, with_payload=True, query=qe.Fusion.Rrf(k=60), prefetches=[
                    qe.Prefetch(limit=n, query=dense, params=self._params),
                    qe.Prefetch(limit=n, query=qe.Query.Nearest(
                        qe.SparseVector(keywords.indices, keywords.values), using="keywords")),
                ])
        return [(h.payload or {}).get("dia_id", "") for h in self._shard(coll).query(request)]

    def text_recall(self, coll: str, query: str, k: int) -> list[str]:
        enc_ms, encoded = timed(self._encode, [query])
        (vector, keywords), = encoded
        search_ms, got = timed(self._hybrid, coll, vector, keywords, k)
        if coll == "bench":
            self.encode_ms.append(enc_ms)
            self.search_ms.append(search_ms)
        return got

    def vector_recall(self, coll: str, vector: Sequence[float], k: int) -> list[str]:
        return self._hybrid(coll, vector, None, k)

    def versions(self) -> dict[str, str]:
        return {**_versions("qdrant-edge-py", "onnxruntime"),
                "encoder": f"ONNX Runtime {self._encoder.precision}, "
                           f"{self._encoder.threads} thread(s)"}
