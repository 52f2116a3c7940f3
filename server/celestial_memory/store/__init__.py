"""Storage: one repository (repository.py) over two engines (edge_engine.py, qdrant_engine.py).

``open_edge`` and ``open_qdrant`` build the repository over each engine.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from celestial_memory.store.repository import MemoryRepository

if TYPE_CHECKING:
    from celestial_memory.store.qdrant_engine import Connection
    from qdrant_client import QdrantClient


def open_edge(path: Path, dimension: int, vectors_on_disk: bool = False,
              payload_on_disk: bool = False) -> MemoryRepository:
    """The embedded store (Qdrant Edge) in the folder ``path``."""
    from celestial_memory.store.edge_engine import EdgeEngine

    return MemoryRepository(EdgeEngine(path, dimension, vectors_on_disk, payload_on_disk))


def open_qdrant(
    connection: Connection | str, dimension: int, collection: str,
    client: QdrantClient | None = None, vectors_on_disk: bool = False,
    payload_on_disk: bool = False,
) -> MemoryRepository:
    """A Qdrant server, cluster or Qdrant Cloud, or ``:memory:`` (qdrant-client's local mode)."""
    from celestial_memory.store.qdrant_engine import QdrantEngine

    return MemoryRepository(QdrantEngine(connection, dimension, collection, client,
                                         vectors_on_disk, payload_on_disk))


__all__ = ["MemoryRepository", "open_edge", "open_qdrant"]
