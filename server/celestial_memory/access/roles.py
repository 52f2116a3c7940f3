"""Roles, what each method needs, and the tenant a call may use.

A key has a role and a set of tenants (or all of them). The role decides the methods:
``read`` (Recall without reinforcement, Get, Recent, List, Stats, Export, Ledger, GetOperation,
WatchOperation, ListOperations, GetPolicy, Observe's dry run), ``write`` (also Store, StoreBatch,
Update, Delete, Restore, Recall that reinforces, Import, Feedback, Reflect, StartReflection,
CancelOperation, Observe, ResetPolicy) and
``admin`` (also Rebalance, Consolidate, DeleteByFilter, SetClock, GetConfig, and Delete of an
immutable memory). ``peer`` stands apart: another memory node's key, for ExchangePolicy alone, which no
other role may call (a client's admin key is not a node). The tenants decide the data: a request naming
a tenant outside the key's set is refused, and one naming none gets the key's tenant. A tenant's
name is bounded (``checked_tenant``) before anything uses it.
"""

from __future__ import annotations

import contextvars
from dataclasses import dataclass
from enum import IntEnum

from celestial_memory.domain.validation import shown
from celestial_memory.errors import InvalidArgument, PermissionDenied


class Role(IntEnum):
    NONE = 0  # a caller not (yet) admitted
    READ = 1
    WRITE = 2
    ADMIN = 3
    PEER = 4  # not above ADMIN: outside the order (``Principal.require``)


# The least role each method of the memory service needs. A method missing here is refused.
# Recall and Context need WRITE when they reinforce; the servicer checks that, as it depends on the request.
METHOD_ROLES: dict[str, Role] = {
    "Get": Role.READ, "Recall": Role.READ, "Context": Role.READ, "Recent": Role.READ, "Stats": Role.READ,
    "Export": Role.READ, "Ledger": Role.READ, "List": Role.READ, "Related": Role.READ,
    "Entities": Role.READ, "GetOperation": Role.READ, "WatchOperation": Role.READ,
    "ListOperations": Role.READ, "GetPolicy": Role.READ,
    "Observe": Role.READ,  # a dry run; one that acts needs WRITE (the servicer checks)
    "ResetPolicy": Role.WRITE,
    "Store": Role.WRITE, "StoreBatch": Role.WRITE, "Update": Role.WRITE, "Delete": Role.WRITE,
    "Import": Role.WRITE, "Restore": Role.WRITE, "Relate": Role.WRITE, "Unrelate": Role.WRITE,
    "Feedback": Role.WRITE,  # it moves a memory's importance
    "Reflect": Role.WRITE,  # a dry run too: it spends model calls
    "StartReflection": Role.WRITE, "CancelOperation": Role.WRITE,  # Reflect's, started or stopped
    "Rebalance": Role.ADMIN, "Consolidate": Role.ADMIN, "DeleteByFilter": Role.ADMIN,
    "SetClock": Role.ADMIN, "GetConfig": Role.ADMIN,  # and a key for every tenant (servicer)
    "ExchangePolicy": Role.PEER,  # the PolicySharing service's one method
}


def checked_tenant(name: str, max_chars: int) -> str:
    """A tenant name a request gives: at most ``max_chars`` (settings.max_tenant_chars: it is
    stored with every memory and written in every access log line), not only white space."""
    if len(name) > max_chars:
        raise InvalidArgument("tenant", f"longer than {max_chars} characters")
    if not name.strip():
        raise InvalidArgument("tenant", "must not be only white space")
    return name


@dataclass(frozen=True, slots=True)
class Principal:
    """Who is calling: a key's id (never its secret), role and tenants (None: every tenant)."""

    key_id: str
    role: Role
    tenants: frozenset[str] | None

    def require(self, role: Role, what: str) -> None:
        # The peer role is no rank: it reaches ExchangePolicy alone, and only it reaches that.
        if (self.role == Role.PEER) != (role == Role.PEER) or self.role < role:
            raise PermissionDenied(
                f"{what} needs the {role.name.lower()} role; this key has {self.role.name.lower()}")

    def require_every_tenant(self, what: str) -> None:
        """For what acts on every tenant at once (the admin clock)."""
        if self.tenants is not None:
            raise PermissionDenied(f"{what} needs a key for every tenant (*)")

    def tenant(self, requested: str, default: str, max_chars: int) -> str:
        """The tenant a request may use: the one it names (at most ``max_chars``), if the key
        allows it; the key's own one if it names none."""
        if requested:
            checked_tenant(requested, max_chars)
        else:
            if self.tenants is not None and len(self.tenants) == 1:
                return next(iter(self.tenants))
            if self.tenants is not None and default not in self.tenants:
                raise InvalidArgument("tenant", "is required: this key has several tenants")
            requested = default
        if self.tenants is not None and requested not in self.tenants:
            raise PermissionDenied(f"this key may not use tenant {shown(requested)}")
        return requested


# With no keys configured (a server on localhost): every tenant, every method. Set by the
# interceptor for each admitted call; anything that runs without being admitted is NOBODY.
OPEN = Principal("", Role.ADMIN, None)
NOBODY = Principal("", Role.NONE, frozenset())
CALLER: contextvars.ContextVar[Principal] = contextvars.ContextVar("caller", default=NOBODY)
METHOD: contextvars.ContextVar[str] = contextvars.ContextVar("method", default="")
