"""What ordered the recalls of ``make eval-locomo``: the server's start-up line about its ranker,
and, when that is a learned model whose card names the conversations evaluated as its training
data, a note that its figures there are not a measure of its quality.

    python benchmarks/ranker_note.py DATA_FOLDER SERVER_LOG
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

from celestial_memory.ranking.learned import MODEL_DIR


def main(data: Path, log: Path) -> int:
    said = [line for line in log.read_text(errors="replace").splitlines() if "ranker:" in line]
    for line in said:
        print(line[line.index("ranker:"):])
    if not any("the learned model" in line and "orders" in line for line in said):
        return 0
    folder = Path(os.environ.get("CELESTIAL_RANKER_MODEL") or MODEL_DIR)
    try:
        trained_on = str(json.loads((folder / "card.json").read_text()).get("data", ""))
    except (OSError, ValueError, AttributeError):
        return 0
    stems = [p.stem for p in sorted(data.glob("*.json"))]
    seen = [s for s in stems if re.search(rf"\b{re.escape(s)}\b", trained_on)]
    if stems and seen == stems:
        print(f"note: the learned model was trained on these conversations ({', '.join(seen)}): "
              "these figures are not a measure of its quality; the leave-one-conversation-out "
              "figures are (make train-ranker, docs/benchmarks.md)")
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), Path(sys.argv[2])))
