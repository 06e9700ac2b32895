"""A small, Pythonic face over the kubewasm 0.2 contract's `cache` and `client` imports, and
over contract 0.2.2's declaration: queue rules with predicates (`when`).

Objects stay the API server's JSON, as dicts, typed with `TypedDict`s for the fields a controller
reads: an object read, changed and written back keeps every field, also those not typed here.
A refused write raises an `ApiError` subclass (`Conflict`, `NotFound`, ...), so a controller
catches exactly what it can act on and lets the rest fail the reconcile (the host retries it
with backoff).
"""

import json
from typing import Any, NotRequired, Optional, TypedDict

from componentize_py_types import Err
from wit_world.imports import cache, client, log, types

try:  # contract 0.2.2's declaration (world `reconciler`); a 0.2.0 world has no predicates
    from wit_world.exports.plugin import Predicate, QueueSpec
except ImportError:
    Predicate = QueueSpec = None


def when(rule: types.QueueRule, *predicates: "Predicate") -> "QueueSpec":
    """`rule` queueing on the updates that change any of `predicates` (`Predicate.GENERATION`,
    `LABELS`, `ANNOTATIONS`, `RESOURCE_VERSION`); with none, on every update. Adds and deletes
    always queue. `when(types.QueueRule_OwnKey(), Predicate.GENERATION)` leaves out the
    controller's own status writes, which would otherwise each reconcile the object again.
    Contract 0.2.2 only (built for the `reconciler` world of wit/0.2.2)."""
    if QueueSpec is None:
        raise RuntimeError("queue predicates need contract 0.2.2 (world `reconciler`)")
    return QueueSpec(rule=rule, when=list(predicates))


class OwnerReference(TypedDict):
    apiVersion: str
    kind: str
    name: str
    uid: str
    controller: NotRequired[bool]
    blockOwnerDeletion: NotRequired[bool]


class ObjectMeta(TypedDict, total=False):
    name: str
    namespace: str
    uid: str
    resourceVersion: str
    labels: dict[str, str]
    ownerReferences: list[OwnerReference]


class ApiError(Exception):
    """A write the API server (or the host) refused."""


class Conflict(ApiError):
    """A stale resourceVersion: the cache will have the newer object; retry."""


class NotFound(ApiError):
    pass


class AlreadyExists(ApiError):
    pass


class Forbidden(ApiError):
    pass


class Invalid(ApiError):
    pass


class NotGranted(ApiError):
    """The host's config does not grant this write."""


class TooManyRequests(ApiError):
    pass


class Timeout(ApiError):
    pass


class ServerError(ApiError):
    pass


_ERRORS: dict[type, type[ApiError]] = {
    types.ApiError_Conflict: Conflict,
    types.ApiError_NotFound: NotFound,
    types.ApiError_AlreadyExists: AlreadyExists,
    types.ApiError_Forbidden: Forbidden,
    types.ApiError_Invalid: Invalid,
    types.ApiError_NotGranted: NotGranted,
    types.ApiError_TooManyRequests: TooManyRequests,
    types.ApiError_Timeout: Timeout,
    types.ApiError_ServerError: ServerError,
}


def _api_error(error: Err) -> ApiError:
    value = error.value
    return _ERRORS.get(type(value), ApiError)(repr(value.value))


def _write(call, *args) -> dict:
    try:
        return json.loads(call(*args))
    except Err as error:
        raise _api_error(error) from None


class CacheError(Exception):
    """A cache query the host refused (a subscription or index it does not know)."""


def get(subscription: int, namespace: Optional[str], name: str) -> Optional[dict]:
    """The object from the host's cache, or None."""
    try:
        found = cache.get(subscription, namespace, name)
    except Err as error:
        raise CacheError(repr(error.value)) from None
    return json.loads(found) if found is not None else None


def create(obj: dict) -> dict:
    """Creates `obj` (with apiVersion, kind and metadata); answers the server's object."""
    return _write(client.create, json.dumps(obj))


def update(obj: dict) -> dict:
    """Replaces `obj`; its metadata.resourceVersion is the precondition (stale: `Conflict`)."""
    return _write(client.update, json.dumps(obj))


def merge_patch_status(gvk: types.Gvk, meta: ObjectMeta, patch: dict[str, Any]) -> dict:
    """Applies a JSON merge patch to the object's status subresource."""
    target = types.ObjectRef(gvk=gvk, namespace=meta.get("namespace"), name=meta["name"])
    return _write(client.patch_status, target, client.PatchBody_Merge(json.dumps(patch)))


def record_event(gvk: types.Gvk, meta: ObjectMeta, warning: bool, reason: str, message: str) -> None:
    """Records a Kubernetes Event about the object (aggregated and rate limited by the host). A
    refusal is logged: an Event is never worth failing a reconcile for."""
    event = client.Event(
        regarding=types.ObjectRef(gvk=gvk, namespace=meta.get("namespace"), name=meta["name"]),
        uid=meta.get("uid"),
        event_type=client.EventType.WARNING if warning else client.EventType.NORMAL,
        reason=reason,
        message=message,
    )
    try:
        client.record_event(event)
    except Err as error:
        log.log(log.Level.WARN, f"recording event {reason}: {_api_error(error)!r}")


def controlled_by(meta: ObjectMeta, uid: str) -> bool:
    """Whether `uid` is the object's controlling owner."""
    return any(o.get("controller") and o["uid"] == uid for o in meta.get("ownerReferences", []))
