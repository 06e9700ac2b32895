//! The host's kube client against a real kube-apiserver: HTTP/2 where the server offers it,
//! authentication kept, and the User-Agent in the audit log.

mod real {
    use std::time::Duration;

    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::Api;
    use kube::api::ListParams;
    use kubewasm::api_client::{self, ConnectionOptions};
    use kubewasm_informer::{InformerKey, SharedInformerFactory};
    use kubewasm_runtime::client::USER_AGENT_VALUE;
    use kubewasm_tests::envtest::{Envtest, User};
    use kubewasm_tests::proxy::SilencingProxy;
    use kubewasm_tests::wait_until;

    async fn admin_config(server: &Envtest) -> kube::Config {
        let kubeconfig = kube::config::Kubeconfig::read_from(server.kubeconfig(User::Admin))
            .expect("kubeconfig");
        kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
            .await
            .expect("config")
    }

    /// The HTTP version of the answer to a GET of `/version` through `client`.
    async fn version_spoken(client: &kube::Client) -> http::Version {
        let request = http::Request::get("/version")
            .body(kube::client::Body::empty())
            .unwrap();
        let response = client.send(request).await.expect("GET /version");
        assert!(response.status().is_success(), "{}", response.status());
        response.version()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_host_speaks_http2_to_the_api_server_and_names_itself_in_the_audit_log() {
        let server = Envtest::start().await.expect("the real API server starts");
        let client = api_client::build(admin_config(&server).await, &ConnectionOptions::default())
            .expect("client");
        assert_eq!(version_spoken(&client).await, http::Version::HTTP_2);
        let http1 = api_client::build(
            admin_config(&server).await,
            &ConnectionOptions {
                http2: false,
                ..ConnectionOptions::default()
            },
        )
        .expect("client");
        assert_eq!(version_spoken(&http1).await, http::Version::HTTP_11);

        // Authenticated as the admin (a restricted user may not list in kube-system), and an
        // informer syncs and watches over the one HTTP/2 connection.
        Api::<ConfigMap>::namespaced(client.clone(), "kube-system")
            .list(&ListParams::default())
            .await
            .expect("the admin lists");
        let factory = SharedInformerFactory::new(client, Default::default());
        let informer = factory.informer_for(
            InformerKey::all(kube::discovery::ApiResource::erase::<ConfigMap>(&()))
                .in_namespace("kube-system"),
        );
        factory.start();
        assert!(
            tokio::time::timeout(Duration::from_secs(30), informer.wait_synced())
                .await
                .unwrap_or(false),
            "the informer syncs"
        );
        let audited = || {
            server
                .audit_events()
                .expect("audit log")
                .into_iter()
                .filter(|e| {
                    e.resource == "configmaps"
                        && e.namespace.as_deref() == Some("kube-system")
                        && e.user == "admin"
                })
                .map(|e| (e.verb, e.user_agent))
                .collect::<Vec<_>>()
        };
        assert!(
            wait_until(Duration::from_secs(30), || audited()
                .iter()
                .any(|(v, _)| v == "watch"))
            .await,
            "the informer's watch is audited: {:?}",
            audited()
        );
        let audited = audited();
        assert!(
            audited.iter().all(|(_, agent)| agent == USER_AGENT_VALUE),
            "every request names kubewasm: {audited:?}"
        );
        factory.shutdown().await;
    }

    /// A path that silently drops new connections (the proxy accepts them and answers nothing,
    /// so the TLS handshake hangs): a connect fails within the connect timeout, where kube's
    /// own (30 s) held every reconnect for 31 s.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_connect_on_a_path_that_drops_packets_fails_within_its_timeout() {
        let server = Envtest::start().await.expect("the real API server starts");
        let upstream: std::net::SocketAddr = server
            .url()
            .trim_start_matches("https://")
            .parse()
            .expect("address");
        let proxy = SilencingProxy::start(upstream).await.expect("the proxy");
        let timeout = Duration::from_secs(2);
        let client = || async {
            let mut config = admin_config(&server).await;
            config.cluster_url = format!("https://{}", proxy.addr()).parse().expect("url");
            let options = ConnectionOptions {
                connect_timeout: timeout,
                ..ConnectionOptions::default()
            };
            api_client::build(config, &options).expect("client")
        };
        client()
            .await
            .apiserver_version()
            .await
            .expect("the server answers through the proxy");

        proxy.black_hole_new();
        // A new client: no connection to reuse, the request must connect.
        let client = client().await;
        let started = std::time::Instant::now();
        let failed = tokio::time::timeout(Duration::from_secs(60), client.apiserver_version())
            .await
            .expect("the request ends");
        let took = started.elapsed();
        eprintln!("a black-holed connect failed after {took:?}: {failed:?}");
        let err = failed.expect_err("nothing answers on the black-holed path");
        assert!(
            format!("{err:?}").contains("TimedOut"),
            "the connect timed out: {err:?}"
        );
        assert!(
            (timeout..timeout + Duration::from_secs(3)).contains(&took),
            "failed after {took:?}, not at the connect timeout ({timeout:?})"
        );
    }
}
