//! The real-server harness itself ([`kubewasm_tests::envtest`]): users, kubeconfigs, the audit
//! log, restart, compaction and teardown, and the server the run's tests share. Real-server tier:
//! every test needing a real API server lives in a module named `real`, which `cargo xtask test`
//! runs only when `KUBEBUILDER_ASSETS` is set.

mod real {
    use std::path::Path;
    use std::sync::{Arc, Mutex};

    use futures::StreamExt;
    use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
    use kube::api::{ListParams, ObjectMeta, PostParams, VersionMatch, WatchEvent, WatchParams};
    use kube::{Api, Client};
    use kubewasm_tests::envtest::{Envtest, SharedEnvtest, User};

    async fn start() -> Envtest {
        Envtest::start()
            .await
            .unwrap_or_else(|e| panic!("the real API server does not start: {e}"))
    }

    fn forbidden(error: &kube::Error) -> bool {
        matches!(error, kube::Error::Api(s) if s.code == 403)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_admin_may_list_the_restricted_user_may_not_and_the_audit_log_says_who_asked() {
        let server = start().await;
        let admin: Api<ConfigMap> = Api::namespaced(server.admin(), "kube-system");
        admin
            .list(&ListParams::default())
            .await
            .expect("the admin lists ConfigMaps");
        let restricted: Api<ConfigMap> = Api::namespaced(server.restricted(), "kube-system");
        let error = restricted
            .list(&ListParams::default())
            .await
            .expect_err("the restricted user has no rights yet");
        assert!(forbidden(&error), "{error}");

        // The kubeconfig files authenticate the same users.
        let from_file = |user: User| {
            let path = server.kubeconfig(user);
            async move {
                let kubeconfig = kube::config::Kubeconfig::read_from(&path).expect("kubeconfig");
                let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
                    .await
                    .expect("config");
                Client::try_from(config).expect("client")
            }
        };
        let restricted: Api<ConfigMap> =
            Api::namespaced(from_file(User::Restricted).await, "kube-system");
        assert!(forbidden(
            &restricted.list(&ListParams::default()).await.unwrap_err()
        ));
        let admin: Api<ConfigMap> = Api::namespaced(from_file(User::Admin).await, "kube-system");
        let mut watch = std::pin::pin!(
            admin
                .watch(&WatchParams::default().timeout(1), "0")
                .await
                .expect("the admin watches")
        );
        while watch.next().await.is_some() {}

        let asked: Vec<(String, String)> = server
            .audit_events()
            .expect("audit log")
            .into_iter()
            .filter(|e| {
                e.resource == "configmaps"
                    && e.namespace.as_deref() == Some("kube-system")
                    && ["admin", "restricted"].contains(&e.user.as_str())
            })
            .map(|e| (e.user, e.verb))
            .collect();
        let pairs = |user: &str, verb: &str| (user.to_owned(), verb.to_owned());
        assert_eq!(
            asked,
            [
                pairs("admin", "list"),
                pairs("restricted", "list"),
                pairs("restricted", "list"),
                pairs("admin", "watch"),
            ]
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_restart_keeps_the_data_and_compaction_expires_old_versions() {
        let server = start().await;
        let api: Api<ConfigMap> = Api::namespaced(server.admin(), "default");
        let cm = ConfigMap {
            metadata: ObjectMeta {
                name: Some("kept".into()),
                ..ObjectMeta::default()
            },
            ..ConfigMap::default()
        };
        let created = api
            .create(&PostParams::default(), &cm)
            .await
            .expect("create");
        let rv = created.metadata.resource_version.expect("rv");
        let mut later = cm.clone();
        later.metadata.name = Some("later".into());
        api.create(&PostParams::default(), &later)
            .await
            .expect("create");

        server.restart_api_server().await.expect("restart");
        let kept = api
            .get("kept")
            .await
            .expect("the object survived the restart");
        assert_eq!(kept.metadata.resource_version.as_deref(), Some(rv.as_str()));
        // The new watch cache starts at the latest write, after `rv`: a watch from `rv` must
        // relist.
        let mut watch = std::pin::pin!(
            api.watch(&WatchParams::default().timeout(5), &rv)
                .await
                .expect("watch request")
        );
        match watch.next().await {
            Some(Ok(WatchEvent::Error(e))) => assert_eq!(e.code, 410, "{e:?}"),
            other => panic!("a watch from before the restart got {other:?}"),
        }

        // A list at exactly `rv` is served from etcd until etcd compacts past it.
        let exact = ListParams::default().at(&rv).matching(VersionMatch::Exact);
        api.list(&exact).await.expect("etcd still has rv");
        let revision = server.compact_etcd().await.expect("compact");
        assert!(revision > rv.parse::<i64>().expect("numeric rv"));
        match api.list(&exact).await {
            Err(kube::Error::Api(s)) => assert_eq!(s.code, 410, "{s:?}"),
            other => panic!("a list at a compacted revision got {other:?}"),
        }
    }

    /// Two attaches in one run reach the same server (the second finds the first's keeper), and
    /// what one writes the other reads.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_tests_of_a_run_attach_to_one_shared_server() {
        let first = SharedEnvtest::attach()
            .await
            .unwrap_or_else(|e| panic!("the shared API server is not there: {e}"));
        let second = SharedEnvtest::attach()
            .await
            .unwrap_or_else(|e| panic!("attaching again: {e}"));
        assert_eq!(first.url(), second.url());
        let namespace = format!("shared-{}", std::process::id());
        let namespaces: Api<Namespace> = Api::all(first.admin());
        let object = Namespace {
            metadata: ObjectMeta {
                name: Some(namespace.clone()),
                ..ObjectMeta::default()
            },
            ..Namespace::default()
        };
        namespaces
            .create(&PostParams::default(), &object)
            .await
            .expect("create a namespace");
        let read: Api<Namespace> = Api::all(second.admin());
        read.get(&namespace)
            .await
            .expect("the other attachment reads it");
    }

    fn alive(pid: u32) -> bool {
        Path::new(&format!("/proc/{pid}")).exists()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_servers_are_killed_when_a_test_panics() {
        let pids = Arc::new(Mutex::new(Vec::new()));
        let seen = pids.clone();
        let test = tokio::spawn(async move {
            let server = start().await;
            *seen.lock().unwrap() = server.process_ids();
            panic!("a failing test");
        });
        assert!(test.await.expect_err("the task panicked").is_panic());
        let pids = pids.lock().unwrap().clone();
        assert_eq!(pids.len(), 2, "etcd and kube-apiserver ran");
        assert!(
            pids.iter().all(|p| !alive(*p)),
            "still running after the panic: {pids:?}"
        );

        // Stopping the API server alone leaves etcd running, and a stopped server is no
        // longer listed.
        let server = start().await;
        server.stop_api_server();
        assert_eq!(server.process_ids().len(), 1);
        let ids = server.process_ids();
        drop(server);
        assert!(ids.iter().all(|p| !alive(*p)));
    }
}
