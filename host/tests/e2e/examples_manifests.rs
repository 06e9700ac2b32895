//! `examples/manifests` on a real kube-apiserver: what `kubectl apply -f examples/manifests/`
//! does on a cluster, as `kubewasm dev` seeds them on the dev server.

mod real {
    use std::process::Command;

    use k8s_openapi::api::core::v1::{Pod, ServiceAccount};
    use kube::Api;
    use kubewasm_tests::envtest::User;
    use kubewasm_tests::server::TestServer;
    use kubewasm_tests::{kubectl_binary, workspace_root};

    /// Every manifest applies (no owner reference without a uid; the pods' ServiceAccount is
    /// created with their namespace), the objects are there, and the controller is named by
    /// the annotation the dev server turns into an owner reference. The CRDs' own objects
    /// (a Backup, a Foo) need their CRD established first, as with any `kubectl apply` of a
    /// CRD and its objects together: the second apply creates them.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_example_manifests_apply_with_kubectl() {
        let server = TestServer::real().await;
        let kubeconfig = server
            .envtest()
            .expect("a real server")
            .kubeconfig(User::Admin);
        let manifests = workspace_root().join("examples/manifests");
        let apply = || {
            Command::new(kubectl_binary())
                .arg("--kubeconfig")
                .arg(&kubeconfig)
                .args(["apply", "-f"])
                .arg(&manifests)
                .output()
                .expect("kubectl runs")
        };
        let first = apply();
        let stderr = String::from_utf8_lossy(&first.stderr).into_owned();
        let refused: Vec<&str> = stderr
            .lines()
            .filter(|l| !l.contains("ensure CRDs are installed first"))
            .filter(|l| !l.contains("no matches for kind"))
            .filter(|l| !l.trim().is_empty())
            .collect();
        assert!(refused.is_empty(), "refused: {stderr}");
        let mut applied = first.status.success();
        for _ in 0..20 {
            if applied {
                break;
            }
            // The CRDs were created by the first apply; their kinds are served once established.
            tokio::time::sleep(std::time::Duration::from_millis(500)).await;
            let again = apply();
            applied = again.status.success();
            if !applied {
                eprintln!("apply again: {}", String::from_utf8_lossy(&again.stderr));
            }
        }
        assert!(applied, "kubectl apply never succeeded");

        let client = server.client();
        for ns in ["shop", "tools"] {
            let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), ns);
            accounts.get("default").await.expect("the ServiceAccount");
        }
        let pods: Api<Pod> = Api::namespaced(client.clone(), "shop");
        let pod = pods.get("web-5d8f7c9b4-2xkqp").await.expect("a web pod");
        assert_eq!(
            pod.metadata
                .annotations
                .unwrap_or_default()
                .get("dev.kubewasm.io/controlled-by")
                .map(String::as_str),
            Some("apps/v1/ReplicaSet/web-5d8f7c9b4")
        );
        let tools: Api<Pod> = Api::namespaced(client.clone(), "tools");
        tools.get("debug-shell").await.expect("the standalone pod");
        let foos = Command::new(kubectl_binary())
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .args([
                "get",
                "foos.samplecontroller.k8s.io",
                "-n",
                "shop",
                "-o",
                "name",
            ])
            .output()
            .expect("kubectl runs");
        let names = String::from_utf8_lossy(&foos.stdout);
        assert!(names.contains("example-foo"), "{names}");
    }
}
