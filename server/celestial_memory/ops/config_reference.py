"""docs/configuration.md, generated from the settings object so that it cannot drift from it.

    python -m celestial_memory.ops.config_reference            # rewrite docs/configuration.md
    python -m celestial_memory.ops.config_reference --check    # exit 1 when the page is stale

``make docs-config`` runs the first; tests/unit/test_config_reference.py the second's check.
"""

from __future__ import annotations

import argparse
import sys
import types
import typing
from pathlib import Path
from typing import Any, Literal

import annotated_types
from celestial_memory.config import Settings
from pydantic import SecretStr
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

PAGE = Path(__file__).resolve().parents[3] / "docs" / "configuration.md"

HEADER = """\
# Configuration

<!-- Generated from server/celestial_memory/config.py by
     `python -m celestial_memory.ops.config_reference` (make docs-config). Do not edit:
     tests/unit/test_config_reference.py fails when this page is stale. -->

The server has one settings object (`server/celestial_memory/config.py`), built once when it
starts. Each field is read from an environment variable with the `CELESTIAL_` prefix (lists as
JSON, e.g. `CELESTIAL_ZONE_CAPACITIES='[20,100,1000,0,0]'`); the flags of `celestial serve`
override the most used ones (`celestial serve --help`: `--address`, `--backend`, `--data-dir`,
`--qdrant-url`, `--model`, `--weights a,b,c,d` for the four `w_` weights, `--thresholds`,
`--capacities`, `--min-relevance`, `--rebalance-interval`, `--log-level`, `--api-keys-file`,
`--insecure-no-auth`). Secrets (the type says `secret`) are never logged.

"""

FOOTER = """
The pages that explain these settings: [concepts](concepts.md) (the memory function, zones,
recall, forgetting), [operations](operations.md) (keys, TLS, metrics, durability, deployment)
and [design](design.md).
"""


def _type_name(annotation: Any) -> str:
    """A reader's name for a field's type: `edge | qdrant`, `float`, `list[int]`, `secret`."""
    origin = typing.get_origin(annotation)
    if origin is Literal:
        return " \\| ".join(str(v) for v in typing.get_args(annotation))
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        return " \\| ".join(_type_name(a) for a in args)
    if origin is list:
        return f"list[{_type_name(typing.get_args(annotation)[0])}]"
    if annotation is SecretStr:
        return "secret"
    if annotation is Path:
        return "path"
    return getattr(annotation, "__name__", str(annotation))


_BOUNDS = ((annotated_types.Ge, "ge", "≥"), (annotated_types.Gt, "gt", ">"),
           (annotated_types.Le, "le", "≤"), (annotated_types.Lt, "lt", "<"))


def _bounds(field: FieldInfo) -> str:
    parts = []
    for item in field.metadata:
        for kind, attribute, sign in _BOUNDS:
            if isinstance(item, kind):
                parts.append(f"{sign} {getattr(item, attribute)}")
    return ", ".join(parts)


def _default(field: FieldInfo) -> str:
    if field.default_factory is not None:
        value = field.default_factory()  # type: ignore[call-arg]
    elif field.default is PydanticUndefined:
        return "required"
    else:
        value = field.default
    if value is None:
        return "unset"
    if value == "":
        return "empty"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list):
        return "`" + ",".join(str(v) for v in value).join("[]") + "`"
    if isinstance(value, Path):
        return f"`{value.as_posix()}`" if value.is_absolute() else f"`./{value.as_posix()}`"
    return f"`{value}`"


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def rows() -> list[tuple[str, str, str, str, str]]:
    """(setting, environment variable, type, default, description) of every field, in the
    order config.py declares them."""
    prefix = str(Settings.model_config.get("env_prefix", ""))
    out = []
    for name, field in Settings.model_fields.items():
        kind = _type_name(field.annotation)
        bounds = _bounds(field)
        out.append((name, (prefix + name).upper(), f"{kind} {bounds}".strip(), _default(field),
                    field.description or ""))
    return out


def render() -> str:
    lines = ["| setting | environment variable | type | default | description |",
             "|---|---|---|---|---|"]
    for name, env, kind, default, description in rows():
        lines.append(f"| `{name}` | `{env}` | {_cell(kind)} | {_cell(default)} | "
                     f"{_cell(description)} |")
    return HEADER + "\n".join(lines) + "\n" + FOOTER


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 when the page differs from the settings")
    parser.add_argument("--output", type=Path, default=PAGE, help="the page (docs/configuration.md)")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        current = args.output.read_text(encoding="utf-8") if args.output.exists() else ""
        if current != text:
            print(f"{args.output} is stale: run `make docs-config`", file=sys.stderr)
            return 1
        return 0
    args.output.write_text(text, encoding="utf-8")
    print(f"wrote {args.output} ({len(Settings.model_fields)} settings)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
