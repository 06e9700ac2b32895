"""A small, Pythonic face over the kubewasm 0.2 contract's `cache` and `client` imports, over
contract 0.2.2's declaration: queue rules with predicates (`when`), and over contract 0.3's
admission export: `Policy`, a base class for the exported `Admission` class that hands a
subclass each review as a checked `Review` (its objects parsed into dicts) and builds the
verdicts (`allow`, `deny`, `mutated`) and the webhook declaration (`webhook`, `rule`).

Objects stay the API server's JSON, as dicts, typed with `TypedDict`s for the fields a controller
reads: an object read, changed and written back keeps every field, also those not typed here.
A refused write raises an `ApiError` subclass (`Conflict`, `NotFound`, ...), so a controller
catches exactly what it can act on and lets the rest fail the reconcile (the host retries it
with backoff).
"""

import json
from typing import Any, NotRequired, Optional, Sequence, TypedDict

from componentize_py_types import Err
from wit_world.imports import cache, client, log, types

try:  # contract 0.2.2's declaration (world `reconciler`); a 0.2.0 world has no predicates
    from wit_world.exports.plugin import Predicate, QueueSpec
except ImportError:
    Predicate = QueueSpec = None

try:  # contract 0.3's admission (world `admission-policy`); earlier worlds have none
    from wit_world.imports import admission_types as admission
except ImportError:
    admission = None


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


def has_synced(subscription: int) -> bool:
    """Whether the subscription's cache has been filled by its first list: a policy answering
    from a cache still filling would answer from a partial picture."""
    try:
        return cache.has_synced(subscription)
    except Err as error:
        raise CacheError(repr(error.value)) from None


# Contract 0.3: admission policies (world `admission-policy`, wit/0.3).


class ReviewError(Exception):
    """A review the policy cannot answer (no object where it needs one, an object that is not a
    JSON object): the exported call answers `err`, and the webhook's failure policy decides."""


def _need_admission() -> None:
    if admission is None:
        raise RuntimeError("admission needs contract 0.3 (world `admission-policy`)")


def _object(text: Optional[str], what: str) -> Optional[dict]:
    if text is None:
        return None
    try:
        value = json.loads(text)
    except ValueError as error:
        raise ReviewError(f"the {what} is not JSON: {error}") from None
    if not isinstance(value, dict):
        raise ReviewError(f"the {what} is not a JSON object")
    return value


class Review:
    """One AdmissionReview request with its objects parsed: `operation` is `"CREATE"`,
    `"UPDATE"`, `"DELETE"` or `"CONNECT"`; `object` (None for a delete) and `old_object` (None
    for a create) are dicts. Built from the host's `admission-request`, whose object texts are
    the API server's and are checked here to be JSON objects."""

    def __init__(self, request: "admission.AdmissionRequest"):
        self.request = request
        self.uid: str = request.uid
        self.operation: str = request.operation.name
        self.kind = request.kind
        self.resource = request.resource
        self.sub_resource: Optional[str] = request.sub_resource
        self.namespace: Optional[str] = request.namespace
        self.name: Optional[str] = request.name
        self.dry_run: bool = request.dry_run
        self.user = request.user_info
        self.object = _object(request.object, "object")
        self.old_object = _object(request.old_object, "old object")


def allow(*warnings: str) -> "admission.Verdict":
    """An allowed verdict, with warnings for the user (kubectl prints them)."""
    _need_admission()
    return admission.Verdict(allowed=True, code=0, message="", warnings=list(warnings))


def deny(message: str, code: int = 403, warnings: Sequence[str] = ()) -> "admission.Verdict":
    """A denial with the HTTP `code` it is reported with and `message` (kubectl shows it)."""
    _need_admission()
    return admission.Verdict(allowed=False, code=code, message=message, warnings=list(warnings))


def mutated(obj: Optional[dict], *warnings: str) -> "admission.Mutation":
    """A mutating policy's answer: allowed, stored as `obj` (None: unchanged)."""
    _need_admission()
    return admission.Mutation(
        verdict=allow(*warnings), object=None if obj is None else json.dumps(obj)
    )


def rule(
    resources: Sequence[str],
    operations: Sequence[str] = ("CREATE", "UPDATE"),
    groups: Sequence[str] = ("",),
    versions: Sequence[str] = ("v1",),
    scope: str = "namespaced",
) -> "admission.Rule":
    """Which requests a webhook is sent: `rule(["pods"])` is creates and updates of core v1
    Pods; `scope` is `"namespaced"`, `"cluster"` or `"any"`."""
    _need_admission()
    return admission.Rule(
        operations=[admission.Operation[op] for op in operations],
        api_groups=list(groups),
        api_versions=list(versions),
        resources=list(resources),
        scope=admission.Scope[scope.upper()],
    )


def not_in(key: str, *values: str) -> "admission.LabelSelector":
    """A label selector matching objects (or namespaces) whose label `key` is none of `values`
    (or absent)."""
    _need_admission()
    requirement = admission.SelectorRequirement(
        key=key, operator=admission.SelectorOperator.NOT_IN, values=list(values)
    )
    return admission.LabelSelector(match_labels=[], match_expressions=[requirement])


def webhook(
    *rules: "admission.Rule",
    fail: bool = True,
    timeout_seconds: int = 10,
    namespace_selector: Optional["admission.LabelSelector"] = None,
    object_selector: Optional["admission.LabelSelector"] = None,
) -> "admission.Webhook":
    """A webhook declaration: its rules, failure policy (`fail=True`: a review the policy cannot
    answer is denied; `False`: allowed), the API server's timeout, selectors. No side effects."""
    _need_admission()
    return admission.Webhook(
        rules=list(rules),
        failure_policy=admission.FailurePolicy.FAIL if fail else admission.FailurePolicy.IGNORE,
        side_effects=admission.SideEffects.NONE,
        timeout_seconds=timeout_seconds,
        namespace_selector=namespace_selector,
        object_selector=object_selector,
    )


def _answer(call, request):
    try:
        return call(Review(request))
    except Err:
        raise
    except Exception as error:  # a failed review: the failure policy answers, the instance lives
        raise Err(f"{type(error).__name__}: {error}") from None


class Policy:
    """The base of a policy's exported `Admission` class. A subclass sets `validating` and/or
    `mutating` (a `webhook(...)`, read by `declare` after `init`, so `init` may set them) and
    overrides `check(review) -> Verdict` and/or `change(review) -> Mutation`. Any exception they
    raise answers `err` with its text: the webhook's failure policy decides, and the instance
    keeps serving."""

    validating: Optional["admission.Webhook"] = None
    mutating: Optional["admission.Webhook"] = None

    def declare(self) -> "admission.AdmissionInfo":
        _need_admission()
        return admission.AdmissionInfo(validating=self.validating, mutating=self.mutating)

    def validate(self, request: "admission.AdmissionRequest") -> "admission.Verdict":
        return _answer(self.check, request)

    def mutate(self, request: "admission.AdmissionRequest") -> "admission.Mutation":
        return _answer(self.change, request)

    def check(self, review: Review) -> "admission.Verdict":
        raise Err("this policy declares no validating webhook")

    def change(self, review: Review) -> "admission.Mutation":
        raise Err("this policy declares no mutating webhook")
