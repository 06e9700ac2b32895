//! Several `kubewasm run` replicas of the sample-controller against one in-process dev server:
//! failover under a burst of Foo changes (kill -9 and SIGTERM), sharding, and the failover and
//! throughput benchmarks (ignored tests, see BENCHMARKS.md). Each replica has its own bearer
//! token, which the dev server's request log records, so every write is traced to its replica.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use kubewasm_devserver::{DevServer, RequestRecord, Verb};
use kubewasm_tests::workspace_root;

use super::*;

/// Short timings so the tests are quick: lease 3 s, renew deadline 2 s, retry 300 ms.
const LEASE: Duration = Duration::from_secs(3);
const RETRY: Duration = Duration::from_millis(300);
/// Slack for a machine busy with other builds.
const SLACK: Duration = Duration::from_millis(2500);

/// One dev server seeded with the example manifests (the Foo CRD), the sample-controller's
/// plugin directory and config, and a compile cache the replicas share.
struct Cluster {
    server: DevServer,
    client: kube::Client,
    dir: tempfile::TempDir,
    plugins: PathBuf,
    config: PathBuf,
}

impl Cluster {
    async fn start(namespaces: &[String]) -> Cluster {
        let (server, client) = kubewasm_tests::devserver().await;
        server
            .load_manifests(&workspace_root().join("examples/manifests"))
            .expect("manifests");
        for ns in namespaces {
            let namespace =
                json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}});
            server.create(namespace).expect("namespace");
        }
        let dir = tempfile::tempdir().expect("tempdir");
        let plugins = plugins_dir(dir.path(), &["sample-controller"]);
        let config = dir.path().join("kubewasm.toml");
        std::fs::write(
            &config,
            "[plugins.sample-controller]\n\
             writes = [\"apps/Deployment\", \"samplecontroller.k8s.io/Foo\", \"Event\"]\n\
             write-qps = 1000.0\nwrite-burst = 1000\n",
        )
        .expect("config");
        Cluster {
            server,
            client,
            dir,
            plugins,
            config,
        }
    }

    /// A replica named `name` (its identity and its bearer token), with `extra` flags.
    async fn replica(&self, name: &str, extra: &[&str]) -> Replica {
        self.replica_at(name, &self.server.url(), extra).await
    }

    /// A replica that reaches the server at `url` (a proxy in front of it).
    async fn replica_at(&self, name: &str, url: &str, extra: &[&str]) -> Replica {
        let kubeconfig = self.dir.path().join(format!("{name}.kubeconfig"));
        let yaml = self
            .server
            .kubeconfig_yaml()
            .replace(&self.server.url(), url)
            .replace("user: {}", &format!("user: {{token: {name}}}"));
        std::fs::write(&kubeconfig, yaml).expect("kubeconfig");
        let path = |p: &Path| p.to_str().expect("utf-8 path").to_owned();
        let timings = [
            "--leader-elect-lease-duration",
            "3s",
            "--leader-elect-renew-deadline",
            "2s",
            "--leader-elect-retry-period",
            "300ms",
        ];
        let cache = path(&self.dir.path().join("cache"));
        let (plugins, config) = (path(&self.plugins), path(&self.config));
        let mut args = vec!["run", "--plugins", &plugins, "--config", &config];
        args.extend(["--cache-dir", &cache, "--leader-elect"]);
        args.extend(timings);
        args.extend(extra);
        let host = Host::spawn(
            &args,
            self.dir.path(),
            &[("KUBECONFIG", &kubeconfig), ("POD_NAME", Path::new(name))],
            tempfile::tempdir().expect("tempdir"),
        );
        let addr = host.logged_field("serving /metrics", "addr").await;
        Replica {
            name: name.to_owned(),
            host,
            addr,
        }
    }

    fn foos(&self, namespace: &str) -> Api<DynamicObject> {
        let gvk = GroupVersionKind::gvk("samplecontroller.k8s.io", "v1alpha1", "Foo");
        Api::namespaced_with(self.client.clone(), namespace, &ApiResource::from_gvk(&gvk))
    }

    async fn create_foo(&self, namespace: &str, name: &str, replicas: i64) {
        let object = json!({
            "apiVersion": "samplecontroller.k8s.io/v1alpha1",
            "kind": "Foo",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"deploymentName": name, "replicas": replicas},
        });
        let object: DynamicObject = serde_json::from_value(object).expect("a Foo");
        self.foos(namespace)
            .create(&PostParams::default(), &object)
            .await
            .expect("create Foo");
    }

    async fn scale_foo(&self, namespace: &str, name: &str, replicas: i64) {
        let patch = Patch::Merge(json!({"spec": {"replicas": replicas}}));
        self.foos(namespace)
            .patch(name, &PatchParams::default(), &patch)
            .await
            .expect("scale Foo");
    }

    /// Whether every Foo's Deployment runs the Foo's replicas (`foos`: namespace, name).
    async fn converged(&self, foos: &[(String, String)]) -> bool {
        for (ns, name) in foos {
            let deployments: Api<k8s_openapi::api::apps::v1::Deployment> =
                Api::namespaced(self.client.clone(), ns);
            let owner = self.foos(ns).get(name).await.expect("Foo");
            let wanted = owner.data["spec"]["replicas"].as_i64();
            let Ok(Some(d)) = deployments.get_opt(name).await else {
                return false;
            };
            let have = d.spec.and_then(|s| s.replicas).map(i64::from);
            if have != wanted {
                return false;
            }
        }
        true
    }

    async fn wait_converged(&self, foos: &[(String, String)]) {
        let deadline = Instant::now() + PATIENCE;
        while !self.converged(foos).await {
            assert!(Instant::now() < deadline, "the Foos never converged");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The writes of the controller (not the Leases), in arrival order.
    fn writes(&self) -> Vec<RequestRecord> {
        self.server
            .requests()
            .into_iter()
            .filter(|r| {
                matches!(
                    r.verb,
                    Verb::Create | Verb::Update | Verb::Patch | Verb::Delete
                ) && r.group != "coordination.k8s.io"
                    && r.client.starts_with("replica-")
            })
            .collect()
    }
}

struct Replica {
    name: String,
    host: Host,
    addr: String,
}

/// What a replica's `/plugins` says of its leadership.
#[derive(Debug, Clone, PartialEq)]
struct Leads {
    leader: bool,
    shards: Vec<u64>,
}

impl Replica {
    fn leads(&self) -> Option<Leads> {
        let (code, body) = get(&format!("http://{}/plugins", self.addr));
        if code != 200 {
            return None;
        }
        let json: Value = serde_json::from_str(&body).ok()?;
        let leader = &json["leader"];
        Some(Leads {
            leader: leader["leader"].as_bool()?,
            shards: leader["led_shards"]
                .as_array()?
                .iter()
                .filter_map(Value::as_u64)
                .collect(),
        })
    }

    fn is_leader(&self) -> bool {
        self.leads().is_some_and(|l| l.leader)
    }

    fn ready(&self) -> bool {
        get(&format!("http://{}/readyz", self.addr)).0 == 200
    }

    fn kill(&mut self) {
        self.host.child.kill().expect("kill -9");
        let _ = self.host.child.wait();
    }
}

/// The one leader among `replicas`, once exactly one leads.
async fn single_leader(replicas: &[Replica]) -> usize {
    let mut leader = None;
    let one = wait_until(PATIENCE, || {
        let leading: Vec<usize> = (0..replicas.len())
            .filter(|&i| replicas[i].is_leader())
            .collect();
        leader = (leading.len() == 1).then(|| leading[0]);
        leader.is_some()
    })
    .await;
    assert!(one, "no single leader");
    leader.unwrap_or_default()
}

fn foo_names(namespaces: &[String], per_namespace: usize) -> Vec<(String, String)> {
    namespaces
        .iter()
        .flat_map(|ns| (0..per_namespace).map(move |i| (ns.clone(), format!("foo-{i}"))))
        .collect()
}

/// Asserts that from `from` on, every write came from `only`.
fn assert_only_writer(writes: &[RequestRecord], from: Instant, only: &str) {
    let others: Vec<_> = writes
        .iter()
        .filter(|w| w.at >= from && w.client != only)
        .map(|w| (&w.client, &w.resource, &w.namespace, &w.name))
        .collect();
    assert!(
        others.is_empty(),
        "written by another replica than {only}: {others:?}"
    );
}

/// The first write by `client` at or after `from`.
fn first_write(writes: &[RequestRecord], from: Instant, client: &str) -> Option<Instant> {
    writes
        .iter()
        .find(|w| w.at >= from && w.client == client)
        .map(|w| w.at)
}

/// `replicas` replicas, one leader: a burst of Foo changes; kill -9 the leader during it; a
/// standby leads within the lease duration (plus retries and slack); every Foo converges; once
/// the new leader writes, no other replica does. Then SIGTERM the new leader: another leads in
/// under 3 s, and the Foos follow a last change.
async fn failover_during_a_burst(replicas: usize) {
    let namespaces: Vec<String> = (0..3).map(|i| format!("team-{i}")).collect();
    let cluster = Cluster::start(&namespaces).await;
    let foos = foo_names(&namespaces, 4);
    for (ns, name) in &foos {
        cluster.create_foo(ns, name, 1).await;
    }
    let mut running = Vec::new();
    for i in 0..replicas {
        running.push(cluster.replica(&format!("replica-{i}"), &[]).await);
    }
    let leader = single_leader(&running).await;
    cluster.wait_converged(&foos).await;

    // The burst: every Foo scaled round after round, the leader killed a third of the way in.
    let rounds = 15;
    let mut killed = None;
    for round in 0..rounds {
        for (ns, name) in &foos {
            cluster.scale_foo(ns, name, 1 + (round % 4)).await;
        }
        if round == rounds / 3 {
            running[leader].kill();
            killed = Some(Instant::now());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let killed = killed.expect("the leader was killed");
    let dead = running.remove(leader);
    let new_leader = single_leader(&running).await;
    let took = killed.elapsed();
    eprintln!("{replicas} replicas: a new leader after kill -9 seen at {took:?} (at the latest)");
    cluster.wait_converged(&foos).await;
    let writes = cluster.writes();
    let successor = running[new_leader].name.clone();
    let first = first_write(&writes, killed, &successor).expect("the new leader wrote");
    assert!(
        first - killed <= LEASE + RETRY * 2 + SLACK,
        "the new leader's first write came {:?} after the kill",
        first - killed
    );
    assert_only_writer(&writes, first, &successor);
    assert!(
        writes
            .iter()
            .all(|w| w.client == dead.name || w.client == successor),
        "a standby wrote"
    );

    // Graceful: SIGTERM the leader, another replica (a fresh one when only one is left) leads
    // in under 3 s.
    if running.len() == 1 {
        let fresh = cluster.replica(&format!("replica-{replicas}"), &[]).await;
        assert!(
            wait_until(PATIENCE, || fresh.ready()).await,
            "the fresh replica never got ready"
        );
        running.push(fresh);
    }
    let stopping = running.remove(new_leader);
    let stopped = Instant::now();
    let terminated = tokio::task::spawn_blocking(move || stopping.host.terminate());
    let next = single_leader(&running).await;
    let took = stopped.elapsed();
    eprintln!("{replicas} replicas: hand-over after SIGTERM in {took:?}");
    assert!(
        took < Duration::from_secs(3),
        "SIGTERM hand-over took {took:?}"
    );
    assert!(terminated.await.expect("terminate").success());
    for (ns, name) in &foos {
        cluster.scale_foo(ns, name, 5).await;
    }
    cluster.wait_converged(&foos).await;
    let writes = cluster.writes();
    let next_name = running[next].name.clone();
    let first = first_write(&writes, stopped, &next_name).expect("the next leader wrote");
    assert_only_writer(&writes, first, &next_name);
    drop(dead);
    drop(running);
    cluster.server.shutdown().await;
}

/// Leadership follows health. Replica A reaches the dev server through a proxy, B directly;
/// A leads. The proxy stalls A's open watch connections while its other connections (the
/// Lease renewals) keep working, as a NAT that dropped the long-lived flows: A finds its
/// watches dead at the bookmark idle limit, says why on `/readyz`, releases the Lease, and B
/// leads. Foos created after the stall all get their Deployments, and from B's first write on
/// only B writes. A is ready again after its hold, as a standby. Without health following,
/// A keeps renewing and leading (B never leads, `/readyz` stays 200).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_whose_watches_die_behind_a_proxy_hands_over_to_a_healthy_standby() {
    let namespaces: Vec<String> = (0..2).map(|i| format!("team-{i}")).collect();
    let cluster = Cluster::start(&namespaces).await;
    let mut config = std::fs::read_to_string(&cluster.config).expect("config");
    config.push_str("[informers]\nbookmark-idle-seconds = 2\n");
    std::fs::write(&cluster.config, config).expect("config");
    let mut foos = foo_names(&namespaces, 3);
    for (ns, name) in &foos {
        cluster.create_foo(ns, name, 1).await;
    }
    let upstream = cluster.server.url().trim_start_matches("http://").parse();
    let proxy = crate::fixture::StallingProxy::start(upstream.expect("address")).await;
    let a = cluster.replica_at("replica-a", &proxy.url(), &[]).await;
    assert!(wait_until(PATIENCE, || a.is_leader()).await, "A never led");
    let b = cluster.replica("replica-b", &[]).await;
    assert!(
        wait_until(PATIENCE, || b.ready()).await,
        "B never got ready"
    );
    cluster.wait_converged(&foos).await;
    assert!(a.is_leader() && !b.is_leader());
    // Each of A's watches has had a bookmark: from then on, one that goes silent is found
    // dead at the bookmark idle limit (before, only at its timeout plus margin).
    let bookmarked = wait_until(PATIENCE, || {
        let (_, metrics) = get(&format!("http://{}/metrics", a.addr));
        let counts: Vec<&str> = metrics
            .lines()
            .filter(|l| l.starts_with("kubewasm_informer_bookmarks_total{"))
            .filter_map(|l| l.rsplit(' ').next())
            .collect();
        counts.len() >= 2 && counts.iter().all(|c| *c != "0")
    })
    .await;
    assert!(bookmarked, "A's watches got no bookmarks");

    proxy.stall_watches();
    let stalled = Instant::now();
    for ns in &namespaces {
        cluster.create_foo(ns, "late", 2).await;
        foos.push((ns.clone(), "late".to_owned()));
    }
    let mut why = String::new();
    let unready = wait_until(PATIENCE, || {
        let (code, body) = get(&format!("http://{}/readyz", a.addr));
        why = body;
        code == 503
    })
    .await;
    assert!(unready, "A's /readyz never failed");
    assert!(
        why.contains("not ready") && why.contains("informer"),
        "/readyz says why: {why}"
    );
    let handed = wait_until(PATIENCE, || b.is_leader() && !a.is_leader()).await;
    assert!(
        handed,
        "B never took over: A {:?}, B {:?}",
        a.leads(),
        b.leads()
    );
    eprintln!(
        "B led {:?} after the stall; A's /readyz said: {why}",
        stalled.elapsed()
    );
    cluster.wait_converged(&foos).await;
    let writes = cluster.writes();
    let first = first_write(&writes, stalled, &b.name).expect("B wrote");
    assert_only_writer(&writes, first, &b.name);

    assert!(
        wait_until(PATIENCE, || a.ready()).await,
        "A never got ready again"
    );
    assert!(b.is_leader() && !a.is_leader(), "B keeps leading");
    drop((a, b, proxy));
    cluster.server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_fail_over_during_a_burst_of_foo_changes() {
    failover_during_a_burst(2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_replicas_fail_over_during_a_burst_of_foo_changes() {
    failover_during_a_burst(3).await;
}

/// Sharded (4 shards, 2 replicas): both lead some shards; each namespace's writes come only
/// from the replica leading its shard; kill -9 one, and the survivor leads every shard and
/// keeps every Foo converged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_sharded_replicas_split_the_namespaces_and_take_over_a_dead_ones_shards() {
    const SHARDS: usize = 4;
    let namespaces: Vec<String> = (0..8).map(|i| format!("team-{i}")).collect();
    let cluster = Cluster::start(&namespaces).await;
    let foos = foo_names(&namespaces, 2);
    for (ns, name) in &foos {
        cluster.create_foo(ns, name, 1).await;
    }
    let shards = SHARDS.to_string();
    let mut a = cluster.replica("replica-a", &["--shards", &shards]).await;
    let b = cluster.replica("replica-b", &["--shards", &shards]).await;
    let split = wait_until(PATIENCE, || {
        let (Some(la), Some(lb)) = (a.leads(), b.leads()) else {
            return false;
        };
        la.shards.len() == 2 && lb.shards.len() == 2
    })
    .await;
    assert!(
        split,
        "the shards never split 2/2: {:?} {:?}",
        a.leads(),
        b.leads()
    );
    let split_at = Instant::now();
    for (ns, name) in &foos {
        cluster.scale_foo(ns, name, 2).await;
    }
    cluster.wait_converged(&foos).await;
    let led_by_a = a.leads().expect("a answers").shards;
    let writes = cluster.writes();
    let shard = |ns: &str| kubewasm_runtime::shard_of(Some(ns), "", SHARDS) as u64;
    let mut writers: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for w in writes.iter().filter(|w| w.at >= split_at) {
        let ns = w.namespace.clone().unwrap_or_default();
        writers.entry(ns).or_default().insert(w.client.clone());
    }
    for (ns, clients) in &writers {
        let owner = if led_by_a.contains(&shard(ns)) {
            &a.name
        } else {
            &b.name
        };
        assert_eq!(
            clients.iter().collect::<Vec<_>>(),
            [owner],
            "namespace {ns} (shard {}) written by {clients:?}",
            shard(ns)
        );
    }
    assert!(
        writers.values().any(|c| c.contains("replica-a"))
            && writers.values().any(|c| c.contains("replica-b")),
        "both replicas reconcile: {writers:?}"
    );

    a.kill();
    let killed = Instant::now();
    let all = wait_until(PATIENCE, || {
        b.leads().is_some_and(|l| l.shards.len() == SHARDS)
    })
    .await;
    let took = killed.elapsed();
    assert!(all, "the survivor never led every shard: {:?}", b.leads());
    eprintln!("sharded: the survivor led every shard {took:?} after kill -9");
    assert!(took <= LEASE + RETRY * 2 + SLACK, "took {took:?}");
    for (ns, name) in &foos {
        cluster.scale_foo(ns, name, 3).await;
    }
    cluster.wait_converged(&foos).await;
    let writes = cluster.writes();
    let first = first_write(&writes, killed, "replica-b").expect("b wrote");
    assert!(first >= killed);
    assert_only_writer(&writes, killed + Duration::from_millis(500), "replica-b");
    drop(a);
    drop(b);
    cluster.server.shutdown().await;
}

/// The `p`-th percentile (0–100) of `samples`, nearest rank.
fn percentile(samples: &[Duration], p: usize) -> Duration {
    let mut sorted = samples.to_vec();
    sorted.sort();
    let rank = (p * sorted.len()).div_ceil(100).max(1);
    sorted[rank - 1]
}

/// Benchmark (BENCHMARKS.md): 20 failovers of 2 replicas (lease 3 s, renew 2 s, retry 300 ms).
/// Each time: kill -9 the leader, change a Foo at once, and time until the new leader's first
/// write (its first reconcile); then a fresh standby is started and waited for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark: run it by name (see BENCHMARKS.md)"]
async fn bench_failover_time() {
    const FAILOVERS: usize = 20;
    let namespaces = vec!["bench".to_owned()];
    let cluster = Cluster::start(&namespaces).await;
    cluster.create_foo("bench", "foo-0", 1).await;
    let mut running = Vec::new();
    for i in 0..2 {
        running.push(cluster.replica(&format!("replica-{i}"), &[]).await);
    }
    let mut samples = Vec::new();
    for round in 0..FAILOVERS {
        let leader = single_leader(&running).await;
        assert!(wait_until(PATIENCE, || running.iter().all(Replica::ready)).await);
        cluster
            .wait_converged(&[("bench".into(), "foo-0".into())])
            .await;
        running[leader].kill();
        let killed = Instant::now();
        let dead = running.remove(leader);
        cluster
            .scale_foo("bench", "foo-0", 1 + (round as i64 % 3) + 1)
            .await;
        let survivor = running[0].name.clone();
        let mut first = None;
        let wrote = wait_until(PATIENCE, || {
            first = first_write(&cluster.writes(), killed, &survivor);
            first.is_some()
        })
        .await;
        assert!(wrote, "the survivor never reconciled");
        let took = first.unwrap_or(killed) - killed;
        eprintln!("failover {round}: {took:?}");
        samples.push(took);
        drop(dead);
        running.push(
            cluster
                .replica(&format!("replica-{}", round + 2), &[])
                .await,
        );
    }
    eprintln!(
        "failover (kill -9 -> first reconcile by the new leader) over {FAILOVERS}: p50 {:?}, p99 {:?}, min {:?}",
        percentile(&samples, 50),
        percentile(&samples, 99),
        percentile(&samples, 0),
    );
    drop(running);
    cluster.server.shutdown().await;
}

/// Benchmark (BENCHMARKS.md): reconcile throughput with 6 shards over 1, 2 and 3 replicas.
/// Once the shards are spread, 600 Foos in 30 namespaces are created (16 at a time); timed
/// from the first create until every Foo's Deployment exists.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark: run it by name (see BENCHMARKS.md)"]
async fn bench_sharded_throughput() {
    const SHARDS: usize = 6;
    const FOOS: usize = 600;
    let namespaces: Vec<String> = (0..30).map(|i| format!("team-{i}")).collect();
    for replicas in 1..=3 {
        let cluster = Cluster::start(&namespaces).await;
        let shards = SHARDS.to_string();
        let mut running = Vec::new();
        for i in 0..replicas {
            running.push(
                cluster
                    .replica(&format!("replica-{i}"), &["--shards", &shards])
                    .await,
            );
        }
        let share = SHARDS / replicas;
        let spread = wait_until(PATIENCE, || {
            running
                .iter()
                .all(|r| r.ready() && r.leads().is_some_and(|l| l.shards.len() == share))
        })
        .await;
        assert!(spread, "the shards never spread over {replicas} replicas");
        let foos = foo_names(&namespaces, FOOS / namespaces.len());
        let started = Instant::now();
        let cluster = Arc::new(cluster);
        let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let creators: Vec<_> = (0..16)
            .map(|_| {
                let (cluster, next, foos) = (cluster.clone(), next.clone(), foos.clone());
                tokio::spawn(async move {
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some((ns, name)) = foos.get(i) else {
                            return;
                        };
                        cluster.create_foo(ns, name, 1).await;
                    }
                })
            })
            .collect();
        for creator in creators {
            creator.await.expect("creator");
        }
        let created = started.elapsed();
        let done = wait_until(Duration::from_secs(300), || {
            cluster
                .server
                .requests()
                .iter()
                .filter(|r| r.verb == Verb::Create && r.resource == "deployments")
                .count()
                >= FOOS
        })
        .await;
        assert!(done, "not every Foo got its Deployment");
        let took = started.elapsed();
        eprintln!(
            "{replicas} replica(s), {SHARDS} shards: {FOOS} Foos reconciled in {took:?} \
             ({:.0} Foos/s; creating them took {created:?})",
            FOOS as f64 / took.as_secs_f64()
        );
        drop(running);
        if let Ok(cluster) = Arc::try_unwrap(cluster) {
            cluster.server.shutdown().await;
        }
    }
}

/// A standby (its gate never opens) does not reconcile the sample-controller; with
/// `every-replica` (and no write grants) it does, and still nothing it tries to write is sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_replica_plugins_reconcile_on_a_standby_and_write_nothing() {
    use kubewasm_runtime::LeaderGate;
    use kubewasm_runtime::{HostOptions, PluginPolicy, ReconcileSettings};

    let cluster = Cluster::start(&["team-0".to_owned()]).await;
    cluster.create_foo("team-0", "foo-0", 1).await;
    let mut reconciles = Vec::new();
    for every_replica in [false, true] {
        let policy = PluginPolicy {
            reconcile: ReconcileSettings {
                every_replica,
                ..ReconcileSettings::default()
            },
            ..PluginPolicy::default()
        };
        let (factory, host) = crate::fixture::plugin_host(
            &cluster.client,
            HostOptions {
                leader: LeaderGate::new("kubewasm", "standby"),
                cache_dir: Some(cluster.dir.path().join("cache")),
                ..crate::fixture::policy_by_file(move |_: &Path| policy.clone())
            },
        );
        host.load(
            Path::new("sample-controller.wasm"),
            kubewasm_tests::guest_bytes("sample-controller"),
        )
        .await
        .expect("loads");
        let calls = || {
            let status = host.plugins().pop().expect("loaded");
            status.reconciles + status.reconcile_errors
        };
        assert!(wait_until(PATIENCE, || host.ready()).await, "never ready");
        if every_replica {
            assert!(
                wait_until(PATIENCE, || calls() > 0).await,
                "never reconciled"
            );
        } else {
            // Nothing to wait for: a standby takes no key. Give it the time a reconcile takes.
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        reconciles.push(calls());
        host.shutdown(Duration::from_secs(5)).await;
        factory.shutdown().await;
    }
    assert_eq!(reconciles[0], 0, "a standby reconciled");
    assert!(reconciles[1] > 0);
    let writes: Vec<_> = cluster
        .server
        .requests()
        .into_iter()
        .filter(|r| {
            matches!(
                r.verb,
                Verb::Create | Verb::Update | Verb::Patch | Verb::Delete
            )
        })
        // The controller's writes: Deployments, Events, a Foo's status (the test created the Foo).
        .filter(|r| {
            matches!(r.resource.as_str(), "deployments" | "events")
                || (r.resource == "foos" && r.name.is_some())
        })
        .collect();
    assert!(writes.is_empty(), "written from a standby: {writes:?}");
    cluster.server.shutdown().await;
}

/// The partition of [`a_leader_whose_watches_die_behind_a_proxy_hands_over_to_a_healthy_standby`]
/// against a real kube-apiserver, over TLS and HTTP/2: replica A reaches it through a
/// [`SilencingProxy`](kubewasm_tests::proxy::SilencingProxy) (the bytes pass through, so A still
/// verifies the server's certificate for `127.0.0.1`), B directly.
mod real {
    use ::kubewasm_tests::proxy::SilencingProxy;
    use kubewasm_tests::Kubectl;
    use kubewasm_tests::envtest::{Envtest, User};
    use kubewasm_tests::kubectl_binary;

    use super::*;

    /// A `kubewasm run --leader-elect` replica of the sample-controller with the admin's
    /// kubeconfig, its server URL replaced by `url`.
    fn replica(name: &str, dir: &Path, admin: &Path, url: &str, real_url: &str) -> Replica {
        let kubeconfig = dir.join(format!("{name}.kubeconfig"));
        let yaml = std::fs::read_to_string(admin).expect("admin kubeconfig");
        assert!(yaml.contains(real_url), "{yaml}");
        std::fs::write(&kubeconfig, yaml.replace(real_url, url)).expect("kubeconfig");
        let path = |p: PathBuf| p.to_str().expect("utf-8 path").to_owned();
        let (plugins, config) = (path(dir.join("plugins")), path(dir.join("kubewasm.toml")));
        let cache = path(dir.join("cache"));
        let args = [
            "run",
            "--plugins",
            &plugins,
            "--config",
            &config,
            "--cache-dir",
            &cache,
            "--leader-elect",
            "--leader-elect-lease-duration",
            "3s",
            "--leader-elect-renew-deadline",
            "2s",
            "--leader-elect-retry-period",
            "300ms",
        ];
        let host = Host::spawn(
            &args,
            dir,
            &[("KUBECONFIG", &kubeconfig), ("POD_NAME", Path::new(name))],
            tempfile::tempdir().expect("tempdir"),
        );
        Replica {
            name: name.to_owned(),
            host,
            addr: String::new(),
        }
    }

    fn foos(client: &kube::Client, namespace: &str) -> Api<DynamicObject> {
        let gvk = GroupVersionKind::gvk("samplecontroller.k8s.io", "v1alpha1", "Foo");
        Api::namespaced_with(client.clone(), namespace, &ApiResource::from_gvk(&gvk))
    }

    async fn create_foo(client: &kube::Client, namespace: &str, name: &str, replicas: i64) {
        let object = json!({
            "apiVersion": "samplecontroller.k8s.io/v1alpha1",
            "kind": "Foo",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"deploymentName": name, "replicas": replicas},
        });
        let object: DynamicObject = serde_json::from_value(object).expect("a Foo");
        foos(client, namespace)
            .create(&PostParams::default(), &object)
            .await
            .expect("create Foo");
    }

    /// Whether every Foo's Deployment asks for the Foo's replicas.
    async fn converged(client: &kube::Client, all: &[(String, String)]) -> bool {
        for (ns, name) in all {
            let deployments: Api<k8s_openapi::api::apps::v1::Deployment> =
                Api::namespaced(client.clone(), ns);
            let Ok(owner) = foos(client, ns).get(name).await else {
                return false;
            };
            let wanted = owner.data["spec"]["replicas"].as_i64();
            let Ok(Some(d)) = deployments.get_opt(name).await else {
                return false;
            };
            if d.spec.and_then(|s| s.replicas).map(i64::from) != wanted {
                return false;
            }
        }
        true
    }

    async fn wait_converged(client: &kube::Client, all: &[(String, String)]) -> bool {
        let deadline = Instant::now() + PATIENCE;
        while Instant::now() < deadline {
            if converged(client, all).await {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        false
    }

    /// Leader A's connections go silent (open, carrying nothing) while new ones work: A's
    /// HTTP/2 PING finds its connection dead (read-idle and ping timeout 1 s each); its watches
    /// died with it (A was blind for the PING's 2 s), so A's `/readyz` answers 503 saying so,
    /// A steps down and B leads, and the Foos created after the silence converge (over HTTP/2
    /// everything A sends shares the one silenced connection, so unlike the dev server's
    /// HTTP/1.1 watches, nothing stays dead once A reconnects). Then the whole path is cut
    /// (new connections refused too): A's `/readyz` answers 503 and says why, B keeps leading,
    /// and the Foos created after the cut converge.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_leader_whose_connections_go_silent_recovers_and_one_cut_off_hands_over_on_the_real_api_server()
     {
        let server = Envtest::start().await.expect("the real API server starts");
        let dir = tempfile::tempdir().expect("tempdir");
        let kubectl = Kubectl {
            binary: kubectl_binary(),
            kubeconfig: server.kubeconfig(User::Admin),
            cache_dir: dir.path().join("kubectl-cache"),
        };
        let crd = workspace_root().join("examples/manifests/50-foo-crd.yaml");
        let crd = crd.to_str().expect("utf-8");
        // The Foo in the CRD's file is refused until the CRD is established.
        let first = kubectl.command(&["apply", "-f", crd]).output();
        assert!(first.is_ok(), "running kubectl apply: {first:?}");
        kubectl
            .run(&[
                "wait",
                "--for",
                "condition=established",
                "--timeout=60s",
                "crd/foos.samplecontroller.k8s.io",
            ])
            .await;
        let namespaces: Vec<String> = (0..2).map(|i| format!("team-{i}")).collect();
        for ns in &namespaces {
            kubectl.run(&["create", "namespace", ns]).await;
        }
        plugins_dir(dir.path(), &["sample-controller"]);
        std::fs::write(
            dir.path().join("kubewasm.toml"),
            "[plugins.sample-controller]\n\
             writes = [\"apps/Deployment\", \"samplecontroller.k8s.io/Foo\", \"Event\"]\n\
             write-qps = 1000.0\nwrite-burst = 1000\n\
             [connection]\nhttp2-read-idle-seconds = 1\nhttp2-ping-timeout-seconds = 1\n",
        )
        .expect("config");
        let client = server.admin();
        let mut all = foo_names(&namespaces, 3);
        for (ns, name) in &all {
            create_foo(&client, ns, name, 1).await;
        }

        let upstream: std::net::SocketAddr = server
            .url()
            .trim_start_matches("https://")
            .parse()
            .expect("address");
        let proxy = SilencingProxy::start(upstream).await.expect("the proxy");
        let admin = server.kubeconfig(User::Admin);
        let via_proxy = format!("https://{}", proxy.addr());
        let mut a = replica("replica-a", dir.path(), &admin, &via_proxy, &server.url());
        a.addr = a.host.logged_field("serving /metrics", "addr").await;
        assert!(wait_until(PATIENCE, || a.is_leader()).await, "A never led");
        let mut b = replica(
            "replica-b",
            dir.path(),
            &admin,
            &server.url(),
            &server.url(),
        );
        b.addr = b.host.logged_field("serving /metrics", "addr").await;
        assert!(
            wait_until(PATIENCE, || b.ready()).await,
            "B never got ready"
        );
        assert!(
            wait_converged(&client, &all).await,
            "the Foos never converged"
        );
        assert!(a.is_leader() && !b.is_leader());

        // Silent connections, new ones working: A's PING finds its connection dead, A steps
        // down (its watches died with the connection) and reconnects through the proxy.
        proxy.silence();
        let silenced = Instant::now();
        for ns in &namespaces {
            create_foo(&client, ns, "late", 2).await;
            all.push((ns.clone(), "late".to_owned()));
        }
        let mut why = String::new();
        let unready = wait_until(PATIENCE, || {
            let (code, body) = get(&format!("http://{}/readyz", a.addr));
            why = body;
            code == 503
        })
        .await;
        assert!(
            unready && why.contains("dead"),
            "A's /readyz did not say its connection died: {why}"
        );
        let handed = wait_until(PATIENCE, || b.is_leader() && !a.is_leader()).await;
        assert!(
            handed,
            "A kept leading with its watches dead: A {:?}, B {:?}",
            a.leads(),
            b.leads()
        );
        assert!(
            wait_converged(&client, &all).await,
            "the Foos never converged after the silence"
        );
        eprintln!(
            "silent connections, new ones working: converged after {:?}; A leads {:?}, B {:?}",
            silenced.elapsed(),
            a.leads(),
            b.leads()
        );

        // A is ready again once its watches are back and its hold is over, as a standby.
        assert!(
            wait_until(PATIENCE, || a.ready()).await,
            "A never got ready again after the silence"
        );

        // The whole path cut (open connections silent, new ones refused): A's PING finds its
        // new connection dead, its /readyz says why, and B keeps leading.
        proxy.refuse_new();
        proxy.silence();
        let cut = Instant::now();
        for ns in &namespaces {
            create_foo(&client, ns, "after-cut", 3).await;
            all.push((ns.clone(), "after-cut".to_owned()));
        }
        let mut why = String::new();
        let unready = wait_until(PATIENCE, || {
            let (code, body) = get(&format!("http://{}/readyz", a.addr));
            why = body;
            code == 503
        })
        .await;
        assert!(
            unready,
            "A's /readyz kept answering 200: {:#?}",
            a.host.logs()
        );
        let unready_after = cut.elapsed();
        let handed = wait_until(PATIENCE, || b.is_leader() && !a.is_leader()).await;
        assert!(
            handed,
            "B does not lead: A {:?}, B {:?}",
            a.leads(),
            b.leads()
        );
        let handed_after = cut.elapsed();
        assert!(
            wait_converged(&client, &all).await,
            "the Foos never converged after the cut"
        );
        eprintln!(
            "path cut: A's /readyz 503 after {unready_after:?} ({why}); B led after \
             {handed_after:?}; converged after {:?}",
            cut.elapsed()
        );
        assert!(
            why.contains("not ready") && why.contains("informer"),
            "/readyz says why: {why}"
        );
        drop((a, b, proxy));
    }
}
