//! The protobuf wire against the JSON wire: the same objects listed and watched both ways must
//! give the cache the same bytes (member order, escapes, times, base64, managedFields).

use std::collections::BTreeMap;
use std::time::Duration;

use futures::StreamExt;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::discovery::ApiResource;
use kubewasm_informer::{
    InformerKey, KubeListerWatcher, ListWatchOptions, ListerWatcher, WatchEvent, WireStats,
};
use serde_json::{Value, json};

fn dynamic(v: &Value) -> DynamicObject {
    serde_json::from_value(v.clone()).expect("an object")
}

/// Strings the JSON encoder escapes in its own way.
const TRICKY: &str =
    "<a href=\"x\">&amp;</a> \\ \u{8}\u{c}\n\r\t\u{1}\u{1f}\u{7f} é € 😀 \u{2028}\u{2029}";

fn lister(
    client: &kube::Client,
    resource: ApiResource,
    ns: Option<&str>,
    protobuf: bool,
    strip: bool,
) -> (KubeListerWatcher, ListWatchOptions) {
    let mut key = InformerKey::all(resource);
    if let Some(ns) = ns {
        key = key.in_namespace(ns);
    }
    let options = ListWatchOptions {
        protobuf,
        strip_managed_fields: strip,
        page_size: 3,
        ..ListWatchOptions::default()
    };
    (
        KubeListerWatcher::new(client.clone(), &key, options.clone()),
        options,
    )
}

/// Every object's stored JSON by key, from paged lists and from one list at any version.
async fn listed(lw: &KubeListerWatcher) -> (BTreeMap<String, String>, String) {
    let mut objects = BTreeMap::new();
    let mut token = None;
    let resource_version = loop {
        let page = lw.list(token.take()).await.expect("a page");
        for o in page.items {
            objects.insert(o.key().to_owned(), o.json().to_owned());
        }
        match page.continue_token {
            Some(t) => token = Some(t),
            None => break page.resource_version,
        }
    };
    // A list at any version comes from kube-apiserver's watch cache, which may trail the
    // consistent pages above by the last writes: it must catch up to exactly what they held.
    let caught_up = tokio::time::timeout(Duration::from_secs(60), async {
        loop {
            let any = lw.list_any().await.expect("a list at any version");
            assert!(any.continue_token.is_none());
            let any: BTreeMap<_, _> = any
                .items
                .iter()
                .map(|o| (o.key().to_owned(), o.json().to_owned()))
                .collect();
            if any == objects {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    assert!(
        caught_up.is_ok(),
        "a list at any version comes to hold what the pages held"
    );
    (objects, resource_version)
}

async fn seed(client: &kube::Client, ns: &str) {
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    let namespace = serde_json::from_value(json!({"metadata": {"name": ns, "labels": {"tricky": "a-b_c.d"}, "annotations": {"note": TRICKY}}})).unwrap();
    namespaces
        .create(&PostParams::default(), &namespace)
        .await
        .expect("namespace");
    let cms: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        ns,
        &ApiResource::erase::<k8s_openapi::api::core::v1::ConfigMap>(&()),
    );
    let owner = json!([
        {"apiVersion": "v1", "kind": "ConfigMap", "name": "o", "uid": "11111111-2222-3333-4444-555555555555"},
        {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "uid": "u-2", "controller": true, "blockOwnerDeletion": false},
        {"apiVersion": "x.io/v1", "kind": "Other", "name": "x", "uid": "u-3", "controller": false}
    ]);
    let objects = [
        json!({"metadata": {"name": "plain"}}),
        json!({"metadata": {"name": "data", "labels": {"app": "web", "z": ""}, "annotations": {"a": TRICKY, "empty": ""}},
               "data": {"k": TRICKY, "": "empty key?", "empty": "", "multi": "line1\nline2\n"}}),
        json!({"metadata": {"name": "binary"}, "binaryData": {"bin": "AAEC/f7/", "empty": ""}, "data": {"t": "x"}, "immutable": true}),
        json!({"metadata": {"name": "mutable", "finalizers": ["example.com/keep", "b/c"], "ownerReferences": owner}, "immutable": false}),
        json!({"metadata": {"generateName": "gen-"}, "data": {"n": "1"}}),
    ];
    for mut object in objects {
        if object["metadata"]["name"].is_null() {
            object["metadata"]["name"] = Value::Null;
            object["metadata"].as_object_mut().unwrap().remove("name");
        }
        object["apiVersion"] = "v1".into();
        object["kind"] = "ConfigMap".into();
        if let Err(e) = cms.create(&PostParams::default(), &dynamic(&object)).await {
            // The empty data key is refused by validation: create the object without it.
            assert!(e.to_string().contains("data"), "{e}");
            object["data"].as_object_mut().unwrap().remove("");
            cms.create(&PostParams::default(), &dynamic(&object))
                .await
                .expect("configmap");
        }
    }
    // Server-side apply writes fieldsV1 with keyed entries (k:{...}) into managedFields.
    let applied = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "applied", "labels": {"a": "b"}, "annotations": {"a": "<b>"}}, "data": {"x": "&"}});
    cms.patch(
        "applied",
        &PatchParams::apply("kubewasm<test>&"),
        &Patch::Apply(&applied),
    )
    .await
    .expect("apply");
    // A deletionTimestamp and deletionGracePeriodSeconds: deleted while a finalizer holds it.
    cms.delete("mutable", &DeleteParams::default())
        .await
        .expect("delete starts");

    let secrets: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        ns,
        &ApiResource::erase::<k8s_openapi::api::core::v1::Secret>(&()),
    );
    for object in [
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "opaque"}, "data": {"a": "Zg==", "b": "Zm8=", "c": "/wAQ", "d": ""}}),
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "typed"}, "type": "kubernetes.io/basic-auth", "stringData": {"username": TRICKY, "password": "p"}, "immutable": true}),
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "empty"}}),
    ] {
        secrets
            .create(&PostParams::default(), &dynamic(&object))
            .await
            .expect("secret");
    }
    let accounts: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        ns,
        &ApiResource::erase::<k8s_openapi::api::core::v1::ServiceAccount>(&()),
    );
    for object in [
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "bare"}}),
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "full"}, "automountServiceAccountToken": false,
               "secrets": [{"name": "s1"}, {"name": "s2", "namespace": ns, "kind": "Secret", "apiVersion": "v1", "fieldPath": "data"}],
               "imagePullSecrets": [{"name": "pull"}, {}]}),
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "on"}, "automountServiceAccountToken": true}),
    ] {
        accounts
            .create(&PostParams::default(), &dynamic(&object))
            .await
            .expect("service account");
    }
    // Claim templates typed by the client, untyped and mistyped: the API server types each
    // `v1` `PersistentVolumeClaim`, which protobuf does not carry and the rendering writes.
    let sets: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        ns,
        &ApiResource::erase::<k8s_openapi::api::apps::v1::StatefulSet>(&()),
    );
    let claim = |type_meta: Value, name: &str| {
        let mut claim = json!({"metadata": {"name": name, "annotations": {"a": TRICKY}},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}});
        if let (Some(claim), Value::Object(type_meta)) = (claim.as_object_mut(), type_meta) {
            claim.extend(type_meta);
        }
        claim
    };
    let pod = json!({"metadata": {"labels": {"app": "db"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}});
    for (name, templates) in [
        ("plain", None),
        (
            "db",
            Some(json!([
                claim(json!({}), "data"),
                claim(
                    json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim"}),
                    "logs"
                ),
                claim(
                    json!({"apiVersion": "example.com/v9", "kind": "Claim"}),
                    "odd"
                )
            ])),
        ),
    ] {
        let mut object = json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": name},
            "spec": {"serviceName": name, "selector": {"matchLabels": {"app": "db"}}, "template": pod}});
        if let Some(templates) = templates {
            object["spec"]["volumeClaimTemplates"] = templates;
        }
        sets.create(&PostParams::default(), &dynamic(&object))
            .await
            .expect("statefulset");
    }
    let applied = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "applied"}, "secrets": [{"name": "a"}, {"name": "b<&>"}]});
    accounts
        .patch(
            "applied",
            &PatchParams::apply("kubewasm-test"),
            &Patch::Apply(&applied),
        )
        .await
        .expect("apply");
}

fn resources() -> Vec<(ApiResource, bool)> {
    use k8s_openapi::api::apps::v1::StatefulSet;
    use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret, ServiceAccount};
    vec![
        (ApiResource::erase::<ConfigMap>(&()), true),
        (ApiResource::erase::<StatefulSet>(&()), true),
        (ApiResource::erase::<Secret>(&()), true),
        (ApiResource::erase::<ServiceAccount>(&()), true),
        (ApiResource::erase::<Namespace>(&()), false),
    ]
}

/// An object of `resource` named `name` to create while both wires watch: a StatefulSet's
/// carries an untyped claim template, the others only metadata.
fn watched(resource: &ApiResource, name: &str) -> Value {
    let mut object = json!({"apiVersion": resource.api_version, "kind": resource.kind,
        "metadata": {"name": name, "labels": {"w": "1"}, "annotations": {"t": TRICKY}}});
    if resource.kind == "StatefulSet" {
        object["spec"] = json!({"serviceName": name, "selector": {"matchLabels": {"app": "w"}},
            "template": {"metadata": {"labels": {"app": "w"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}},
            "volumeClaimTemplates": [{"metadata": {"name": "d"},
                "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}]});
    }
    object
}

/// Reads `n` object events (bookmarks skipped) as `(type, json)`.
async fn events(
    stream: &mut kubewasm_informer::WatchStream,
    n: usize,
) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    while out.len() < n {
        let event = tokio::time::timeout(Duration::from_secs(60), stream.next())
            .await
            .expect("an event in time")
            .expect("the stream goes on")
            .expect("an event");
        match event {
            WatchEvent::Added(o) => out.push(("ADDED", o.json().to_owned())),
            WatchEvent::Modified(o) => out.push(("MODIFIED", o.json().to_owned())),
            WatchEvent::Deleted(o) => out.push(("DELETED", o.json().to_owned())),
            WatchEvent::Bookmark { .. } => {}
        }
    }
    out
}

/// A LIST over the API server's gzip threshold (128 KiB), asked for with and without gzip on
/// each wire: the gzipped answers arrive compressed (fewer bytes on the wire than the decoders
/// read) and fill the cache with the same bytes as the plain ones.
async fn gzipped_lists_fill_the_cache_as_plain_ones(client: &kube::Client, ns: &str) {
    use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": ns}})).expect("a namespace"),
        )
        .await
        .expect("the namespace");
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    for i in 0..80 {
        let object = json!({"metadata": {"name": format!("big-{i:03}"), "labels": {"n": i.to_string()}},
            "data": {"value": format!("{i} {}", "configuration text ".repeat(150)), "tricky": TRICKY}});
        config_maps
            .create(
                &PostParams::default(),
                &serde_json::from_value(object).expect("a ConfigMap"),
            )
            .await
            .expect("create");
    }
    let resource = ApiResource::erase::<ConfigMap>(&());
    let key = InformerKey::all(resource).in_namespace(ns);
    // A list at any version is served from kube-apiserver's watch cache, which may not have
    // seen the last creates yet: wait until it has all of them (it never goes back).
    let plain = KubeListerWatcher::new(client.clone(), &key, ListWatchOptions::default());
    tokio::time::timeout(Duration::from_secs(60), async {
        while plain.list_any().await.expect("a list").items.len() < 80 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("the watch cache catches up with the creates");
    for protobuf in [true, false] {
        let mut cached = Vec::new();
        for gzip in [true, false] {
            let options = ListWatchOptions {
                protobuf,
                gzip,
                ..ListWatchOptions::default()
            };
            let lw = KubeListerWatcher::new(client.clone(), &key, options.clone());
            let page = lw.list_any().await.expect("a list at any version");
            assert_eq!(page.items.len(), 80);
            let stats = options.wire.snapshot();
            assert_eq!(
                (stats.protobuf_lists, stats.json_lists),
                (u64::from(protobuf), u64::from(!protobuf)),
                "{stats:?}"
            );
            assert!(stats.list_body_bytes > 128 * 1024, "{stats:?}");
            if gzip {
                assert_eq!(stats.gzip_lists, 1, "{stats:?}");
                assert!(
                    stats.list_wire_bytes * 4 < stats.list_body_bytes,
                    "compressed on the wire: {stats:?}"
                );
            } else {
                assert_eq!(stats.gzip_lists, 0, "{stats:?}");
                assert_eq!(stats.list_wire_bytes, stats.list_body_bytes, "{stats:?}");
            }
            let objects: BTreeMap<String, String> = page
                .items
                .iter()
                .map(|o| (o.key().to_owned(), o.json().to_owned()))
                .collect();
            cached.push(objects);
        }
        assert_eq!(cached[0], cached[1], "protobuf: {protobuf}");
    }
}

mod real {
    use super::*;
    use kubewasm_tests::envtest::Envtest;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn gzipped_lists_arrive_compressed_and_cache_the_same_bytes() {
        let server = Envtest::start().await.expect("the real API server starts");
        gzipped_lists_fill_the_cache_as_plain_ones(&server.admin(), "gzip-real").await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn protobuf_and_json_give_the_cache_the_same_bytes() {
        let server = Envtest::start().await.expect("the real API server starts");
        let client = server.admin();
        let ns = "protobuf-diff";
        seed(&client, ns).await;
        let mut compared = 0;
        for strip in [false, true] {
            for (resource, namespaced) in resources() {
                let scope = namespaced.then_some(ns);
                let (pb, pb_options) = lister(&client, resource.clone(), scope, true, strip);
                let (js, js_options) = lister(&client, resource.clone(), scope, false, strip);
                let (from_pb, _) = listed(&pb).await;
                let (from_js, resource_version) = listed(&js).await;
                assert!(!from_js.is_empty());
                for (key, json) in &from_js {
                    assert_eq!(
                        from_pb.get(key),
                        Some(json),
                        "{} {key} (managedFields stripped: {strip})",
                        resource.kind
                    );
                }
                let managed = from_js
                    .values()
                    .filter(|j| j.contains("\"managedFields\""))
                    .count();
                if strip {
                    assert_eq!(managed, 0);
                } else if matches!(resource.kind.as_str(), "ConfigMap" | "ServiceAccount") {
                    assert!(managed > 0, "server-side apply wrote managedFields");
                }
                assert_eq!(from_pb.len(), from_js.len());
                if resource.kind == "ConfigMap" {
                    // The tricky parts were there to compare.
                    let data = &from_js[&format!("{ns}/data")];
                    for escaped in [
                        r#"\u003ca href=\"x\"\u003e\u0026amp;"#,
                        r"\b\f\n\r\t\u0001\u001f",
                        r"\u2028\u2029",
                        "😀",
                    ] {
                        assert!(data.contains(escaped), "{escaped} in {data}");
                    }
                    let deleting = &from_js[&format!("{ns}/mutable")];
                    assert!(
                        deleting.contains("\"deletionTimestamp\":\"")
                            && deleting.contains("\"immutable\":false"),
                        "{deleting}"
                    );
                    assert!(
                        from_js[&format!("{ns}/binary")]
                            .contains(r#""binaryData":{"bin":"AAEC/f7/","empty":""}"#)
                    );
                    if !strip {
                        assert!(
                            from_js[&format!("{ns}/applied")].contains(r#""fieldsV1":{"f:data":"#)
                        );
                    }
                }
                compared += from_js.len();
                let pb_stats = pb_options.wire.snapshot();
                assert!(
                    pb_stats.protobuf_lists > 0 && pb_stats.json_lists == 0,
                    "{pb_stats:?}"
                );
                assert_eq!(pb_stats.fallbacks, 0);
                let js_stats = js_options.wire.snapshot();
                assert_eq!(
                    js_stats,
                    WireStats {
                        json_lists: js_stats.json_lists,
                        list_wire_bytes: js_stats.list_wire_bytes,
                        list_body_bytes: js_stats.list_body_bytes,
                        ..WireStats::default()
                    }
                );

                if !namespaced || strip {
                    continue;
                }
                // The same changes seen through both watches.
                let timeout = Duration::from_secs(300);
                let mut pb_watch = pb
                    .watch(resource_version.clone(), false, timeout)
                    .await
                    .expect("pb watch");
                let mut js_watch = js
                    .watch(resource_version, false, timeout)
                    .await
                    .expect("json watch");
                assert_eq!(pb_options.wire.snapshot().protobuf_watches, 1);
                let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &resource);
                let name = format!("watched-{}", resource.plural);
                let mut object = watched(&resource, &name);
                api.create(&PostParams::default(), &dynamic(&object))
                    .await
                    .expect("create");
                object["metadata"]["labels"]["w"] = "2".into();
                api.patch(&name, &PatchParams::default(), &Patch::Merge(&object))
                    .await
                    .expect("apply");
                api.delete(&name, &DeleteParams::default())
                    .await
                    .expect("delete");
                let from_pb = events(&mut pb_watch, 3).await;
                let from_js = events(&mut js_watch, 3).await;
                assert_eq!(from_pb, from_js, "{}", resource.kind);
                assert_eq!(
                    from_pb.iter().map(|e| e.0).collect::<Vec<_>>(),
                    ["ADDED", "MODIFIED", "DELETED"]
                );
                compared += 3;
            }
        }
        assert!(compared > 20, "{compared}");
    }

    /// A streaming list (a watch with sendInitialEvents) into a cache: its objects by key, and
    /// the wires it was answered in.
    async fn streamed(
        client: &kube::Client,
        ns: &str,
        protobuf: bool,
    ) -> (BTreeMap<String, String>, WireStats) {
        use kubewasm_informer::{FactoryOptions, ListStrategy, SharedInformerFactory};
        let mut options = FactoryOptions::default();
        options.reflector.list = ListStrategy::Streaming;
        options.list_watch.protobuf = protobuf;
        let wire = options.list_watch.wire.clone();
        let factory = SharedInformerFactory::new(client.clone(), options);
        let resource = ApiResource::erase::<k8s_openapi::api::core::v1::ConfigMap>(&());
        let informer = factory.informer_for(InformerKey::all(resource).in_namespace(ns));
        factory.start();
        assert!(
            tokio::time::timeout(Duration::from_secs(60), factory.wait_for_cache_sync())
                .await
                .expect("synced in time")
        );
        let cached = informer
            .indexer()
            .list()
            .iter()
            .map(|o| (o.key().to_owned(), o.json().to_owned()))
            .collect();
        factory.shutdown().await;
        (cached, wire.snapshot())
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_streaming_list_in_protobuf_fills_the_cache_as_in_json() {
        let server = Envtest::start().await.expect("the real API server starts");
        let client = server.admin();
        let ns = "protobuf-stream";
        seed(&client, ns).await;
        let (from_pb, pb) = streamed(&client, ns, true).await;
        let (from_js, js) = streamed(&client, ns, false).await;
        assert!(from_js.len() > 3);
        assert_eq!(from_pb, from_js);
        assert!(pb.protobuf_watches >= 1, "{pb:?}");
        assert_eq!(
            (
                pb.protobuf_lists,
                pb.json_lists,
                pb.json_watches,
                pb.fallbacks
            ),
            (0, 0, 0, 0),
            "{pb:?}"
        );
        assert!(js.json_watches >= 1 && js.protobuf_watches == 0, "{js:?}");
    }

    /// CustomResourceDefinitions are served in protobuf but are not k8s.io/api's, so
    /// `kubewasm-protobuf` has no schema of them (every k8s.io/api kind has one).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn kinds_without_a_schema_are_read_as_json() {
        use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
        let server = Envtest::start().await.expect("the real API server starts");
        let client = server.admin();
        assert!(!kubewasm_protobuf::supports(
            "apiextensions.k8s.io/v1",
            "CustomResourceDefinition"
        ));
        // The server would answer protobuf, had the lister asked for it.
        let request = http::Request::get("/apis/apiextensions.k8s.io/v1/customresourcedefinitions")
            .header(http::header::ACCEPT, kubewasm_protobuf::ACCEPT)
            .body(kube::client::Body::empty())
            .expect("a request");
        let response = client.send(request).await.expect("a list");
        let content_type = response.headers()[http::header::CONTENT_TYPE]
            .to_str()
            .expect("a content type");
        assert!(
            kubewasm_protobuf::is_protobuf(content_type),
            "{content_type}"
        );
        let resource = ApiResource::erase::<CustomResourceDefinition>(&());
        let (lw, options) = lister(&client, resource, None, true, true);
        lw.list(None).await.expect("a list");
        let stats = options.wire.snapshot();
        assert_eq!(
            (stats.json_lists, stats.protobuf_lists),
            (1, 0),
            "{stats:?}"
        );
    }
}

/// The dev server stores its own JSON layout (not Go's), so its two wires are compared as JSON
/// values, the protobuf one allowed the zero members Go writes (a StatefulSet's `"status":{}`);
/// the byte-for-byte comparison is the real tier's.
mod dev {
    use super::*;
    use kubewasm_devserver::{DevServer, Options};
    use kubewasm_informer::{FactoryOptions, SharedInformerFactory};

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn gzipped_lists_arrive_compressed_and_cache_the_same_bytes() {
        let server = DevServer::start(Options::default())
            .await
            .expect("dev server");
        gzipped_lists_fill_the_cache_as_plain_ones(&server.client(), "gzip-dev").await;
        server.shutdown().await;
    }

    /// Whether `pb` is `js` but for members Go writes as zeros (`"status":{}`, `"replicas":0`)
    /// where the dev server's own layout leaves them out.
    fn same_but_go_zeros(pb: &Value, js: &Value) -> bool {
        fn zero(v: &Value) -> bool {
            match v {
                Value::Null | Value::Bool(false) => true,
                Value::Number(n) => n.as_f64() == Some(0.0),
                Value::String(s) => s.is_empty(),
                Value::Array(items) => items.is_empty(),
                Value::Object(members) => members.values().all(zero),
                Value::Bool(true) => false,
            }
        }
        match (pb, js) {
            (Value::Object(pb), Value::Object(js)) => {
                js.iter()
                    .all(|(k, v)| pb.get(k).is_some_and(|p| same_but_go_zeros(p, v)))
                    && pb.iter().all(|(k, v)| js.contains_key(k) || zero(v))
            }
            (Value::Array(pb), Value::Array(js)) => {
                pb.len() == js.len() && pb.iter().zip(js).all(|(p, j)| same_but_go_zeros(p, j))
            }
            (pb, js) => pb == js,
        }
    }

    /// A gzipped LIST whose stream does not decompress (cut short, a bad CRC, garbage after a
    /// valid header), on either wire: the LIST fails with an error that says the body is
    /// corrupt (not a dead connection, not a protobuf fallback) and is counted, the next LIST
    /// holds every object, and an informer that meets one retries and caches what the server
    /// holds.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_corrupt_gzip_list_fails_clearly_and_the_retry_loses_nothing() {
        use k8s_openapi::api::core::v1::ConfigMap;
        use kubewasm_devserver::GzipCorruption;
        use kubewasm_informer::Error;

        let server = DevServer::start(Options::default())
            .await
            .expect("dev server");
        let client = server.client();
        // 60 ConfigMaps of ~3 KB: a LIST over the 128 KiB the server gzips above.
        for i in 0..60 {
            server
                .create(json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": format!("cm-{i:02}"), "namespace": "default"},
                    "data": {"value": format!("{i} {}", "configuration text ".repeat(150))}}))
                .expect("create");
        }
        let key = InformerKey::all(ApiResource::erase::<ConfigMap>(&()));
        fn keyed<'a>(
            items: impl IntoIterator<Item = &'a kubewasm_informer::Object>,
        ) -> BTreeMap<String, String> {
            items
                .into_iter()
                .map(|o| (o.key().to_owned(), o.json().to_owned()))
                .collect()
        }
        // What each wire caches from an answer that is not gzipped.
        let mut plain = BTreeMap::new();
        for protobuf in [true, false] {
            let options = ListWatchOptions {
                protobuf,
                gzip: false,
                ..ListWatchOptions::default()
            };
            let page = KubeListerWatcher::new(client.clone(), &key, options)
                .list_any()
                .await
                .expect("a plain list");
            assert_eq!(page.items.len(), 60);
            plain.insert(protobuf, keyed(&page.items));
        }

        for how in [
            GzipCorruption::Truncated,
            GzipCorruption::BadCrc,
            GzipCorruption::GarbageAfterHeader,
        ] {
            for protobuf in [true, false] {
                let options = ListWatchOptions {
                    protobuf,
                    ..ListWatchOptions::default()
                };
                let lw = KubeListerWatcher::new(client.clone(), &key, options.clone());
                server.corrupt_gzip_lists(1, how);
                let err = lw
                    .list_any()
                    .await
                    .err()
                    .unwrap_or_else(|| panic!("{how:?}, protobuf {protobuf}: the list failed"));
                assert!(
                    matches!(&err, Error::Response(text) if text.contains("does not decompress")),
                    "{how:?}, protobuf {protobuf}: {err}"
                );
                let stats = options.wire.snapshot();
                assert_eq!(
                    (stats.gzip_failures, stats.gzip_lists, stats.fallbacks),
                    (1, 1, 0),
                    "{how:?}, protobuf {protobuf}: {stats:?}"
                );
                let page = lw.list_any().await.expect("the next list");
                assert!(
                    keyed(&page.items) == plain[&protobuf],
                    "{how:?}, protobuf {protobuf}: the next list caches what a plain one does"
                );
                let stats = options.wire.snapshot();
                assert_eq!((stats.gzip_failures, stats.gzip_lists), (1, 2), "{stats:?}");
                assert_eq!(
                    (stats.protobuf_lists, stats.json_lists),
                    if protobuf { (2, 0) } else { (0, 2) },
                    "{how:?}: the wire is kept: {stats:?}"
                );
            }
        }

        // An informer: the failed LIST is counted as an error, never as a dead connection,
        // and its retry fills the cache.
        server.corrupt_gzip_lists(1, GzipCorruption::Truncated);
        let mut options = FactoryOptions::default();
        options.reflector.backoff.initial = Duration::from_millis(20);
        let wire = options.list_watch.wire.clone();
        let factory = SharedInformerFactory::new(client, options);
        let informer = factory.informer_for(key);
        factory.start();
        assert!(
            tokio::time::timeout(Duration::from_secs(60), factory.wait_for_cache_sync())
                .await
                .expect("synced in time"),
        );
        let cached = informer.indexer().list();
        assert!(
            keyed(cached.iter().map(|o| &**o)) == plain[&true],
            "the informer caches what a plain list does"
        );
        let stats = informer.stats();
        assert!(stats.errors >= 1, "{stats:?}");
        assert_eq!(stats.dead_connections, 0, "{stats:?}");
        assert_eq!(wire.snapshot().gzip_failures, 1, "{:?}", wire.snapshot());
        factory.shutdown().await;
        server.shutdown().await;
    }

    fn values(objects: &BTreeMap<String, String>) -> BTreeMap<String, Value> {
        objects
            .iter()
            .map(|(k, v)| (k.clone(), serde_json::from_str(v).expect("JSON")))
            .collect()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn both_wires_list_and_watch_the_same_objects() {
        let server = DevServer::start(Options::default())
            .await
            .expect("dev server");
        let client = server.client();
        let ns = "protobuf-dev";
        seed(&client, ns).await;
        for (resource, namespaced) in resources() {
            let scope = namespaced.then_some(ns);
            let (pb, pb_options) = lister(&client, resource.clone(), scope, true, true);
            let (js, js_options) = lister(&client, resource.clone(), scope, false, true);
            let (from_pb, _) = listed(&pb).await;
            let (from_js, resource_version) = listed(&js).await;
            assert!(!from_js.is_empty());
            let (pb_values, js_values) = (values(&from_pb), values(&from_js));
            assert_eq!(
                pb_values.keys().collect::<Vec<_>>(),
                js_values.keys().collect::<Vec<_>>()
            );
            for (key, js) in &js_values {
                assert!(
                    same_but_go_zeros(&pb_values[key], js),
                    "{} {key}:\n{}\n{js}",
                    resource.kind,
                    pb_values[key]
                );
            }
            let stats = pb_options.wire.snapshot();
            assert!(
                stats.protobuf_lists > 0 && stats.json_lists == 0,
                "{stats:?}"
            );
            assert_eq!(js_options.wire.snapshot().protobuf_lists, 0);
            if !namespaced {
                continue;
            }
            let timeout = Duration::from_secs(300);
            let mut pb_watch = pb
                .watch(resource_version.clone(), false, timeout)
                .await
                .expect("watch");
            let mut js_watch = js
                .watch(resource_version, false, timeout)
                .await
                .expect("watch");
            assert_eq!(pb_options.wire.snapshot().protobuf_watches, 1);
            let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &resource);
            let name = format!("watched-{}", resource.plural);
            let mut object = watched(&resource, &name);
            api.create(&PostParams::default(), &dynamic(&object))
                .await
                .expect("create");
            object["metadata"]["labels"] = json!({"w": "2"});
            api.patch(&name, &PatchParams::default(), &Patch::Merge(&object))
                .await
                .expect("patch");
            api.delete(&name, &DeleteParams::default())
                .await
                .expect("delete");
            let as_values = |events: Vec<(&'static str, String)>| -> Vec<(&'static str, Value)> {
                events
                    .into_iter()
                    .map(|(t, j)| (t, serde_json::from_str(&j).expect("JSON")))
                    .collect()
            };
            let from_pb = as_values(events(&mut pb_watch, 3).await);
            let from_js = as_values(events(&mut js_watch, 3).await);
            assert_eq!(from_pb.len(), from_js.len(), "{}", resource.kind);
            for ((pb_type, pb), (js_type, js)) in from_pb.iter().zip(&from_js) {
                assert!(
                    pb_type == js_type && same_but_go_zeros(pb, js),
                    "{} {js_type}:\n{pb}\n{js}",
                    resource.kind
                );
            }
        }
        server.shutdown().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_undecodable_protobuf_list_falls_back_to_json_and_loses_nothing() {
        let server = DevServer::start(Options::default())
            .await
            .expect("dev server");
        let client = server.client();
        for i in 0..7 {
            server
                .create(json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": format!("cm-{i}"), "namespace": "default"}, "data": {"i": i.to_string()}}))
                .expect("create");
        }
        server.garble_protobuf_lists(1);
        let mut options = FactoryOptions::default();
        options.list_watch.page_size = 3;
        options.reflector.backoff.initial = Duration::from_millis(20);
        let wire = options.list_watch.wire.clone();
        let factory = SharedInformerFactory::new(client, options);
        let informer = factory.informer_for(InformerKey::all(ApiResource::erase::<
            k8s_openapi::api::core::v1::ConfigMap,
        >(&())));
        factory.start();
        assert!(
            tokio::time::timeout(Duration::from_secs(60), factory.wait_for_cache_sync())
                .await
                .expect("synced in time"),
        );
        let keys: Vec<String> = informer
            .indexer()
            .list()
            .iter()
            .map(|o| o.key().to_owned())
            .collect();
        assert_eq!(keys.len(), 7, "{keys:?}");
        let stats = wire.snapshot();
        assert_eq!(stats.fallbacks, 1, "{stats:?}");
        assert_eq!(
            stats.protobuf_lists, 1,
            "only the garbled answer was protobuf: {stats:?}"
        );
        assert!(stats.json_lists >= 1, "{stats:?}");
        // Later changes arrive over a JSON watch.
        let api: Api<DynamicObject> = Api::namespaced_with(
            server.client(),
            "default",
            &ApiResource::erase::<k8s_openapi::api::core::v1::ConfigMap>(&()),
        );
        api.delete("cm-0", &DeleteParams::default())
            .await
            .expect("delete");
        let indexer = informer.indexer();
        assert!(
            kubewasm_tests::wait_until(Duration::from_secs(60), || indexer
                .get("default/cm-0")
                .is_none())
            .await,
            "the deletion arrives"
        );
        let stats = wire.snapshot();
        assert!(
            stats.json_watches >= 1 && stats.protobuf_watches == 0,
            "{stats:?}"
        );
        factory.shutdown().await;
        server.shutdown().await;
    }
}
