"""Generate the Python protobuf and gRPC code from proto/ into client/.

One command: ``make proto`` (or ``python proto/generate.py``). The output lands in
``client/celestial/v1``, importable as ``celestial.v1``, so the generated imports work unchanged.
``tests/unit/test_generated_code.py`` regenerates into a temporary folder and fails when the
committed files differ.
"""

from __future__ import annotations

import sys
from pathlib import Path

from grpc_tools import protoc  # type: ignore[import-untyped]

ROOT = Path(__file__).resolve().parent.parent
PROTO_ROOT = ROOT / "proto"
DEFAULT_OUT = ROOT / "client"


def proto_files() -> list[Path]:
    return sorted(PROTO_ROOT.rglob("*.proto"))


def generate(out_dir: Path = DEFAULT_OUT) -> list[Path]:
    """Run protoc over every .proto; return the files written."""
    import grpc_tools

    well_known = Path(grpc_tools.__file__).parent / "_proto"
    out_dir.mkdir(parents=True, exist_ok=True)
    files = [str(p.relative_to(PROTO_ROOT)) for p in proto_files()]
    args = [
        "protoc",
        f"-I{PROTO_ROOT}",
        f"-I{well_known}",
        f"--python_out={out_dir}",
        f"--pyi_out={out_dir}",
        f"--grpc_python_out={out_dir}",
        *files,
    ]
    if protoc.main(args) != 0:
        raise RuntimeError(f"protoc failed: {' '.join(args)}")
    written = []
    for rel in files:
        stem = out_dir / rel.removesuffix(".proto")
        written += [Path(f"{stem}_pb2.py"), Path(f"{stem}_pb2.pyi"), Path(f"{stem}_pb2_grpc.py")]
    # Package markers so `celestial.v1` imports as a regular package.
    for pkg in {p.parent for p in written}:
        while pkg != out_dir:
            (pkg / "__init__.py").touch()
            pkg = pkg.parent
    return written


if __name__ == "__main__":
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_OUT
    for path in generate(out):
        print(path.relative_to(out))
