"""``celestial keys create | list | revoke``: manage the API key file the server reads
(``CELESTIAL_API_KEYS_FILE``, or ``--file``). A running server picks up changes within
``CELESTIAL_API_KEYS_RELOAD_S``; no restart."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from celestial_memory.access.keys import KeyRecord, create_key, iso, read_keys, revoke_key
from celestial_memory.errors import CelestialError


def add_keys_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--file", default=os.environ.get("CELESTIAL_API_KEYS_FILE"),
                   help="the key file (CELESTIAL_API_KEYS_FILE)")
    sub = p.add_subparsers(dest="keys_command", required=True)
    c = sub.add_parser("create", help="add a key; prints it once")
    c.add_argument("--name", required=True, help="who or what the key is for")
    c.add_argument("--role", choices=["read", "write", "admin", "peer"], required=True,
                   help="read: look (recall without reinforcing, get, list, export); write: also "
                        "store, change and import; admin: also rebalance and consolidate; peer: "
                        "another memory node exchanging policy updates, and nothing else")
    c.add_argument("--tenant", action="append", default=[], dest="tenants",
                   help="a tenant the key may use (repeat for several; * for every tenant; a peer "
                        "key needs none)")
    c.add_argument("--expires-days", type=float, help="the key stops working after this")
    c.add_argument("--subject", help="with mTLS: a client certificate common name that stands "
                   "for this key")
    ls = sub.add_parser("list", help="the keys, without their secrets")
    r = sub.add_parser("revoke", help="stop a key from working")
    r.add_argument("id", help="the key's id (celestial keys list)")
    for command in (c, ls, r):
        command.add_argument("--json", action="store_true",
                             help="print one JSON document instead of text")


def _public(r: KeyRecord, now: float) -> dict[str, object]:
    """A key as --json shows it: everything but its salt and hash."""
    return {"id": r.id, "name": r.name, "role": r.role, "tenants": r.tenants,
            "state": r.state(now), "created_at": iso(r.created_at),
            "expires_at": r.expires_at and iso(r.expires_at),
            "revoked_at": r.revoked_at and iso(r.revoked_at), "subject": r.subject}


def keys_main(args: argparse.Namespace) -> int:
    if not args.file:
        print("no key file: pass --file or set CELESTIAL_API_KEYS_FILE", file=sys.stderr)
        return 2
    path = Path(args.file)
    try:
        if args.keys_command == "create":
            expires = (time.time() + args.expires_days * 86_400
                       if args.expires_days is not None else None)
            record, key = create_key(path, args.name, args.role, args.tenants, expires,
                                     subject=args.subject)
            if args.json:
                print(json.dumps({"key": _public(record, time.time()), "secret": key}))
                return 0
            print(f"created key {record.id} ({record.role}, tenants {', '.join(record.tenants)}, "
                  f"expires {iso(record.expires_at)})")
            print("the key, shown this once (send it as 'authorization: Bearer <key>'):")
            print(key)
        elif args.keys_command == "revoke":
            record = revoke_key(path, args.id)
            if args.json:
                print(json.dumps({"key": _public(record, time.time())}))
                return 0
            print(f"revoked key {record.id} ({record.name})")
        else:
            now = time.time()
            if args.json:
                print(json.dumps({"keys": [_public(r, now) for r in read_keys(path).values()]}))
                return 0
            print(f"{'id':<14}{'name':<20}{'role':<7}{'state':<9}{'expires':<22}tenants")
            for r in read_keys(path).values():
                print(f"{r.id:<14}{r.name[:19]:<20}{r.role:<7}{r.state(now):<9}"
                      f"{iso(r.expires_at):<22}{', '.join(r.tenants)}")
    except CelestialError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0
