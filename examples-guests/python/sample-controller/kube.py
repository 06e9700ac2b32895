"""A small, Pythonic face over the kubewasm 0.2 contract's `cache`, `client` and `queue`
imports (reads: `get`, `list_objects`, `list_keys`, `count`, `by_index`, `index_values`; writes:
`create`, `update`, `update_status`, `merge_patch`, `json_patch`, `apply`, `delete`, the
`*_status` patches, `record_event`; the queue: `enqueue`, `enqueue_after`, and `DONE` /
`requeue_after` for `reconcile`'s answer), over the declaration (`index`, and contract 0.2.2's
queue rules with predicates, `when`), and over contract 0.3's admission export: `Policy`, a
base class for the exported `Admission` class that hands a subclass each review as a checked
`Review` (its objects parsed into dicts) and builds the verdicts (`allow`, `deny`, `mutated`)
and the webhook declaration (`webhook`, `rule`).

Objects stay the API server's JSON, as dicts, typed with `TypedDict`s for the fields a controller
reads: an object read, changed and written back keeps every field, also those not typed here.
A refused write raises an `ApiError` subclass (`Conflict`, `NotFound`, ...), so a controller
catches exactly what it can act on and lets the rest fail the reconcile (the host retries it
with backoff). Code calling the raw bindings turns their `Err` into the same classes with
`api_error`.
"""

import json
import math
from typing import Any, Callable, Iterator, NotRequired, Optional, Sequence, TypedDict

from componentize_py_types import Err
from wit_world.imports import cache, client, log, queue, types

try:  # reconcile's answer (worlds `controller`, `reconciler`); a policy or an observer has none
    from wit_world.exports import reconcile as _reconcile
except ImportError:
    _reconcile = None

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
    """A write the API server (or the host) refused. `reason` is the WIT `api-error` case
    (`"conflict"`, `"not-found"`, ...; `"unknown"` for a case newer than this helper), `detail`
    its payload: the server's message, or for `invalid` and `server-error` the record."""

    reason = "unknown"

    def __init__(self, message: str = "", detail: Any = None):
        super().__init__(message)
        self.detail = detail


class Conflict(ApiError):
    """A stale resourceVersion: the cache will have the newer object; retry."""
    reason = "conflict"


class NotFound(ApiError):
    reason = "not-found"


class AlreadyExists(ApiError):
    reason = "already-exists"


class Forbidden(ApiError):
    reason = "forbidden"


class Invalid(ApiError):
    reason = "invalid"


class NotGranted(ApiError):
    """The host's config does not grant this write."""
    reason = "not-granted"


class TooManyRequests(ApiError):
    reason = "too-many-requests"


class Timeout(ApiError):
    reason = "timeout"


class ServerError(ApiError):
    reason = "server-error"


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


def api_error(error: Err) -> ApiError:
    """The `ApiError` subclass for the `Err` a raw `client` binding raised (`Conflict` for
    `api-error.conflict`, ...), for code that calls the bindings itself."""
    value = error.value
    detail = getattr(value, "value", value)
    message = detail if isinstance(detail, str) else getattr(detail, "message", repr(detail))
    return _ERRORS.get(type(value), ApiError)(message, detail)


def _write(call, *args) -> dict:
    try:
        return json.loads(call(*args))
    except Err as error:
        raise api_error(error) from None


class CacheError(Exception):
    """A cache query the host refused (a subscription or index it does not know)."""


def _read(call, *args):
    try:
        return call(*args)
    except Err as error:
        raise CacheError(repr(error.value)) from None


def get(subscription: int, namespace: Optional[str], name: str) -> Optional[dict]:
    """The object from the host's cache, or None."""
    found = _read(cache.get, subscription, namespace, name)
    return json.loads(found) if found is not None else None


def _pages(query: Callable[["types.PageRequest"], Any]) -> Iterator:
    """The items of a paged cache query, page after page (each page as large as the host
    allows, `limit` 0)."""
    token: Optional[str] = None
    while True:
        page = _read(query, types.PageRequest(limit=0, continue_token=token))
        yield from getattr(page, "objects", None) or getattr(page, "items", None) or []
        token = page.continue_token
        if token is None:
            return


def list_objects(
    subscription: int, namespace: Optional[str] = None, label_selector: Optional[str] = None
) -> Iterator[dict]:
    """The cached objects of the subscription, optionally of one namespace and matching a label
    selector (`app=web,tier!=db`), read page by page as the loop goes."""
    for text in _pages(lambda page: cache.list_objects(subscription, namespace, label_selector, page)):
        yield json.loads(text)


def list_keys(
    subscription: int, namespace: Optional[str] = None, label_selector: Optional[str] = None
) -> Iterator[str]:
    """The keys (`namespace/name`, or `name` for cluster-scoped objects) of the same selection
    as `list_objects`, without copying the objects."""
    return _pages(lambda page: cache.list_keys(subscription, namespace, label_selector, page))


def count(
    subscription: int, namespace: Optional[str] = None, label_selector: Optional[str] = None
) -> int:
    """How many cached objects `list_objects` would yield."""
    return _read(cache.count, subscription, namespace, label_selector)


def by_index(subscription: int, index_name: str, value: str) -> Iterator[dict]:
    """The cached objects the index `index_name` (declared in `init`, see `index`; `namespace`
    always exists) files under `value`."""
    for text in _pages(lambda page: cache.by_index(subscription, index_name, value, page)):
        yield json.loads(text)


def index_values(subscription: int, index_name: str) -> Iterator[str]:
    """The values the index `index_name` files objects under."""
    return _pages(lambda page: cache.index_values(subscription, index_name, page))


def index(
    subscription: int,
    name: str,
    *,
    label: Optional[str] = None,
    annotation: Optional[str] = None,
    field: Optional[str] = None,
    owner_uid: bool = False,
) -> types.IndexDecl:
    """An index for `init`'s `indexes`, on one subscription, from exactly one source: a label's
    value, an annotation's, a dotted field path (`spec.nodeName`; a path crosses lists:
    `spec.containers.image` files a Pod under each container's image, and a list of strings,
    numbers or bools under each element) or, with `owner_uid=True`, the UID of every owner
    reference. The host computes it; `by_index` reads it."""
    sources = [
        types.IndexSource_Label(label) if label is not None else None,
        types.IndexSource_Annotation(annotation) if annotation is not None else None,
        types.IndexSource_Field(field) if field is not None else None,
        types.IndexSource_OwnerUid() if owner_uid else None,
    ]
    chosen = [source for source in sources if source is not None]
    if len(chosen) != 1:
        raise ValueError(
            f"index {name!r}: give exactly one of label, annotation, field, owner_uid=True"
        )
    if not name:
        raise ValueError("an index needs a name")
    for text in (label, annotation, field):
        if text is not None and not text:
            raise ValueError(f"index {name!r}: an empty label, annotation or field path")
    return types.IndexDecl(subscription=subscription, name=name, source=chosen[0])


def create(obj: dict) -> dict:
    """Creates `obj` (with apiVersion, kind and metadata); answers the server's object."""
    return _write(client.create, json.dumps(obj))


def update(obj: dict) -> dict:
    """Replaces `obj`; its metadata.resourceVersion is the precondition (stale: `Conflict`)."""
    return _write(client.update, json.dumps(obj))


def update_status(obj: dict) -> dict:
    """Replaces the status subresource of `obj`; its metadata.resourceVersion is the
    precondition (stale: `Conflict`)."""
    return _write(client.update_status, json.dumps(obj))


def _ref(gvk: types.Gvk, meta: ObjectMeta) -> types.ObjectRef:
    return types.ObjectRef(gvk=gvk, namespace=meta.get("namespace"), name=meta["name"])


def merge_patch(gvk: types.Gvk, meta: ObjectMeta, patch: dict[str, Any]) -> dict:
    """Applies a JSON merge patch (RFC 7386) to the object `meta` names (`name`, `namespace`):
    keys set are replaced, keys set to None removed, the rest kept; lists are replaced whole.
    Answers the server's object."""
    return _write(client.patch, _ref(gvk, meta), client.PatchBody_Merge(json.dumps(patch)))


def merge_patch_status(gvk: types.Gvk, meta: ObjectMeta, patch: dict[str, Any]) -> dict:
    """Applies a JSON merge patch to the object's status subresource."""
    return _write(client.patch_status, _ref(gvk, meta), client.PatchBody_Merge(json.dumps(patch)))


_JSON_PATCH_OPS = {"add", "remove", "replace", "move", "copy", "test"}


def _json_patch_body(operations: Sequence[dict[str, Any]]) -> str:
    """The text of a JSON patch (RFC 6902), each operation checked for what the server would
    refuse anyway, so the mistake is named here: its `op`, a `path` that is empty or starts with
    `/`, a `value` for add, replace and test, a `from` for move and copy."""
    for i, operation in enumerate(operations):
        op = operation.get("op")
        if op not in _JSON_PATCH_OPS:
            raise ValueError(f"JSON patch operation {i}: op {op!r} is not one of {sorted(_JSON_PATCH_OPS)}")
        path = operation.get("path")
        if not isinstance(path, str) or not (path == "" or path.startswith("/")):
            raise ValueError(f"JSON patch operation {i}: path {path!r} is not a JSON pointer")
        if op in ("add", "replace", "test") and "value" not in operation:
            raise ValueError(f"JSON patch operation {i}: {op} needs a value")
        if op in ("move", "copy") and not isinstance(operation.get("from"), str):
            raise ValueError(f"JSON patch operation {i}: {op} needs a `from` pointer")
    return json.dumps(list(operations))


def json_patch(gvk: types.Gvk, meta: ObjectMeta, operations: Sequence[dict[str, Any]]) -> dict:
    """Applies a JSON patch (RFC 6902: `[{"op": "replace", "path": "/spec/replicas", "value":
    3}]`) to the object `meta` names. A `test` operation makes it conditional: the server
    refuses the whole patch (`Invalid`) when it fails. Answers the server's object."""
    return _write(client.patch, _ref(gvk, meta), client.PatchBody_Json(_json_patch_body(operations)))


def json_patch_status(
    gvk: types.Gvk, meta: ObjectMeta, operations: Sequence[dict[str, Any]]
) -> dict:
    """`json_patch` on the object's status subresource."""
    return _write(
        client.patch_status, _ref(gvk, meta), client.PatchBody_Json(_json_patch_body(operations))
    )


def apply(obj: dict, force: bool = False) -> dict:
    """Server-side apply of `obj` (with apiVersion, kind and metadata.name), as the plugin's
    field manager: the fields `obj` sets become the plugin's; `force` takes over fields another
    manager owns instead of answering `Conflict`."""
    meta = obj["metadata"]
    group, _, version = obj["apiVersion"].rpartition("/")
    gvk = types.Gvk(group=group, version=version, kind=obj["kind"])
    body = client.PatchBody_Apply(client.ApplyPatch(object=json.dumps(obj), force=force))
    return _write(client.patch, _ref(gvk, meta), body)


def delete(
    gvk: types.Gvk,
    namespace: Optional[str],
    name: str,
    uid: Optional[str] = None,
    propagation: Optional[str] = None,
) -> Optional[dict]:
    """Deletes the object, only if it still has `uid` when one is given (else `Conflict`).
    `propagation` is `"background"`, `"foreground"` or `"orphan"` (None: the resource's
    default). Answers None when the object is gone, or the object still there with its
    deletionTimestamp while finalizers run. An object already gone raises `NotFound`."""
    options = client.DeleteOptions(
        uid=uid,
        resource_version=None,
        propagation=None if propagation is None else client.Propagation[propagation.upper()],
    )
    target = types.ObjectRef(gvk=gvk, namespace=namespace, name=name)
    try:
        deleted = client.delete(target, options)
    except Err as error:
        raise api_error(error) from None
    if isinstance(deleted, client.Deleted_Pending):
        return json.loads(deleted.value)
    return None


# The workqueue and reconcile's answer.


class QueueError(Exception):
    """A key the host would not queue (no such subscription, or a plugin without `reconcile`)."""


def _key(subscription: int, namespace: Optional[str], name: str) -> types.Key:
    return types.Key(subscription=subscription, namespace=namespace, name=name)


def _millis(seconds: float) -> int:
    """`seconds` as the WIT's u32 milliseconds, refused when it is not a number of them."""
    if not isinstance(seconds, (int, float)) or math.isnan(seconds) or seconds < 0:
        raise ValueError(f"{seconds!r} is not a delay in seconds")
    millis = math.ceil(seconds * 1000)
    if millis > 0xFFFF_FFFF:
        raise ValueError(f"a delay of {seconds} s is longer than the contract's 49.7 days")
    return millis


def enqueue(subscription: int, namespace: Optional[str], name: str) -> None:
    """Queues the key for `reconcile` now (a key queued twice before it runs runs once)."""
    try:
        queue.add(_key(subscription, namespace, name))
    except Err as error:
        raise QueueError(str(error.value)) from None


def enqueue_after(subscription: int, namespace: Optional[str], name: str, seconds: float) -> None:
    """Queues the key after `seconds` (a key already waiting sooner keeps the sooner time)."""
    try:
        queue.add_after(_key(subscription, namespace, name), _millis(seconds))
    except Err as error:
        raise QueueError(str(error.value)) from None


def _need_reconcile() -> None:
    if _reconcile is None:
        raise RuntimeError("reconcile's answer needs a world with `reconcile`")


def done() -> "_reconcile.Action":
    """`reconcile`'s answer when the key is settled."""
    _need_reconcile()
    return _reconcile.Action_Done()


def requeue_after(seconds: float) -> "_reconcile.Action":
    """`reconcile`'s answer that reconciles the key again after `seconds` (a periodic check,
    a wait for something outside the cluster); a failure is raised instead, for backoff."""
    _need_reconcile()
    return _reconcile.Action_RequeueAfter(_millis(seconds))


def record_event(gvk: types.Gvk, meta: ObjectMeta, warning: bool, reason: str, message: str) -> None:
    """Records a Kubernetes Event about the object (aggregated and rate limited by the host). A
    refusal is logged: an Event is never worth failing a reconcile for."""
    event = client.Event(
        regarding=_ref(gvk, meta),
        uid=meta.get("uid"),
        event_type=client.EventType.WARNING if warning else client.EventType.NORMAL,
        reason=reason,
        message=message,
    )
    try:
        client.record_event(event)
    except Err as error:
        log.log(log.Level.WARN, f"recording event {reason}: {api_error(error)!r}")


def controlled_by(meta: ObjectMeta, uid: str) -> bool:
    """Whether `uid` is the object's controlling owner."""
    return any(o.get("controller") and o["uid"] == uid for o in meta.get("ownerReferences", []))


def has_synced(subscription: int) -> bool:
    """Whether the subscription's cache has been filled by its first list: a policy answering
    from a cache still filling would answer from a partial picture."""
    return _read(cache.has_synced, subscription)


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
