"""The peers, each embedded in the worker process: Chroma, LangChain over Qdrant, and mem0.

They run in benchmarks/peers/.venv, which shares no packages with the service's environment
(mem0ai pins protobuf below 7, the Celestial client needs 7). Every one is given the bundled
all-MiniLM-L6-v2 by path and torch's thread count as the service sets it.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from harness import Dataset, System, Turn


def _versions(*names: str) -> dict[str, str]:
    import torch

    return {**{n: metadata.version(n) for n in names}, "torch threads": str(torch.get_num_threads())}


def _set_threads(n: int) -> None:
    """As the service: n > 0 sets torch's pool, 0 leaves torch's default."""
    import torch

    if n > 0:
        torch.set_num_threads(n)


class Chroma(System):
    """chromadb's PersistentClient on disk, cosine HNSW, an embedding function over the model."""

    name = "chroma"

    def open(self, data: Dataset, root: Path) -> None:
        import chromadb
        from chromadb.api.types import Documents, EmbeddingFunction, Embeddings
        from chromadb.config import Settings
        from sentence_transformers import SentenceTransformer

        _set_threads(data.torch_threads)
        model = SentenceTransformer(data.model_path, device="cpu")

        class MiniLM(EmbeddingFunction[Documents]):
            # The service's encode call; unit vectors for the cosine space.
            def __init__(self) -> None:
                pass

            def __call__(self, input: Documents) -> Embeddings:
                return list(model.encode(list(input), batch_size=64, normalize_embeddings=True,
                                         convert_to_numpy=True, show_progress_bar=False))

            @staticmethod
            def name() -> str:
                return "bundled-all-minilm-l6-v2"

            def get_config(self) -> dict[str, Any]:
                return {}

            @staticmethod
            def build_from_config(config: dict[str, Any]) -> MiniLM:
                return MiniLM()

        self._ef = MiniLM()
        self._dir = root / "chroma-data"
        self._client = chromadb.PersistentClient(
            path=str(self._dir), settings=Settings(anonymized_telemetry=False))
        self._colls: dict[str, Any] = {}
        self._next_id = 0

    def _coll(self, name: str) -> Any:
        if name not in self._colls:
            self._colls[name] = self._client.create_collection(
                name, embedding_function=self._ef, configuration={"hnsw": {"space": "cosine"}})
        return self._colls[name]

    def data_dir(self) -> Path:
        return self._dir

    def ingest(self, coll: str, turns: Sequence[Turn]) -> None:
        ids = [str(self._next_id + i) for i in range(len(turns))]
        self._next_id += len(turns)
        self._coll(coll).add(ids=ids, documents=[t.text for t in turns],
                             metadatas=[t.metadata() for t in turns])

    def add(self, coll: str, turn: Turn) -> None:
        self.ingest(coll, [turn])

    @staticmethod
    def _ids(res: Any) -> list[str]:
        return [str(m.get("dia_id", "")) for m in res["metadatas"][0]]

    def text_recall(self, coll: str, query: str, k: int) -> list[str]:
        return self._ids(self._coll(coll).query(query_texts=[query], n_results=k,
                                                include=["metadatas"]))

    def vector_recall(self, coll: str, vector: Sequence[float], k: int) -> list[str]:
        return self._ids(self._coll(coll).query(query_embeddings=[list(vector)], n_results=k,
                                                include=["metadatas"]))

    def versions(self) -> dict[str, str]:
        return _versions("chromadb", "torch", "sentence-transformers")

    def close(self) -> None:
        shutil.rmtree(self._dir, ignore_errors=True)


class LangchainQdrant(System):
    """LangChain's QdrantVectorStore over qdrant-client's local mode on disk (exact search:
    local mode keeps the vectors in NumPy and scans them), HuggingFaceEmbeddings on the model."""

    name = "langchain-qdrant"

    def open(self, data: Dataset, root: Path) -> None:
        from langchain_huggingface import HuggingFaceEmbeddings
        from qdrant_client import QdrantClient

        _set_threads(data.torch_threads)
        self._emb = HuggingFaceEmbeddings(
            model_name=data.model_path, model_kwargs={"device": "cpu"},
            encode_kwargs={"normalize_embeddings": True, "batch_size": 64})
        self._dim = len(self._emb.embed_query("dimension"))
        self._dir = root / "langchain-qdrant-data"
        self._client = QdrantClient(path=str(self._dir))
        self._stores: dict[str, Any] = {}

    def _store(self, coll: str) -> Any:
        from langchain_qdrant import QdrantVectorStore
        from qdrant_client.models import Distance, VectorParams

        if coll not in self._stores:
            self._client.create_collection(
                coll, vectors_config=VectorParams(size=self._dim, distance=Distance.COSINE))
            self._stores[coll] = QdrantVectorStore(self._client, coll, self._emb)
        return self._stores[coll]

    def data_dir(self) -> Path:
        return self._dir

    def ingest(self, coll: str, turns: Sequence[Turn]) -> None:
        # add_texts embeds and upserts 64 at a time (its default batch_size).
        self._store(coll).add_texts([t.text for t in turns], metadatas=[t.metadata() for t in turns])

    def add(self, coll: str, turn: Turn) -> None:
        self.ingest(coll, [turn])

    def text_recall(self, coll: str, query: str, k: int) -> list[str]:
        return [d.metadata.get("dia_id", "") for d in self._store(coll).similarity_search(query, k=k)]

    def vector_recall(self, coll: str, vector: Sequence[float], k: int) -> list[str]:
        docs = self._store(coll).similarity_search_by_vector(list(vector), k=k)
        return [d.metadata.get("dia_id", "") for d in docs]

    def versions(self) -> dict[str, str]:
        return _versions("langchain-qdrant", "langchain-core", "langchain-huggingface",
                         "qdrant-client", "torch", "sentence-transformers")

    def close(self) -> None:
        self._client.close()
        shutil.rmtree(self._dir, ignore_errors=True)


class Mem0(System):
    """mem0's Memory with no LLM (add with infer=False), its "huggingface" embedder on the model
    and its default vector store, Qdrant in local mode on disk; one user_id per collection."""

    name = "mem0"
    supports_vector = False  # search() takes text only

    def open(self, data: Dataset, root: Path) -> None:
        self._dir = root / "mem0-data"
        self._dir.mkdir(parents=True)
        # Read when mem0 is imported: keep its files in the run's folder, send no telemetry.
        os.environ["MEM0_DIR"] = str(self._dir / "home")
        os.environ["MEM0_TELEMETRY"] = "False"
        # The constructor builds an OpenAI LLM object even though infer=False never calls it.
        os.environ.setdefault("OPENAI_API_KEY", "unused-no-llm-is-called")
        from mem0 import Memory

        _set_threads(data.torch_threads)
        self._memory = Memory.from_config({
            "embedder": {"provider": "huggingface",
                         "config": {"model": data.model_path, "embedding_dims": 384,
                                    "model_kwargs": {"device": "cpu"}}},
            "vector_store": {"provider": "qdrant",
                             "config": {"path": str(self._dir / "qdrant"), "on_disk": True,
                                        "collection_name": "memories",
                                        "embedding_model_dims": 384}},
            "history_db_path": str(self._dir / "history.db"),
        })

    def data_dir(self) -> Path:
        return self._dir

    def ingest(self, coll: str, turns: Sequence[Turn]) -> None:
        # Its batch form: one call with many messages, each stored as a memory. Metadata is
        # per call, so the batch carries the speaker as the message's name only.
        messages = [{"role": "user", "content": t.text, "name": t.speaker} for t in turns]
        self._memory.add(messages, user_id=coll, infer=False)

    def add(self, coll: str, turn: Turn) -> None:
        self._memory.add(turn.text, user_id=coll, metadata=turn.metadata(), infer=False)

    def load_conversation(self, coll: str, conv: Any, variant: str, batch: int) -> None:
        # One call per turn: the dia_id has to travel as that memory's metadata.
        for t in conv.turns():
            self.add(coll, t)

    def text_recall(self, coll: str, query: str, k: int) -> list[str]:
        res = self._memory.search(query, top_k=k, filters={"user_id": coll})
        return [str((r.get("metadata") or {}).get("dia_id", "")) for r in res["results"]]

    def vector_recall(self, coll: str, vector: Sequence[float], k: int) -> list[str]:
        raise NotImplementedError("mem0's search takes a query text only")

    def versions(self) -> dict[str, str]:
        return _versions("mem0ai", "qdrant-client", "torch", "sentence-transformers")

    def close(self) -> None:
        self._memory.vector_store.client.close()
        shutil.rmtree(self._dir, ignore_errors=True)
