"""kube.py's helpers under the system's python3 (`python3 -B -m unittest kube_test`; `cargo test
-p xtask` runs it), against stand-ins for the modules componentize-py generates from the WIT:
records and variant cases with the generated names and fields, and bindings that record each
call and answer what a test tells them to. What crosses into the host (the binding called, the
records and JSON text handed to it) and what a refusal becomes are checked; the real bindings
are exercised by the sample-controller's and the templates' end-to-end tests.
"""

import enum
import json
import sys
import types as pytypes
import unittest
from dataclasses import dataclass
from typing import Any, Optional


class Err(Exception):
    """componentize_py_types.Err: an import's `err(value)`."""

    def __init__(self, value: Any):
        super().__init__(value)
        self.value = value


def _record(name: str, *fields: str):
    return dataclass(type(name, (), {"__annotations__": {f: Any for f in fields}}))


def _module(name: str, **items) -> pytypes.ModuleType:
    module = pytypes.ModuleType(name)
    module.__dict__.update(items)
    sys.modules[name] = module
    return module


# The generated records and cases kube.py uses, by the names componentize-py gives them.
wit_types = _module(
    "wit_world.imports.types",
    Gvk=_record("Gvk", "group", "version", "kind"),
    Key=_record("Key", "subscription", "namespace", "name"),
    ObjectRef=_record("ObjectRef", "gvk", "namespace", "name"),
    PageRequest=_record("PageRequest", "limit", "continue_token"),
    ObjectPage=_record("ObjectPage", "objects", "continue_token"),
    StringPage=_record("StringPage", "items", "continue_token"),
    IndexDecl=_record("IndexDecl", "subscription", "name", "source"),
    IndexSource_Label=_record("IndexSource_Label", "value"),
    IndexSource_Annotation=_record("IndexSource_Annotation", "value"),
    IndexSource_Field=_record("IndexSource_Field", "value"),
    IndexSource_OwnerUid=_record("IndexSource_OwnerUid"),
    QueueRule=object,  # a Union alias in the generated module: only annotations use it
    QueueRule_OwnKey=_record("QueueRule_OwnKey"),
    QueueRule_ControllingOwner=_record("QueueRule_ControllingOwner", "value"),
    CacheError_UnknownIndex=_record("CacheError_UnknownIndex", "value"),
    InvalidDetails=_record("InvalidDetails", "message", "causes"),
    ServerError=_record("ServerError", "code", "reason", "message"),
    **{
        f"ApiError_{case}": _record(f"ApiError_{case}", "value")
        for case in [
            "Conflict", "NotFound", "AlreadyExists", "Forbidden", "Invalid", "NotGranted",
            "TooManyRequests", "Timeout", "ServerError",
        ]
    },
)


class Calls:
    """What the stand-in bindings were called with, and what they answer next."""

    def __init__(self):
        self.made: list[tuple[str, tuple]] = []
        self.answers: dict[str, list] = {}

    def binding(self, name: str):
        def call(*args):
            self.made.append((name, args))
            answer = self.answers.get(name, [None]).pop(0)
            if isinstance(answer, Err):
                raise answer
            return answer

        return call

    def answer(self, name: str, *answers):
        self.answers[name] = list(answers)


calls = Calls()


class Propagation(enum.Enum):
    ORPHAN = 0
    BACKGROUND = 1
    FOREGROUND = 2


class EventType(enum.Enum):
    NORMAL = 0
    WARNING = 1


class Level(enum.Enum):
    TRACE = 0
    DEBUG = 1
    INFO = 2
    WARN = 3
    ERROR = 4


class Predicate(enum.Enum):
    RESOURCE_VERSION = 0
    GENERATION = 1
    LABELS = 2
    ANNOTATIONS = 3


_module("componentize_py_types", Err=Err)
_module("wit_world")
_module("wit_world.exports")
wit_client = _module(
    "wit_world.imports.client",
    PatchBody_Merge=_record("PatchBody_Merge", "value"),
    PatchBody_Json=_record("PatchBody_Json", "value"),
    PatchBody_Apply=_record("PatchBody_Apply", "value"),
    ApplyPatch=_record("ApplyPatch", "object", "force"),
    DeleteOptions=_record("DeleteOptions", "uid", "resource_version", "propagation"),
    Deleted_Gone=_record("Deleted_Gone"),
    Deleted_Pending=_record("Deleted_Pending", "value"),
    Event=_record("Event", "regarding", "uid", "event_type", "reason", "message"),
    Propagation=Propagation,
    EventType=EventType,
    **{
        name: calls.binding(f"client.{name}")
        for name in ["create", "update", "update_status", "patch", "patch_status", "delete", "record_event"]
    },
)
_module(
    "wit_world.imports.cache",
    **{
        name: calls.binding(f"cache.{name}")
        for name in ["get", "list_objects", "list_keys", "count", "by_index", "index_values", "has_synced"]
    },
)
_module("wit_world.imports.queue", add=calls.binding("queue.add"), add_after=calls.binding("queue.add_after"))
_module("wit_world.imports.log", Level=Level, log=calls.binding("log.log"))
_module(
    "wit_world.imports",
    **{n: sys.modules[f"wit_world.imports.{n}"] for n in ["types", "client", "cache", "queue", "log"]},
)
wit_reconcile = _module(
    "wit_world.exports.reconcile",
    Action_Done=_record("Action_Done"),
    Action_RequeueAfter=_record("Action_RequeueAfter", "value"),
)
_module("wit_world.exports.plugin", Predicate=Predicate, QueueSpec=_record("QueueSpec", "rule", "when"))
sys.modules["wit_world.exports"].reconcile = wit_reconcile

import kube  # noqa: E402  (after the stand-ins it imports)

CONFIGMAP = wit_types.Gvk(group="", version="v1", kind="ConfigMap")
META: kube.ObjectMeta = {"name": "app", "namespace": "default"}


class Case(unittest.TestCase):
    def setUp(self):
        calls.made.clear()
        calls.answers.clear()

    def only_call(self) -> tuple[str, tuple]:
        self.assertEqual(len(calls.made), 1, calls.made)
        return calls.made[0]


class Errors(Case):
    def test_each_api_error_case_becomes_its_public_class_with_reason_and_message(self):
        for case, cls, reason in [
            ("Conflict", kube.Conflict, "conflict"),
            ("NotFound", kube.NotFound, "not-found"),
            ("AlreadyExists", kube.AlreadyExists, "already-exists"),
            ("Forbidden", kube.Forbidden, "forbidden"),
            ("NotGranted", kube.NotGranted, "not-granted"),
            ("TooManyRequests", kube.TooManyRequests, "too-many-requests"),
            ("Timeout", kube.Timeout, "timeout"),
        ]:
            error = kube.api_error(Err(getattr(wit_types, f"ApiError_{case}")("said the server")))
            self.assertIs(type(error), cls)
            self.assertEqual(error.reason, reason)
            self.assertEqual(str(error), "said the server")

    def test_record_payloads_keep_their_record_and_message(self):
        details = wit_types.InvalidDetails(message="spec.replicas: must be >= 0", causes=[])
        error = kube.api_error(Err(wit_types.ApiError_Invalid(details)))
        self.assertIsInstance(error, kube.Invalid)
        self.assertEqual(str(error), "spec.replicas: must be >= 0")
        self.assertIs(error.detail, details)
        server = wit_types.ServerError(code=503, reason="ServiceUnavailable", message="later")
        error = kube.api_error(Err(wit_types.ApiError_ServerError(server)))
        self.assertEqual((error.reason, error.detail.code), ("server-error", 503))

    def test_a_case_this_helper_does_not_know_is_a_plain_api_error(self):
        error = kube.api_error(Err("something new"))
        self.assertIs(type(error), kube.ApiError)
        self.assertEqual(error.reason, "unknown")


class Writes(Case):
    def test_create_sends_the_json_and_answers_the_servers_object(self):
        calls.answer("client.create", json.dumps({"metadata": {"name": "app", "uid": "u1"}}))
        created = kube.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": META})
        name, (text,) = self.only_call()
        self.assertEqual(name, "client.create")
        self.assertEqual(json.loads(text)["metadata"], META)
        self.assertEqual(created["metadata"]["uid"], "u1")

    def test_a_refused_write_raises_the_typed_error(self):
        calls.answer("client.update", Err(wit_types.ApiError_Conflict("stale")))
        with self.assertRaises(kube.Conflict) as raised:
            kube.update({"metadata": META})
        self.assertEqual(str(raised.exception), "stale")

    def test_merge_patch_targets_the_object_and_sends_a_merge_body(self):
        calls.answer("client.patch", "{}")
        kube.merge_patch(CONFIGMAP, META, {"metadata": {"labels": {"a": None}}})
        name, (target, body) = self.only_call()
        self.assertEqual(name, "client.patch")
        self.assertEqual(target, wit_types.ObjectRef(gvk=CONFIGMAP, namespace="default", name="app"))
        self.assertIsInstance(body, wit_client.PatchBody_Merge)
        self.assertEqual(json.loads(body.value), {"metadata": {"labels": {"a": None}}})

    def test_json_patch_sends_the_operations_and_status_goes_to_the_subresource(self):
        ops = [
            {"op": "test", "path": "/metadata/resourceVersion", "value": "7"},
            {"op": "replace", "path": "/data/a", "value": "b"},
            {"op": "move", "from": "/data/x", "path": "/data/y"},
            {"op": "remove", "path": "/data/z"},
        ]
        calls.answer("client.patch", "{}")
        kube.json_patch(CONFIGMAP, META, ops)
        name, (_, body) = self.only_call()
        self.assertEqual(name, "client.patch")
        self.assertIsInstance(body, wit_client.PatchBody_Json)
        self.assertEqual(json.loads(body.value), ops)
        calls.made.clear()
        calls.answer("client.patch_status", "{}")
        kube.json_patch_status(CONFIGMAP, META, [{"op": "add", "path": "/status/n", "value": 1}])
        self.assertEqual(self.only_call()[0], "client.patch_status")

    def test_a_json_patch_the_server_would_refuse_is_refused_here_by_what_is_wrong(self):
        for ops, says in [
            ([{"op": "upsert", "path": "/a"}], "op 'upsert'"),
            ([{"op": "remove", "path": "data/a"}], "not a JSON pointer"),
            ([{"op": "replace", "path": "/a"}], "replace needs a value"),
            ([{"op": "copy", "path": "/a"}], "copy needs a `from`"),
            ([{"op": "add", "path": "/a", "value": 1}, {"path": "/b"}], "operation 1"),
        ]:
            with self.assertRaisesRegex(ValueError, says):
                kube.json_patch(CONFIGMAP, META, ops)
        self.assertEqual(calls.made, [])

    def test_apply_derives_the_target_from_the_object(self):
        calls.answer("client.patch", "{}")
        deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": META, "spec": {}}
        kube.apply(deployment, force=True)
        _, (target, body) = self.only_call()
        self.assertEqual(target.gvk, wit_types.Gvk(group="apps", version="v1", kind="Deployment"))
        self.assertEqual((target.namespace, target.name), ("default", "app"))
        self.assertTrue(body.value.force)
        self.assertEqual(json.loads(body.value.object), deployment)
        calls.made.clear()
        calls.answer("client.patch", "{}")
        kube.apply({"apiVersion": "v1", "kind": "ConfigMap", "metadata": META})
        self.assertEqual(self.only_call()[1][0].gvk, CONFIGMAP)

    def test_delete_answers_none_when_gone_and_the_object_while_finalizers_run(self):
        calls.answer("client.delete", wit_client.Deleted_Gone())
        self.assertIsNone(kube.delete(CONFIGMAP, "default", "app", uid="u1", propagation="foreground"))
        _, (target, options) = self.only_call()
        self.assertEqual(target.name, "app")
        self.assertEqual((options.uid, options.propagation), ("u1", Propagation.FOREGROUND))
        pending = {"metadata": {"name": "app", "deletionTimestamp": "now"}}
        calls.answer("client.delete", wit_client.Deleted_Pending(json.dumps(pending)))
        self.assertEqual(kube.delete(CONFIGMAP, "default", "app"), pending)
        calls.answer("client.delete", Err(wit_types.ApiError_NotFound("gone")))
        with self.assertRaises(kube.NotFound):
            kube.delete(CONFIGMAP, "default", "app")

    def test_a_refused_event_is_logged_not_raised(self):
        calls.answer("client.record_event", Err(wit_types.ApiError_NotGranted("no Event grant")))
        kube.record_event(CONFIGMAP, META, True, "Bad", "it is bad")
        (event_call, (event,)), (log_call, (level, message)) = calls.made
        self.assertEqual((event_call, event.event_type), ("client.record_event", EventType.WARNING))
        self.assertEqual((log_call, level), ("log.log", Level.WARN))
        self.assertIn("no Event grant", message)


class Reads(Case):
    def test_list_objects_and_by_index_page_through_continue_tokens(self):
        calls.answer(
            "cache.by_index",
            wit_types.ObjectPage(objects=['{"n": 1}', '{"n": 2}'], continue_token="t1"),
            wit_types.ObjectPage(objects=['{"n": 3}'], continue_token=None),
        )
        found = list(kube.by_index(1, "node", "n1"))
        self.assertEqual([o["n"] for o in found], [1, 2, 3])
        tokens = [args[3].continue_token for _, args in calls.made]
        self.assertEqual(tokens, [None, "t1"])
        self.assertEqual(calls.made[0][1][:3], (1, "node", "n1"))
        calls.made.clear()
        calls.answer("cache.list_objects", wit_types.ObjectPage(objects=[], continue_token=None))
        self.assertEqual(list(kube.list_objects(0, "ns", "app=web")), [])
        self.assertEqual(self.only_call()[1][:3], (0, "ns", "app=web"))

    def test_keys_and_index_values_page_through_strings(self):
        calls.answer(
            "cache.index_values",
            wit_types.StringPage(items=["a"], continue_token="t"),
            wit_types.StringPage(items=["b"], continue_token=None),
        )
        self.assertEqual(list(kube.index_values(0, "owner")), ["a", "b"])

    def test_a_refused_query_raises_cache_error_naming_why(self):
        calls.answer("cache.by_index", Err(wit_types.CacheError_UnknownIndex("nodes")))
        with self.assertRaisesRegex(kube.CacheError, "nodes"):
            list(kube.by_index(0, "nodes", "x"))
        calls.answer("cache.get", '{"metadata": {"name": "app"}}')
        self.assertEqual(kube.get(0, "default", "app")["metadata"]["name"], "app")
        calls.answer("cache.get", None)
        self.assertIsNone(kube.get(0, "default", "gone"))


class Declaration(Case):
    def test_index_takes_exactly_one_source(self):
        self.assertEqual(
            kube.index(1, "image", field="spec.containers.image"),
            wit_types.IndexDecl(1, "image", wit_types.IndexSource_Field("spec.containers.image")),
        )
        self.assertEqual(kube.index(0, "app", label="app").source, wit_types.IndexSource_Label("app"))
        self.assertEqual(kube.index(0, "t", annotation="team").source.value, "team")
        self.assertIsInstance(kube.index(0, "owner", owner_uid=True).source, wit_types.IndexSource_OwnerUid)
        for wrong in [{}, {"label": "a", "field": "b"}, {"label": "a", "owner_uid": True}, {"label": ""}]:
            with self.assertRaises(ValueError, msg=repr(wrong)):
                kube.index(0, "x", **wrong)
        with self.assertRaises(ValueError):
            kube.index(0, "", label="app")

    def test_when_is_a_queue_spec_with_predicates(self):
        spec = kube.when(wit_types.QueueRule_OwnKey(), Predicate.GENERATION, Predicate.LABELS)
        self.assertEqual(spec.rule, wit_types.QueueRule_OwnKey())
        self.assertEqual(spec.when, [Predicate.GENERATION, Predicate.LABELS])
        self.assertEqual(kube.when(wit_types.QueueRule_OwnKey()).when, [])


class Queue(Case):
    def test_enqueue_and_enqueue_after_hand_the_key_and_milliseconds(self):
        kube.enqueue(0, "default", "app")
        kube.enqueue_after(1, None, "node-1", 1.5)
        self.assertEqual(
            calls.made,
            [
                ("queue.add", (wit_types.Key(0, "default", "app"),)),
                ("queue.add_after", (wit_types.Key(1, None, "node-1"), 1500)),
            ],
        )

    def test_a_refused_key_raises_queue_error(self):
        calls.answer("queue.add", Err("no subscription 9"))
        with self.assertRaisesRegex(kube.QueueError, "no subscription 9"):
            kube.enqueue(9, None, "x")

    def test_a_delay_that_is_no_number_of_milliseconds_is_refused_before_the_host(self):
        for bad in [-1, float("nan"), 50 * 24 * 3600, "5"]:
            with self.assertRaises(ValueError, msg=repr(bad)):
                kube.enqueue_after(0, None, "x", bad)
            with self.assertRaises(ValueError, msg=repr(bad)):
                kube.requeue_after(bad)
        self.assertEqual(calls.made, [])

    def test_reconciles_answers(self):
        self.assertEqual(kube.done(), wit_reconcile.Action_Done())
        self.assertEqual(kube.requeue_after(30), wit_reconcile.Action_RequeueAfter(30_000))
        self.assertEqual(kube.requeue_after(0.0001), wit_reconcile.Action_RequeueAfter(1))


if __name__ == "__main__":
    unittest.main()
