"""ACLs with the semantics of Kafka's StandardAuthorizer, as a pure module.

`Authorizer.authorize(principal, host, operation, resource_type, name)` decides as Kafka does:
super users are allowed everything; otherwise the ACLs that match the resource (LITERAL with the same
name, LITERAL `*`, PREFIXED patterns the name starts with) are looked at: a matching DENY wins, then a
matching ALLOW (READ, WRITE, DELETE and ALTER imply DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS;
ALL matches every operation); when no ACL at all matches the resource, `allow.everyone.if.no.acl.found`
decides. A principal matches its own name or `User:*`, a host its own address or `*`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Iterable, Iterator


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class Operation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14
    TWO_PHASE_COMMIT = 15


class Permission(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


CLUSTER_NAME = "kafka-cluster"
# The operations each resource type supports (Kafka's AclEntry.supportedOperations): what the
# authorized-operations bitfields of Metadata, DescribeCluster and DescribeGroups (KIP-430) range over.
SUPPORTED_OPERATIONS = {
    ResourceType.TOPIC: (Operation.READ, Operation.WRITE, Operation.CREATE, Operation.DESCRIBE, Operation.DELETE,
                         Operation.ALTER, Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS),
    ResourceType.GROUP: (Operation.READ, Operation.DESCRIBE, Operation.DELETE, Operation.DESCRIBE_CONFIGS,
                         Operation.ALTER_CONFIGS),  # the configs: Kafka 4's GROUP config resource
    ResourceType.CLUSTER: (Operation.CREATE, Operation.CLUSTER_ACTION, Operation.DESCRIBE_CONFIGS,
                           Operation.ALTER_CONFIGS, Operation.IDEMPOTENT_WRITE, Operation.ALTER, Operation.DESCRIBE),
    ResourceType.TRANSACTIONAL_ID: (Operation.DESCRIBE, Operation.WRITE),
}
WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"
# An ALLOW for the key grants these too (Kafka's AclEntry implied operations).
_IMPLIED_BY = {
    Operation.DESCRIBE: (Operation.READ, Operation.WRITE, Operation.DELETE, Operation.ALTER),
    Operation.DESCRIBE_CONFIGS: (Operation.ALTER_CONFIGS,),
}


@dataclass(slots=True, frozen=True)
class AclBinding:
    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: Operation
    permission: Permission

    def matches_resource(self, resource_type: ResourceType, name: str) -> bool:
        if self.resource_type != resource_type:
            return False
        if self.pattern_type == PatternType.LITERAL:
            return self.resource_name == name or self.resource_name == WILDCARD
        return self.pattern_type == PatternType.PREFIXED and name.startswith(self.resource_name)

    def to_json(self) -> list:
        return [self.resource_type.name, self.resource_name, self.pattern_type.name, self.principal, self.host,
                self.operation.name, self.permission.name]

    @classmethod
    def from_json(cls, row: list) -> "AclBinding":
        rt, name, pt, principal, host, op, perm = row
        return cls(ResourceType[rt], name, PatternType[pt], principal, host, Operation[op], Permission[perm])


@dataclass(slots=True, frozen=True)
class AclFilter:
    """DescribeAcls/DeleteAcls filters: None (null) and ANY match everything; MATCH as Kafka defines it."""

    resource_type: ResourceType
    resource_name: str | None
    pattern_type: PatternType
    principal: str | None
    host: str | None
    operation: Operation
    permission: Permission

    def matches(self, acl: AclBinding) -> bool:
        if self.resource_type != ResourceType.ANY and self.resource_type != acl.resource_type:
            return False
        if not self._matches_pattern(acl):
            return False
        if self.principal is not None and self.principal != acl.principal:
            return False
        if self.host is not None and self.host != acl.host:
            return False
        if self.operation != Operation.ANY and self.operation != acl.operation:
            return False
        return self.permission == Permission.ANY or self.permission == acl.permission

    def _matches_pattern(self, acl: AclBinding) -> bool:
        pt, name = self.pattern_type, self.resource_name
        if pt == PatternType.MATCH:
            if name is None:
                return True
            if acl.pattern_type == PatternType.LITERAL:
                return acl.resource_name == name or acl.resource_name == WILDCARD
            return acl.pattern_type == PatternType.PREFIXED and name.startswith(acl.resource_name)
        if pt != PatternType.ANY and pt != acl.pattern_type:
            return False
        return name is None or name == acl.resource_name

    def invalid_reason(self) -> str | None:
        if PatternType.UNKNOWN in (self.pattern_type,) or self.resource_type == ResourceType.UNKNOWN:
            return "Filter contains UNKNOWN elements"
        if self.operation == Operation.UNKNOWN or self.permission == Permission.UNKNOWN:
            return "Filter contains UNKNOWN elements"
        return None


def parse_principal(text: str) -> tuple[str, str]:
    kind, sep, name = text.partition(":")
    if not sep or not kind or not name:
        raise ValueError(f"Could not parse principal from `{text}` (no colon is present separating the "
                         "principal type from the principal name)")
    return kind, name


def invalid_binding_reason(acl: AclBinding) -> str | None:
    """Why CreateAcls refuses this binding (Kafka's AclControlManager.validateNewAcl), or None."""
    if acl.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
        return "Invalid resourceType " + acl.resource_type.name
    if acl.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        return "Invalid patternType " + acl.pattern_type.name
    if acl.operation in (Operation.UNKNOWN, Operation.ANY):
        return "Invalid operation " + acl.operation.name
    if acl.permission in (Permission.UNKNOWN, Permission.ANY):
        return "Invalid permissionType " + acl.permission.name
    if not acl.resource_name:
        return "Resource name should not be empty"
    if acl.resource_type == ResourceType.CLUSTER and acl.resource_name != CLUSTER_NAME:
        return "The only valid name for the CLUSTER resource is " + CLUSTER_NAME
    if acl.host is None or acl.host == "":
        return "Invalid host"
    try:
        parse_principal(acl.principal)
    except ValueError as e:
        return str(e)
    return None


def parse_super_users(text: str) -> frozenset[str]:
    """Kafka's `super.users`: principals separated by `;`."""
    return frozenset(p.strip() for p in text.split(";") if p.strip())


_RESOURCE_TYPES = tuple(t for t in ResourceType if t > ResourceType.ANY)
_NAMED_PATTERNS = (PatternType.ANY, PatternType.MATCH, PatternType.LITERAL, PatternType.PREFIXED)


class Authorizer:
    def __init__(self, acls: Iterable[AclBinding] = (), super_users: Iterable[str] = (),
                 allow_if_no_acl: bool = False) -> None:
        self.super_users = frozenset(super_users)
        self.allow_if_no_acl = allow_if_no_acl
        # Why the ACLs cannot be trusted (their file is damaged, acl_store.py): while set, only super
        # users are authorized and the ACLs cannot be changed.
        self.locked: str | None = None
        # Every binding, with the order it came in (answers list matches in that order).
        self._all: dict[AclBinding, int] = {}
        self._added = 0
        # The bindings of each (resource type, pattern type, name): a resource's LITERAL bindings
        # and the PREFIXED ones of each prefix of its name are a few dict lookups away.
        self._buckets: dict[tuple[ResourceType, PatternType, str], dict[AclBinding, None]] = {}
        # Per resource type, how many PREFIXED names there are of each length: a name is checked
        # against the prefixes of the lengths in use, not against every PREFIXED binding (10,000
        # tenant prefixes cost each authorization 2 ms when walked).
        self._prefix_lengths: dict[ResourceType, dict[int, int]] = {}
        for acl in acls:
            self.add(acl)

    def acls(self) -> list[AclBinding]:
        return list(self._all)

    def new_among(self, acls: Iterable[AclBinding]) -> set[AclBinding]:
        """The distinct bindings of `acls` not in force yet: what adding them would add."""
        return {acl for acl in acls if acl not in self._all}

    def add(self, acl: AclBinding) -> bool:
        if acl in self._all:
            return False
        self._all[acl] = self._added
        self._added += 1
        key = (acl.resource_type, acl.pattern_type, acl.resource_name)
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = self._buckets[key] = {}
            if acl.pattern_type == PatternType.PREFIXED:
                lengths = self._prefix_lengths.setdefault(acl.resource_type, {})
                lengths[len(acl.resource_name)] = lengths.get(len(acl.resource_name), 0) + 1
        bucket[acl] = None
        return True

    def remove(self, acl: AclBinding) -> bool:
        if acl not in self._all:
            return False
        del self._all[acl]
        key = (acl.resource_type, acl.pattern_type, acl.resource_name)
        bucket = self._buckets[key]
        del bucket[acl]  # a dict, in insertion order: removing 10,000 of a bucket is not quadratic
        if not bucket:
            del self._buckets[key]
            if acl.pattern_type == PatternType.PREFIXED:
                lengths = self._prefix_lengths[acl.resource_type]
                lengths[len(acl.resource_name)] -= 1
                if not lengths[len(acl.resource_name)]:
                    del lengths[len(acl.resource_name)]
                    if not lengths:
                        del self._prefix_lengths[acl.resource_type]
        return True

    def matching(self, flt: AclFilter) -> list[AclBinding]:
        """The bindings `flt` matches, in the order they were added. A filter that names its resource
        looks in that name's buckets only; one without a name goes through every binding."""
        if flt.resource_name is None or flt.pattern_type not in _NAMED_PATTERNS:
            return [acl for acl in self._all if flt.matches(acl)]
        types = _RESOURCE_TYPES if flt.resource_type == ResourceType.ANY else (flt.resource_type,)
        name = flt.resource_name
        found: list[AclBinding] = []
        for resource_type in types:
            if flt.pattern_type == PatternType.MATCH:
                candidates = self._resource_acls(resource_type, name)
            else:
                candidates = (acl for pattern in (PatternType.LITERAL, PatternType.PREFIXED)
                              for acl in self._buckets.get((resource_type, pattern, name), ()))
            found.extend(acl for acl in candidates if flt.matches(acl))
        found.sort(key=self._all.__getitem__)
        return found

    def _resource_acls(self, resource_type: ResourceType, name: str) -> Iterator[AclBinding]:
        """The bindings that apply to the resource: LITERAL of its name or `*`, PREFIXED of a prefix of it."""
        buckets = self._buckets
        yield from buckets.get((resource_type, PatternType.LITERAL, name), ())
        if name != WILDCARD:
            yield from buckets.get((resource_type, PatternType.LITERAL, WILDCARD), ())
        for length in self._prefix_lengths.get(resource_type, ()):
            if length <= len(name):
                yield from buckets.get((resource_type, PatternType.PREFIXED, name[:length]), ())

    def authorize(self, principal: str, host: str, operation: Operation, resource_type: ResourceType,
                  name: str) -> bool:
        if principal in self.super_users:
            return True
        if self.locked:
            return False
        found_resource_acl = allowed = False
        for acl in self._resource_acls(resource_type, name):
            found_resource_acl = True
            if acl.principal != principal and acl.principal != WILDCARD_PRINCIPAL:
                continue
            if acl.host != host and acl.host != WILDCARD:
                continue
            if acl.permission == Permission.DENY:
                if acl.operation in (operation, Operation.ALL):
                    return False
            elif not allowed and (acl.operation in (operation, Operation.ALL)
                                  or acl.operation in _IMPLIED_BY.get(operation, ())):
                allowed = True
        if allowed:
            return True
        return self.allow_if_no_acl and not found_resource_acl

    def authorize_any(self, principal: str, host: str, operation: Operation, resource_type: ResourceType) -> bool:
        """Whether some resource of this type may be acted on (Kafka's authorizeByResourceType, KIP-679)."""
        if principal in self.super_users:
            return True
        if self.locked:
            return False
        if self.allow_if_no_acl and not any(a.resource_type == resource_type for a in self._all):
            return True
        denied_literal, denied_prefix = set(), []
        candidates = []
        for acl in self._all:
            if acl.resource_type != resource_type:
                continue
            if acl.principal not in (principal, WILDCARD_PRINCIPAL) or acl.host not in (host, WILDCARD):
                continue
            if acl.permission == Permission.DENY and acl.operation in (operation, Operation.ALL):
                if acl.pattern_type == PatternType.LITERAL:
                    if acl.resource_name == WILDCARD:
                        return False
                    denied_literal.add(acl.resource_name)
                else:
                    if acl.resource_name == "":
                        return False
                    denied_prefix.append(acl.resource_name)
            elif acl.permission == Permission.ALLOW and (acl.operation in (operation, Operation.ALL)
                                                         or acl.operation in _IMPLIED_BY.get(operation, ())):
                candidates.append(acl)
        for acl in candidates:
            if any(acl.resource_name.startswith(p) for p in denied_prefix):
                continue
            if acl.pattern_type == PatternType.LITERAL and acl.resource_name in denied_literal:
                continue
            return True
        return False
