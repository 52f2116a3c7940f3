"""What a running server reports of its settings (GetConfig; ``celestial config`` prints it):
every setting, its value as JSON, where the value came from when the server started (a flag of
``celestial serve``, the environment, the default: config_serving.py records it as the settings
are built) and the environment variable that sets it.

Secrets never leave: an API key (a ``SecretStr``) and a private key's file are reported as
"set" or "" only, and a URL's user part and credential-like parameter values (``?api_key=``,
``;jsessionid=``, ``#token=``) are redacted, as ``celestial config`` redacts its own.
"""

from __future__ import annotations

import json
import math
import re
import typing
from dataclasses import dataclass
from pathlib import Path

from celestial_memory.config_serving import ServingSettings
from pydantic import SecretStr

# The paths of private keys: where a key lives is no one's business but the server's.
PRIVATE_KEY_FILES = frozenset({"tls_key", "policy_peer_cert_key"})
SET = "set"  # a secret's value when it is set ("" when it is not)
REDACTED = "<redacted>"
# Parameters that carry credentials in the URLs people configure (presigned, keyed or session
# URLs), and a URL's user part, with or without a scheme: everything before the last "@" of
# the authority (a token is often the user name alone). The client's rules (cli/settings.py).
_SECRET_PARAM = re.compile(r"key|token|secret|pass|pwd|sig|auth|jwt|sas|session|sid|code|cred",
                           re.I)
_USERINFO = re.compile(r"^(?P<head>(?:[A-Za-z][A-Za-z0-9+.-]*://)?)(?P<user>[^/?#@]*)@")
_PARAM = re.compile(r"(?P<sep>[?&;#])(?P<name>[^=&;#]*)=(?P<value>[^&;#]*)")


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    """One setting as a running server reports it."""

    name: str
    value: str  # JSON; a secret's: "set" or ""
    source: str  # "flag", "env" or "default" (config_serving.py)
    env: str  # the environment variable that sets it
    secret: bool = False


def running_config(settings: ServingSettings) -> list[ConfigEntry]:
    """Every setting of ``settings``, in their order (docs/configuration.md's), secrets
    withheld."""
    out = []
    for name, field in type(settings).model_fields.items():
        value = getattr(settings, name)
        secret = _holds_secret(field.annotation) or name in PRIVATE_KEY_FILES
        shown = (SET if _is_set(value) else "") if secret else json.dumps(
            _plain(value), ensure_ascii=False, allow_nan=False, separators=(",", ":"))
        out.append(ConfigEntry(name, shown, settings.source(name), settings.env_name(name),
                               secret))
    return out


def _holds_secret(annotation: object) -> bool:
    """Whether a field's type is a secret: ``SecretStr``, or ``SecretStr | None`` (unset, it is
    still a secret's setting)."""
    return annotation is SecretStr or SecretStr in typing.get_args(annotation)


def _is_set(value: object) -> bool:
    if isinstance(value, SecretStr):
        return bool(value.get_secret_value())
    return value is not None and value != ""


def _plain(value: object) -> object:
    """A value JSON holds: paths as text, text with its credentials redacted, an infinite
    number as text (JSON has none)."""
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, str):
        return without_secrets(value)
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if value is None or isinstance(value, bool | int | float):
        return value
    return str(value)


def without_secrets(value: str) -> str:
    """A URL with its user part and its credential-like parameter values redacted:
    ``https://user:s3cret@host/?token=x`` -> ``https://<redacted>@host/?token=<redacted>``;
    other text as it is. Textual, so a URL Python cannot parse is redacted the same."""
    if "@" not in value and not _PARAM.search(value):
        return value
    out = _USERINFO.sub(lambda m: f"{m['head']}{REDACTED}@" if m["user"] else m[0], value)
    return _PARAM.sub(lambda m: (f"{m['sep']}{m['name']}={REDACTED}"
                                 if _SECRET_PARAM.search(m["name"]) else m[0]), out)
