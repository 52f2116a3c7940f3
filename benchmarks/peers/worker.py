"""One system's run in its own process: ``python worker.py SYSTEM WORKDIR``.

Reads WORKDIR/dataset.json, writes WORKDIR/result-SYSTEM.json (an "error" entry if it failed).
``python worker.py embed WORKDIR`` writes the query vectors every system is given.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from pathlib import Path

from harness import Dataset, System, log, measure

# System name -> (module, class); each module imports its libraries only when it runs.
SYSTEMS = {
    "floor": ("systems_service", "Floor"),
    "floor-onnx": ("systems_service", "OnnxFloor"),
    "celestial": ("systems_service", "Celestial"),
    "celestial-int8": ("systems_service", "CelestialInt8"),
    "chroma": ("systems_peers", "Chroma"),
    "chroma-server": ("systems_peers", "ChromaServer"),
    "chroma-server-default-ef": ("systems_peers", "ChromaServerDefaultEf"),
    "langchain-qdrant": ("systems_peers", "LangchainQdrant"),
    "mem0": ("systems_peers", "Mem0"),
}


def embed(workdir: Path) -> None:
    import torch
    from sentence_transformers import SentenceTransformer

    d = json.loads((workdir / "dataset.json").read_text())
    if d["torch_threads"] > 0:
        torch.set_num_threads(d["torch_threads"])
    model = SentenceTransformer(d["model_path"], device="cpu")

    def enc(texts: list[str]) -> list[list[float]]:
        vectors: list[list[float]] = model.encode(
            texts, batch_size=64, normalize_embeddings=True, convert_to_numpy=True,
            show_progress_bar=False).tolist()
        return vectors

    (workdir / "vectors.json").write_text(json.dumps(
        {"queries": enc(d["queries"]), "warmup": enc(d["warmup"])}))


def main() -> int:
    name, workdir = sys.argv[1], Path(sys.argv[2])
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    if name == "embed":
        embed(workdir)
        return 0
    out = workdir / f"result-{name}.json"
    module, cls = SYSTEMS[name]
    system: System = getattr(__import__(module), cls)()
    root = workdir / name
    root.mkdir()
    try:
        result = measure(system, Dataset.load(workdir / "dataset.json"), root)
    except Exception as exc:
        traceback.print_exc()
        out.write_text(json.dumps({"system": name, "error": f"{type(exc).__name__}: {exc}"}))
        return 1
    finally:
        try:
            system.close()
        except Exception:
            traceback.print_exc()  # a failed close loses nothing measured
    out.write_text(json.dumps(result, indent=1))
    log(f"{name}: done")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
