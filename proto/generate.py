"""Generate the Python protobuf, gRPC and Connect code from proto/ into client/.

One command: ``make proto`` (or ``python proto/generate.py``). The output lands in
``client/celestial_client/v1``, importable as ``celestial_client.v1``: the client package owns
the generated code, so installing it adds no generic top-level package. protoc names imports
after the proto's folders (``celestial.v1``), so the one generated import is rewritten.
``tests/unit/test_generated_code.py`` regenerates into a temporary folder and fails when the
committed files differ. The TypeScript client generates its own (client/typescript).

The Connect code (``*_connect.py``, protoc-gen-connectrpc for google.protobuf messages, asyncio
only) is what the server's HTTP transport serves (celestial_memory/api/connect); importing it
needs the ``connectrpc`` package, which the server installs and a gRPC client does not.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from grpc_tools import protoc  # type: ignore[import-untyped]

# The Connect plugin, installed beside this interpreter (protoc-gen-connectrpc).
CONNECT_PLUGIN = Path(sys.executable).parent / "protoc-gen-connectrpc"

ROOT = Path(__file__).resolve().parent.parent
PROTO_ROOT = ROOT / "proto"
DEFAULT_OUT = ROOT / "client" / "celestial_client"
# Where protoc writes (the proto's folders) and where the package keeps it.
PROTO_PACKAGE, PY_PACKAGE = "celestial.v1", "celestial_client.v1"


def proto_files() -> list[Path]:
    return sorted(PROTO_ROOT.rglob("*.proto"))


def generate(out_dir: Path = DEFAULT_OUT) -> list[Path]:
    """Run protoc over every .proto into ``out_dir/v1``; return the files written."""
    import grpc_tools

    well_known = Path(grpc_tools.__file__).parent / "_proto"
    files = [str(p.relative_to(PROTO_ROOT)) for p in proto_files()]
    written = []
    with tempfile.TemporaryDirectory() as tmp:
        args = [
            "protoc",
            f"-I{PROTO_ROOT}",
            f"-I{well_known}",
            f"--python_out={tmp}",
            f"--pyi_out={tmp}",
            f"--grpc_python_out={tmp}",
            f"--plugin=protoc-gen-connectrpc={CONNECT_PLUGIN}",
            f"--connectrpc_out={tmp}",
            "--connectrpc_opt=protobuf=google,io=async",
            *files,
        ]
        if protoc.main(args) != 0:
            raise RuntimeError(f"protoc failed: {' '.join(args)}")
        target = out_dir / "v1"
        target.mkdir(parents=True, exist_ok=True)
        (target / "__init__.py").touch()
        for rel in files:
            stem = rel.removesuffix(".proto")
            for suffix in ("_pb2.py", "_pb2.pyi", "_pb2_grpc.py", "_connect.py"):
                src = Path(tmp) / f"{stem}{suffix}"
                if not src.exists():  # a file without services has no gRPC or Connect code
                    continue
                dst = target / src.name
                text = src.read_text().replace(f"from {PROTO_PACKAGE} import",
                                               f"from {PY_PACKAGE} import")
                dst.write_text(text)
                written.append(dst)
    return written


if __name__ == "__main__":
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_OUT
    for path in generate(out):
        print(path.relative_to(out))
