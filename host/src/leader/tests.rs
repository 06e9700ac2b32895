//! The elector against the dev API server through kube's client, on tokio's paused clock.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use kube::Api;
use kube::api::{ObjectMeta, PostParams};
use kubewasm_devserver::Verb;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use std::sync::Arc;

use kube::Client;
use kubewasm_runtime::LeaderGate;

use super::*;

const LEASE: Duration = Duration::from_secs(15);
const RETRY: Duration = Duration::from_secs(2);
const RENEW: Duration = Duration::from_secs(10);

/// Per gate, the (from, to) times it was open.
type Intervals = [Vec<(Instant, Instant)>; 2];

struct Running {
    gate: LeaderGate,
    cancel: CancellationToken,
    task: JoinHandle<()>,
}

fn options(identity: &str) -> ElectionOptions {
    ElectionOptions::new("kubewasm", "default", identity)
}

fn start(client: &Client, identity: &str) -> Running {
    let elector = LeaderElector::new(client.clone(), options(identity)).expect("valid options");
    let gate = elector.gate();
    let cancel = CancellationToken::new();
    let task = tokio::spawn(elector.run(cancel.clone()));
    Running { gate, cancel, task }
}

async fn holder(client: &Client) -> Option<String> {
    let leases: Api<Lease> = Api::namespaced(client.clone(), "default");
    leases
        .get("kubewasm")
        .await
        .expect("the lease exists")
        .spec
        .and_then(|s| s.holder_identity)
}

/// Samples both gates every 5 ms (virtual) and records the intervals each was open.
fn record_intervals(gates: [LeaderGate; 2]) -> (CancellationToken, JoinHandle<Intervals>) {
    let stop = CancellationToken::new();
    let task = tokio::spawn({
        let stop = stop.clone();
        async move {
            let mut intervals: Intervals = Default::default();
            let mut opened: [Option<Instant>; 2] = [None, None];
            loop {
                let now = Instant::now();
                for i in 0..2 {
                    match (gates[i].is_leader(), opened[i]) {
                        (true, None) => opened[i] = Some(now),
                        (false, Some(from)) => {
                            intervals[i].push((from, now));
                            opened[i] = None;
                        }
                        _ => {}
                    }
                }
                if stop.is_cancelled() {
                    for i in 0..2 {
                        if let Some(from) = opened[i] {
                            intervals[i].push((from, now));
                        }
                    }
                    return intervals;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
    });
    (stop, task)
}

fn assert_no_overlap(intervals: &Intervals) {
    for a in &intervals[0] {
        for b in &intervals[1] {
            assert!(
                a.1 <= b.0 || b.1 <= a.0,
                "both led at once: {a:?} and {b:?}"
            );
        }
    }
}

async fn first_leader(a: &Running, b: &Running) -> usize {
    tokio::select! {
        _ = a.gate.wait_leader() => 0,
        _ = b.gate.wait_leader() => 1,
    }
}

#[test]
fn options_are_validated() {
    assert!(options("a").validate().is_ok());
    let bad = [
        ElectionOptions {
            renew_deadline: LEASE,
            ..options("a")
        },
        ElectionOptions {
            retry_period: RENEW,
            ..options("a")
        },
        ElectionOptions {
            retry_period: Duration::ZERO,
            ..options("a")
        },
        ElectionOptions {
            lease_duration: Duration::from_millis(1500),
            ..options("a")
        },
        ElectionOptions {
            identity: String::new(),
            ..options("a")
        },
    ];
    for options in bad {
        let err = options.validate().expect_err("invalid");
        assert!(
            err.to_string()
                .starts_with("invalid leader election settings"),
            "{err}"
        );
    }
}

#[test]
fn an_always_gate_is_open_and_a_new_one_closed() {
    assert!(LeaderGate::always().is_leader());
    assert!(!LeaderGate::new("l", "me").is_leader());
    assert!(!default_identity().is_empty());
}

#[tokio::test(start_paused = true)]
async fn two_electors_on_one_lease_exactly_one_leads() {
    let (server, client) = kubewasm_tests::devserver().await;
    let a = start(&client, "a");
    let b = start(&client, "b");
    let (stop, intervals) = record_intervals([a.gate.clone(), b.gate.clone()]);
    let leader = first_leader(&a, &b).await;
    tokio::time::sleep(LEASE * 4).await;
    let gates = [&a.gate, &b.gate];
    assert!(gates[leader].is_leader(), "the leader kept renewing");
    assert!(!gates[1 - leader].is_leader());
    assert_eq!(holder(&client).await.as_deref(), Some(["a", "b"][leader]));
    stop.cancel();
    let intervals = intervals.await.expect("recorder");
    assert_eq!(
        intervals[leader].len(),
        1,
        "one uninterrupted term: {intervals:?}"
    );
    assert!(intervals[1 - leader].is_empty());
    server.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_killed_leader_is_replaced_after_the_lease_duration() {
    let (server, client) = kubewasm_tests::devserver().await;
    let a = start(&client, "a");
    a.gate.wait_leader().await;
    let b = start(&client, "b");
    let (stop, intervals) = record_intervals([a.gate.clone(), b.gate.clone()]);
    tokio::time::sleep(LEASE).await;
    assert!(!b.gate.is_leader());

    a.task.abort();
    let killed = Instant::now();
    b.gate.wait_leader().await;
    let took = killed.elapsed();
    assert!(
        !a.gate.is_leader(),
        "the dead leader's gate closed at its deadline"
    );
    // The last renewal was at most one retry period before the kill; b waits a lease duration
    // from when it saw that renewal, then at most one retry period for its next attempt.
    assert!(took >= LEASE - RETRY, "taken over too early: {took:?}");
    assert!(took <= LEASE + RETRY * 2, "taken over too late: {took:?}");
    assert_eq!(holder(&client).await.as_deref(), Some("b"));
    stop.cancel();
    assert_no_overlap(&intervals.await.expect("recorder"));
    b.cancel.cancel();
    server.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_released_lease_is_taken_within_one_retry_period() {
    let (server, client) = kubewasm_tests::devserver().await;
    let a = start(&client, "a");
    a.gate.wait_leader().await;
    let b = start(&client, "b");
    tokio::time::sleep(LEASE).await;

    a.cancel.cancel();
    let released = Instant::now();
    a.task.await.expect("elector");
    assert!(!a.gate.is_leader());
    b.gate.wait_leader().await;
    let took = released.elapsed();
    assert!(
        took <= RETRY + Duration::from_millis(100),
        "hand-over took {took:?}"
    );
    let leases: Api<Lease> = Api::namespaced(client.clone(), "default");
    let spec = leases
        .get("kubewasm")
        .await
        .expect("lease")
        .spec
        .expect("spec");
    assert_eq!(spec.holder_identity.as_deref(), Some("b"));
    assert_eq!(spec.lease_duration_seconds, Some(15));
    assert_eq!(
        spec.lease_transitions,
        Some(1),
        "b's acquisition is one transition"
    );
    b.cancel.cancel();
    b.task.await.expect("elector");
    let spec = leases
        .get("kubewasm")
        .await
        .expect("lease")
        .spec
        .expect("spec");
    assert_eq!(spec.holder_identity, None, "released on cancel");
    assert_eq!(spec.lease_duration_seconds, Some(1));
    server.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn an_acquire_attempt_that_gets_no_answer_is_given_up_at_the_renew_deadline() {
    let (server, client) = kubewasm_tests::devserver().await;
    // The first attempts hang (a connection that stopped answering); then the server answers.
    server.set_latency(Duration::from_secs(3600));
    let a = start(&client, "a");
    tokio::time::sleep(RETRY * 2).await;
    server.set_latency(Duration::ZERO);
    let answering = Instant::now();
    a.gate.wait_leader().await;
    assert!(
        answering.elapsed() <= RENEW + RETRY,
        "led {:?} after the server answered again",
        answering.elapsed()
    );
    a.cancel.cancel();
    a.task.await.expect("elector");
    server.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn delayed_renewals_close_the_gate_before_another_replica_can_lead() {
    let (server, client) = kubewasm_tests::devserver().await;
    let a = start(&client, "a");
    a.gate.wait_leader().await;
    let b = start(&client, "b");
    let (stop, intervals) = record_intervals([a.gate.clone(), b.gate.clone()]);
    tokio::time::sleep(LEASE).await;

    server.set_latency(RENEW + RETRY);
    let slowed = Instant::now();
    let mut changes = a.gate.subscribe();
    changes.wait_for(|open| !*open).await.expect("gate");
    assert!(
        slowed.elapsed() <= RENEW,
        "the gate closed {:?} after renewals stopped succeeding",
        slowed.elapsed()
    );
    tokio::time::sleep(LEASE * 2).await;
    server.set_latency(Duration::ZERO);
    let leader = first_leader(&a, &b).await;
    tokio::time::sleep(LEASE).await;
    assert!([&a.gate, &b.gate][leader].is_leader());
    stop.cancel();
    let intervals = intervals.await.expect("recorder");
    assert_no_overlap(&intervals);
    server.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn conflicting_updates_let_exactly_one_replica_take_the_lease() {
    let (server, client) = kubewasm_tests::devserver().await;
    let leases: Api<Lease> = Api::namespaced(client.clone(), "default");
    let free = Lease {
        metadata: ObjectMeta {
            name: Some("kubewasm".into()),
            ..ObjectMeta::default()
        },
        spec: Some(LeaseSpec {
            lease_duration_seconds: Some(1),
            ..LeaseSpec::default()
        }),
    };
    leases
        .create(&PostParams::default(), &free)
        .await
        .expect("created");
    let mut a = LeaderElector::new(client.clone(), options("a")).expect("valid");
    let mut b = LeaderElector::new(client.clone(), options("b")).expect("valid");
    // Both read the free lease before either write lands: the second write carries a stale
    // resourceVersion and is refused.
    server.set_latency(Duration::from_secs(1));
    server.clear_requests();
    let (took_a, took_b) = tokio::join!(a.try_acquire_or_renew(), b.try_acquire_or_renew());
    server.set_latency(Duration::ZERO);
    let updates = server
        .requests()
        .iter()
        .filter(|r| r.verb == Verb::Update)
        .count();
    assert_eq!(updates, 2, "both tried to write");
    assert!(
        took_a ^ took_b,
        "exactly one took it: a {took_a}, b {took_b}"
    );
    let winner = if took_a { "a" } else { "b" };
    assert_eq!(holder(&client).await.as_deref(), Some(winner));
    // The loser saw the winner's record just now: it must wait a whole lease duration.
    let loser = if took_a { &mut b } else { &mut a };
    assert!(!loser.try_acquire_or_renew().await);
    server.shutdown().await;
}

/// Samples the gates every 5 ms (virtual) until `stop`, failing if two lead one shard at once.
fn watch_exclusive(gates: Vec<LeaderGate>, stop: CancellationToken) -> JoinHandle<()> {
    tokio::spawn(async move {
        while !stop.is_cancelled() {
            for shard in 0..gates[0].shards() {
                let leaders = gates.iter().filter(|g| g.leads_shard(shard)).count();
                assert!(
                    leaders <= 1,
                    "shard {shard} led by {leaders} replicas at once"
                );
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
}

async fn wait_split(gates: &[&LeaderGate], split: &[usize]) {
    let wanted = || {
        let mut led = gates
            .iter()
            .map(|g| g.led_shards().len())
            .collect::<Vec<_>>();
        led.sort_unstable();
        led == split
    };
    let mut waited = Duration::ZERO;
    while !wanted() {
        assert!(
            waited < LEASE * 6,
            "the shards never split {split:?}: {:?}",
            gates.iter().map(|g| g.led_shards()).collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
        waited += Duration::from_millis(100);
    }
}

/// Sharded: one replica alone leads every shard; a second one joining gets its fair share
/// handed over; a third joining evens them out; killing one (no release) moves its shards to
/// the others within a lease duration and a few retries; no shard ever has two leaders.
#[tokio::test(start_paused = true)]
async fn shards_spread_over_replicas_and_move_when_one_dies() {
    const SHARDS: usize = 6;
    let (server, client) = kubewasm_tests::devserver().await;
    let start = |identity: &str| {
        let cancel = CancellationToken::new();
        let sharded = spawn_sharded(&client, options(identity), SHARDS, None, cancel.clone())
            .expect("valid options");
        (sharded, cancel)
    };
    let (a, _cancel_a) = start("a");
    let stop = CancellationToken::new();
    wait_split(&[&a.gate], &[SHARDS]).await;
    let (b, _cancel_b) = start("b");
    let (c, cancel_c) = start("c");
    let checker = watch_exclusive(
        vec![a.gate.clone(), b.gate.clone(), c.gate.clone()],
        stop.clone(),
    );
    wait_split(&[&a.gate, &b.gate, &c.gate], &[2, 2, 2]).await;
    assert_eq!(a.balance.members(), ["a", "b", "c"]);

    for task in &b.tasks {
        task.abort();
    }
    let killed = Instant::now();
    wait_split(&[&a.gate, &c.gate], &[3, 3]).await;
    let took = killed.elapsed();
    assert!(
        took <= LEASE * 2 + RETRY * 3,
        "the dead replica's shards moved after {took:?}"
    );
    assert_eq!(a.balance.members(), ["a", "c"]);

    // A graceful stop releases at once and deletes the member Lease.
    cancel_c.cancel();
    for task in c.tasks {
        task.await.expect("c stops");
    }
    let stopped = Instant::now();
    wait_split(&[&a.gate], &[SHARDS]).await;
    assert!(
        stopped.elapsed() <= RETRY * 2,
        "took {:?}",
        stopped.elapsed()
    );
    stop.cancel();
    checker.await.expect("no shard had two leaders");
    server.shutdown().await;
}

/// Sharded: a replica's write client sends writes for the namespaces of the shards it leads,
/// and refuses (unsent) those of the shards another replica leads.
#[tokio::test(start_paused = true)]
async fn the_write_client_refuses_writes_for_shards_led_elsewhere() {
    use kubewasm_runtime::{
        ClientOptions, NoWriteObserver, ResourcePattern, Resources, WriteClient, WriteError,
        WriteGrant, WriteGrants,
    };
    let (server, client) = kubewasm_tests::devserver().await;
    let a = spawn_sharded(&client, options("a"), 4, None, CancellationToken::new()).expect("a");
    wait_split(&[&a.gate], &[4]).await;
    let b = spawn_sharded(&client, options("b"), 4, None, CancellationToken::new()).expect("b");
    wait_split(&[&a.gate, &b.gate], &[2, 2]).await;
    let namespace_led_by = |gate: &LeaderGate| {
        (0..)
            .map(|i| format!("ns-{i}"))
            .find(|ns| gate.leads(Some(ns), ""))
            .expect("some namespace")
    };
    let (ours, theirs) = (namespace_led_by(&a.gate), namespace_led_by(&b.gate));
    let grant = WriteGrant::new(ResourcePattern::new("", "ConfigMap"), None).expect("grant");
    let writer = WriteClient::new(
        client.clone(),
        "tester".into(),
        WriteGrants::only(vec![grant]),
        ClientOptions::default(),
        Arc::new(Resources::new(client.clone())),
        Arc::new(NoWriteObserver),
    )
    .with_leader(a.gate.clone());
    let config_map = |ns: &str| {
        serde_json::json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "x", "namespace": ns},
        })
        .to_string()
    };
    server.clear_requests();
    writer.create(&config_map(&ours)).await.expect("our shard");
    let refused = writer.create(&config_map(&theirs)).await;
    assert!(
        matches!(&refused, Err(WriteError::Refused { refusal: kubewasm_runtime::Refusal::NotLeader, message }) if message.contains("not the leader") && message.contains("-shard-")),
        "{refused:?}"
    );
    let sent: Vec<_> = server
        .requests()
        .into_iter()
        .filter(|r| r.verb == Verb::Create && r.resource == "configmaps")
        .map(|r| r.namespace)
        .collect();
    assert_eq!(sent, [Some(ours)]);
    server.shutdown().await;
}

/// A leader whose eligibility turns to "no" closes its gate and releases the Lease, so the
/// standby leads within a retry period; it does not contend while ineligible, and once
/// eligible again it is the standby (the other keeps renewing), with no overlap throughout.
#[tokio::test(start_paused = true)]
async fn an_ineligible_leader_steps_down_and_contends_again_once_eligible() {
    let (server, client) = kubewasm_tests::devserver().await;
    let (fit, eligible) = watch::channel(Ok(()));
    // a's requests carry its own token, which the request log records.
    let mut config = kube::Config::new(server.url().parse().expect("url"));
    config.auth_info = serde_json::from_value(serde_json::json!({"token": "a"})).expect("auth");
    let a_client = Client::try_from(config).expect("client");
    let elector = LeaderElector::new(a_client, options("a"))
        .expect("valid options")
        .with_eligibility(eligible);
    let a_gate = elector.gate();
    let a_cancel = CancellationToken::new();
    let a_task = tokio::spawn(elector.run(a_cancel.clone()));
    a_gate.wait_leader().await;
    let b = start(&client, "b");
    let (stop, intervals) = record_intervals([a_gate.clone(), b.gate.clone()]);
    tokio::time::sleep(LEASE).await;
    assert!(a_gate.is_leader() && !b.gate.is_leader());

    let _ = fit.send_replace(Err("watches dead".into()));
    let unfit = Instant::now();
    b.gate.wait_leader().await;
    assert!(
        unfit.elapsed() <= RETRY * 2,
        "the released Lease was taken {:?} after",
        unfit.elapsed()
    );
    assert!(!a_gate.is_leader());
    assert_eq!(holder(&client).await.as_deref(), Some("b"));

    // Ineligible: a does not even read the Lease.
    let by_a = || server.requests().iter().filter(|r| r.client == "a").count();
    server.clear_requests();
    tokio::time::sleep(LEASE).await;
    assert_eq!(by_a(), 0, "an ineligible elector sends nothing");
    let _ = fit.send_replace(Ok(()));
    tokio::time::sleep(LEASE * 2).await;
    assert!(b.gate.is_leader() && !a_gate.is_leader(), "b stays leader");
    assert!(by_a() > 0, "a contends again once eligible");
    stop.cancel();
    assert_no_overlap(&intervals.await.expect("recorder"));
    a_cancel.cancel();
    b.cancel.cancel();
    let _ = a_task.await;
    let _ = b.task.await;
    server.shutdown().await;
}
