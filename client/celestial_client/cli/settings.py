"""Where ``celestial``'s client commands get their connection: a flag, else the environment,
else the default, each value remembering which (``celestial config`` shows them).

An MCP host starts ``celestial mcp`` without the user's environment, so everything here can be
a flag; the API key can come from a file (``--api-key-file``), so that it stays out of the
host's configuration and out of ``ps``.
"""

from __future__ import annotations

import argparse
import os
import re
from dataclasses import dataclass
from pathlib import Path

from celestial_client.connection import TLS

# (setting, environment variable, default); the setting is also the argparse dest.
CLIENT_SETTINGS = (
    ("target", "CELESTIAL_TARGET", "localhost:50051"),
    ("tenant", "CELESTIAL_TENANT", ""),
    ("api_key", "CELESTIAL_API_KEY", None),
    ("api_key_file", "CELESTIAL_API_KEY_FILE", None),
    ("tls_ca", "CELESTIAL_TLS_CA", None),
    ("tls_cert", "CELESTIAL_TLS_CLIENT_CERT", None),
    ("tls_key", "CELESTIAL_TLS_CLIENT_KEY", None),
)
SECRET = frozenset({"api_key"})
REDACTED = "<redacted>"
# Parameters that carry credentials in the URLs people paste (presigned, keyed or session URLs).
_SECRET_PARAM = re.compile(r"key|token|secret|pass|pwd|sig|auth|jwt|sas|session|sid|code|cred",
                           re.I)
# A user part in a URL, with or without a scheme: everything before the last "@" of the
# authority (a token is often the user name alone).
_USERINFO = re.compile(r"^(?P<head>(?:[A-Za-z][A-Za-z0-9+.-]*://)?)(?P<user>[^/?#@]*)@")
_PARAM = re.compile(r"(?P<sep>[?&;#])(?P<name>[^=&;#]*)=(?P<value>[^&;#]*)")


def without_secrets(value: str) -> str:
    """A URL with its user part and its credential-like parameter values (query, matrix ``;``
    or fragment) redacted: ``https://user:s3cret@host/?token=x`` ->
    ``https://<redacted>@host/?token=<redacted>``; other text as it is. Textual, so a URL
    Python cannot parse is redacted the same."""
    if "@" not in value and not _PARAM.search(value):
        return value
    out = _USERINFO.sub(lambda m: f"{m['head']}{REDACTED}@" if m["user"] else m[0], value)
    return _PARAM.sub(lambda m: (f"{m['sep']}{m['name']}={REDACTED}"
                                 if _SECRET_PARAM.search(m["name"]) else m[0]), out)


class UsageError(Exception):
    """A mistake in how the command was called (exit status 2)."""


@dataclass(frozen=True, slots=True)
class Setting:
    name: str
    value: object
    source: str  # "flag", "env" or "default"
    env: str  # the environment variable that sets it
    secret: bool = False

    def shown(self) -> object:
        """The value for people and logs: a secret only says that it is set."""
        if self.secret and self.value:
            return REDACTED
        if isinstance(self.value, str):
            return without_secrets(self.value)
        return str(self.value) if isinstance(self.value, Path) else self.value


def client_settings(args: argparse.Namespace) -> dict[str, Setting]:
    out = {}
    for name, env, default in CLIENT_SETTINGS:
        flag = getattr(args, name, None)
        if flag is not None:
            value, source = flag, "flag"
        elif os.environ.get(env):
            value, source = os.environ[env], "env"
        else:
            value, source = default, "default"
        out[name] = Setting(name, value, source, env, name in SECRET)
    return out


def api_key(s: dict[str, Setting]) -> str | None:
    """The key to send: a flag before the environment, and at one level the key before the
    key file."""
    key, key_file = s["api_key"], s["api_key_file"]
    for source in ("flag", "env"):
        if key.source == source:
            return str(key.value)
        if key_file.source == source:
            return _read_key(Path(str(key_file.value)))
    return None


def _read_key(path: Path) -> str:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as err:
        raise UsageError(f"cannot read the API key file {path}: {err.strerror}") from None
    key = lines[0].strip() if lines else ""
    if not key:
        raise UsageError(f"the API key file {path} is empty")
    return key


def tls(s: dict[str, Setting]) -> TLS | None:
    ca, cert, key = (s[n].value for n in ("tls_ca", "tls_cert", "tls_key"))
    if not (ca or cert):
        return None
    try:
        return TLS.from_files(_path(ca), _path(cert), _path(key))
    except OSError as err:
        raise UsageError(f"cannot read a TLS file: {err.filename}: {err.strerror}") from None


def _path(value: object) -> str | None:
    return str(value) if value else None
