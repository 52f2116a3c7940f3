"""The peers: Chroma (embedded, and as a server started with ``chroma run``), LangChain over
Qdrant, and mem0, each called from the worker process.

They run in benchmarks/peers/.venv, which shares no packages with the service's environment
(mem0ai pins protobuf below 7, the Celestial client needs 7). Every one is given the bundled
all-MiniLM-L6-v2 by path and torch's thread count as the service sets it, except
chroma-server-default-ef, which gets Chroma's own default embedding function (ONNX Runtime) on
an ONNX export of the same bundled weights (see bundled_onnx).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from harness import Dataset, System, Turn, free_port, log, summary, timed


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
        self._ef = self._embedding_function(data, root)
        self._client = self._connect(root)
        self._colls: dict[str, Any] = {}
        self._next_id = 0

    def _connect(self, root: Path) -> Any:
        import chromadb
        from chromadb.config import Settings

        self._dir = root / "chroma-data"
        return chromadb.PersistentClient(
            path=str(self._dir), settings=Settings(anonymized_telemetry=False))

    def _embedding_function(self, data: Dataset, root: Path) -> Any:
        from chromadb.api.types import Documents, EmbeddingFunction, Embeddings
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

        return MiniLM()

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
        if hasattr(self, "_dir"):
            shutil.rmtree(self._dir, ignore_errors=True)


class ChromaServer(Chroma):
    """``chroma run`` (the chromadb package's CLI: its Rust server, on disk) as a subprocess on
    a free loopback port, called through ``chromadb.HttpClient``; the same embedding function
    over the model as the embedded row. Chroma embeds on the client side, so the model lives in
    the worker while the reported RSS and data folder are the server's."""

    name = "chroma-server"
    START_S = 120.0  # until the server answers its heartbeat
    STOP_S = 15.0  # after SIGTERM, before SIGKILL

    def _connect(self, root: Path) -> Any:
        import chromadb
        from chromadb.config import Settings

        self._dir = root / "chroma-server-data"
        self._dir.mkdir(parents=True)
        port = free_port()
        self._log_path = root / "chroma-server.log"
        chroma = Path(sys.executable).parent / "chroma"
        with self._log_path.open("w") as out:
            # In the worker's process group: bench.py ends the group when a worker times out.
            self._proc = subprocess.Popen(
                [str(chroma), "run", "--path", str(self._dir), "--port", str(port),
                 "--host", "127.0.0.1"],
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env={**os.environ, "ANONYMIZED_TELEMETRY": "False"})
        try:
            self._wait_up(port)
            return chromadb.HttpClient(host="127.0.0.1", port=port,
                                       settings=Settings(anonymized_telemetry=False))
        except BaseException:
            self._stop()  # close() stops it too; a failed open must not leave it running
            raise

    def _wait_up(self, port: int) -> None:
        url = f"http://127.0.0.1:{port}/api/v2/heartbeat"
        direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: no proxy
        deadline = time.monotonic() + self.START_S
        while True:
            if self._proc.poll() is not None:
                raise RuntimeError(f"chroma run exited {self._proc.returncode}:\n{self._tail()}")
            try:
                with direct.open(url, timeout=2) as resp:
                    if resp.status == 200:
                        return
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"chroma run did not answer its heartbeat in "
                                   f"{self.START_S:.0f} s:\n{self._tail()}")
            time.sleep(0.2)

    def _tail(self) -> str:
        # The log lives in the run's temp folder, which goes with the run: quote it.
        try:
            return self._log_path.read_text(errors="replace")[-2000:]
        except OSError:
            return ""

    def _stop(self) -> None:
        proc = getattr(self, "_proc", None)
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(timeout=self.STOP_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def data_pid(self) -> int:
        return self._proc.pid

    def close(self) -> None:
        try:
            self._stop()
        finally:
            super().close()


def bundled_onnx(model_dir: Path, out: Path) -> None:
    """Chroma's ONNXMiniLM_L6_V2 folder (the files its onnx.tar.gz unpacks to) from the bundled
    weights: model.onnx exported here (the transformer alone, last_hidden_state out: Chroma pools
    and normalises itself), the tokenizer and config files copied from the model folder.

    Runs in a child process (``python systems_peers.py export-onnx MODEL OUT``) so that the
    worker measured does not carry torch and transformers, which Chroma's users do not load."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    inputs = ("input_ids", "attention_mask", "token_type_ids")

    class Hidden(torch.nn.Module):
        def __init__(self, inner: Any) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            return self.inner(input_ids=input_ids, attention_mask=attention_mask,
                              token_type_ids=token_type_ids).last_hidden_state

    out.mkdir(parents=True, exist_ok=True)
    model = AutoModel.from_pretrained(str(model_dir)).eval()
    features = AutoTokenizer.from_pretrained(str(model_dir))(
        ["an example sentence", "two"], padding=True, return_tensors="pt")
    axes = {0: "batch", 1: "sequence"}
    with torch.no_grad():
        torch.onnx.export(
            Hidden(model), tuple(features[k] for k in inputs), str(out / "model.onnx.tmp"),
            input_names=list(inputs), output_names=["last_hidden_state"],
            dynamic_axes={k: axes for k in (*inputs, "last_hidden_state")},
            opset_version=14, dynamo=False)
    os.replace(out / "model.onnx.tmp", out / "model.onnx")  # the last file Chroma checks for
    for name in ("config.json", "special_tokens_map.json", "tokenizer_config.json",
                 "tokenizer.json", "vocab.txt"):
        shutil.copyfile(model_dir / name, out / name)


class ChromaServerDefaultEf(ChromaServer):
    """chroma-server with the embedding function Chroma's users get when they pass none:
    ``DefaultEmbeddingFunction`` (ONNXMiniLM_L6_V2: all-MiniLM-L6-v2 on ONNX Runtime, its own
    tokenizer call, pooling in NumPy), on an ONNX export of the same bundled weights."""

    name = "chroma-server-default-ef"

    def _embedding_function(self, data: Dataset, root: Path) -> Any:
        from chromadb.utils.embedding_functions import DefaultEmbeddingFunction
        from chromadb.utils.embedding_functions.onnx_mini_lm_l6_v2 import ONNXMiniLM_L6_V2

        # ONNXMiniLM_L6_V2 looks for DOWNLOAD_PATH/onnx/{model.onnx, tokenizer.json, ...} and,
        # when a file is missing, downloads onnx.tar.gz from Chroma's bucket into
        # ~/.cache/chroma/onnx_models/all-MiniLM-L6-v2 (these machines reach no such host).
        # Chroma has no setting or variable for that folder; DOWNLOAD_PATH is a class attribute
        # (DefaultEmbeddingFunction builds a new ONNXMiniLM_L6_V2 on every call), so it is set on
        # the class, to a folder in the run's temp folder: the user's home stays untouched, and
        # a real Chroma download there can never be mistaken for this export, or the reverse.
        cache = root / "chroma-onnx-models" / ONNXMiniLM_L6_V2.MODEL_NAME
        t = time.perf_counter()
        subprocess.run([sys.executable, __file__, "export-onnx", data.model_path,
                        str(cache / ONNXMiniLM_L6_V2.EXTRACTED_FOLDER_NAME)], check=True)
        log(f"{self.name}: bundled all-MiniLM-L6-v2 exported to ONNX in "
            f"{time.perf_counter() - t:.1f} s")
        ONNXMiniLM_L6_V2.DOWNLOAD_PATH = cache
        ef = DefaultEmbeddingFunction()
        self._check = self._check_same_model(ef, data)
        return ef

    @staticmethod
    def _check_same_model(ef: Any, data: Dataset) -> dict[str, Any]:
        """Chroma's vectors against the ones every other system is given (sentence-transformers
        on the same weights): the export must be the same model, or the row means nothing. Also
        what one query costs with DefaultEmbeddingFunction (a new ONNX Runtime session per
        call) against one ONNXMiniLM_L6_V2 kept for the whole run."""
        import numpy as np
        from chromadb.utils.embedding_functions.onnx_mini_lm_l6_v2 import ONNXMiniLM_L6_V2

        got = np.array(ef(list(data.warmup)), dtype=np.float64)
        want = np.array(data.warmup_vectors, dtype=np.float64)
        cos = (got * want).sum(1) / (np.linalg.norm(got, axis=1) * np.linalg.norm(want, axis=1))
        if cos.min() < 0.999:
            raise RuntimeError(f"Chroma's default embedding function on the export is not the "
                               f"bundled model: cosine to sentence-transformers {cos.min():.4f}")
        held = ONNXMiniLM_L6_V2()
        held([data.warmup[0]])
        per_call = [timed(ef, [q])[0] for q in data.warmup]
        kept = [timed(held, [q])[0] for q in data.warmup]
        return {"min_cosine_to_sentence_transformers": float(cos.min()),
                "default_ef_one_query": summary(per_call),
                "onnx_ef_kept_one_query": summary(kept)}

    def versions(self) -> dict[str, str]:
        return {**{n: metadata.version(n) for n in ("chromadb", "onnxruntime", "tokenizers")},
                "onnxruntime threads": "its default"}

    def extra_results(self) -> dict[str, Any]:
        return {"embedding_check": self._check}


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


if __name__ == "__main__":
    if sys.argv[1:2] == ["export-onnx"]:
        bundled_onnx(Path(sys.argv[2]), Path(sys.argv[3]))
    else:
        raise SystemExit("usage: systems_peers.py export-onnx MODEL_DIR OUT_DIR")
