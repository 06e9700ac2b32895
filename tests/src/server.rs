//! The API server an end-to-end scenario runs against: the in-process dev server or a real
//! kube-apiserver ([`crate::envtest`]), of the test's own or shared with the run's other tests.
//! A scenario is written once against [`TestServer`] and run on both; where their outcomes
//! differ, the dev server is wrong.

use k8s_openapi::api::core::v1::Namespace;
use kube::Api;
use kube::api::{ObjectMeta, PostParams};
use kubewasm_devserver::{DevServer, Verb};
use rand::distr::{Alphanumeric, SampleString};
use tokio::sync::Mutex;

use crate::envtest::{Connection, Envtest, SecondApiServer, SharedEnvtest};

/// One of the two servers, with the faults and the request count both can give.
pub enum TestServer {
    Dev(DevServer),
    Real(Box<RealServer>),
}

/// A real API server and what stands in for it during an outage.
pub struct RealServer {
    server: Real,
    /// The API server that takes writes during an outage of the main one.
    outage: Mutex<Option<SecondApiServer>>,
}

enum Real {
    /// The test's own: it may be restarted, stopped and compacted.
    Own(Box<Envtest>),
    /// The run's: the test keeps to namespaces of its own.
    Shared(Box<SharedEnvtest>),
}

impl RealServer {
    fn connection(&self) -> &Connection {
        match &self.server {
            Real::Own(server) => server,
            Real::Shared(server) => server,
        }
    }

    /// The test's own server, for `what` (a restart, an outage).
    ///
    /// # Panics
    /// On a shared server: `what` would disturb the run's other tests.
    fn own(&self, what: &str) -> &Envtest {
        match &self.server {
            Real::Own(server) => server,
            Real::Shared(_) => panic!(
                "{what} would disturb the other tests on the shared API server: start this \
                 test's server with TestServer::real(), not TestServer::real_shared()"
            ),
        }
    }
}

impl TestServer {
    /// A dev server on a free port.
    pub async fn dev() -> TestServer {
        let (server, _) = crate::devserver().await;
        TestServer::Dev(server)
    }

    /// A real kube-apiserver and etcd from `KUBEBUILDER_ASSETS`, of this test's own: for tests
    /// that restart, stop or compact it, or change what the whole cluster sees.
    ///
    /// # Panics
    /// When the variable is unset or the servers do not start: a real-server test must never
    /// pass without a real server (`cargo xtask test` leaves these tests out, and says so, when
    /// there are no assets).
    pub async fn real() -> TestServer {
        let server = Envtest::start()
            .await
            .unwrap_or_else(|e| panic!("the real API server does not start: {e}"));
        TestServer::real_from(Real::Own(Box::new(server)))
    }

    /// The real API server shared by the run's tests ([`SharedEnvtest`]): for tests that work
    /// in namespaces of their own ([`TestServer::namespace`] makes the names unique) and never
    /// restart it ([`TestServer::drop_watches`] and the outage panic on it).
    ///
    /// # Panics
    /// As [`TestServer::real`].
    pub async fn real_shared() -> TestServer {
        let server = SharedEnvtest::attach()
            .await
            .unwrap_or_else(|e| panic!("the shared real API server is not there: {e}"));
        TestServer::real_from(Real::Shared(Box::new(server)))
    }

    fn real_from(server: Real) -> TestServer {
        TestServer::Real(Box::new(RealServer {
            server,
            outage: Mutex::new(None),
        }))
    }

    /// `dev` or `real`, for names and messages.
    pub fn name(&self) -> &'static str {
        match self {
            TestServer::Dev(_) => "dev",
            TestServer::Real(_) => "real",
        }
    }

    /// The real server's harness (its restricted user, kubeconfigs, audit log); `None` on the
    /// dev server, which has no authentication.
    pub fn envtest(&self) -> Option<&Connection> {
        match self {
            TestServer::Dev(_) => None,
            TestServer::Real(real) => Some(real.connection()),
        }
    }

    /// A client allowed everything.
    pub fn client(&self) -> kube::Client {
        match self {
            TestServer::Dev(server) => server.client(),
            TestServer::Real(real) => real.connection().admin(),
        }
    }

    /// Creates a namespace named for `name` (the real server refuses objects in a namespace
    /// that does not exist) and returns its name: `name` itself, or on the shared server `name`
    /// with a random suffix, so that no two tests of a run share one.
    pub async fn namespace(&self, name: &str) -> String {
        let name = match self {
            TestServer::Real(real) if matches!(real.server, Real::Shared(_)) => {
                let suffix = Alphanumeric.sample_string(&mut rand::rng(), 6);
                format!("{name}-{}", suffix.to_lowercase())
            }
            _ => name.to_owned(),
        };
        let namespace = Namespace {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                ..ObjectMeta::default()
            },
            ..Namespace::default()
        };
        Api::<Namespace>::all(self.client())
            .create(&PostParams::default(), &namespace)
            .await
            .unwrap_or_else(|e| {
                panic!(
                    "creating namespace {name} on the {} server: {e}",
                    self.name()
                )
            });
        name
    }

    /// Ends every open watch. Dev server: its streams close and clients re-watch. Real server:
    /// the API server is restarted, so watches also find their resourceVersion expired (410)
    /// and relist.
    pub async fn drop_watches(&self) {
        match self {
            TestServer::Dev(server) => server.close_watches(),
            TestServer::Real(real) => real
                .own("restarting the API server")
                .restart_api_server()
                .await
                .unwrap_or_else(|e| panic!("restarting kube-apiserver: {e}")),
        }
    }

    /// Starts an outage of the watches: they end and cannot resume until
    /// [`TestServer::end_outage`]. Returns a client whose writes land meanwhile, unseen by any
    /// watcher. Dev server: every watch request fails with 500. Real server: the API server
    /// stops and a second one on the same etcd takes the writes.
    pub async fn begin_outage(&self) -> kube::Client {
        match self {
            TestServer::Dev(server) => {
                server.fail_next(Verb::Watch, usize::MAX, 500);
                server.close_watches();
                server.client()
            }
            TestServer::Real(real) => {
                let server = real.own("an outage");
                server.stop_api_server();
                let second = server
                    .second_api_server()
                    .await
                    .unwrap_or_else(|e| panic!("starting a second kube-apiserver: {e}"));
                let client = second.client();
                *real.outage.lock().await = Some(second);
                client
            }
        }
    }

    /// Ends the outage with the history compacted, so a watch from any resourceVersion handed
    /// out before answers 410 Gone and watchers must relist. Dev server: compaction, then
    /// watches succeed again. Real server: the second API server stops, etcd is compacted and
    /// the main API server starts again.
    pub async fn end_outage(&self) {
        match self {
            TestServer::Dev(server) => {
                server.compact();
                server.fail_next(Verb::Watch, 0, 0);
            }
            TestServer::Real(real) => {
                drop(real.outage.lock().await.take());
                let server = real.own("compacting etcd");
                server
                    .compact_etcd()
                    .await
                    .unwrap_or_else(|e| panic!("compacting etcd: {e}"));
                server
                    .start_api_server()
                    .await
                    .unwrap_or_else(|e| panic!("starting kube-apiserver again: {e}"));
            }
        }
    }

    /// How many LISTs and WATCHes of `resource` (lower-case plural) in `namespace` the server
    /// has received so far. Dev server: its request log. Real server: its audit log.
    pub fn list_watches(&self, resource: &str, namespace: &str) -> usize {
        match self {
            TestServer::Dev(server) => server
                .requests()
                .iter()
                .filter(|r| {
                    matches!(r.verb, Verb::List | Verb::Watch)
                        && r.resource == resource
                        && r.namespace.as_deref() == Some(namespace)
                })
                .count(),
            TestServer::Real(real) => real
                .connection()
                .audit_events()
                .unwrap_or_else(|e| panic!("reading the audit log: {e}"))
                .iter()
                .filter(|e| {
                    ["list", "watch"].contains(&e.verb.as_str())
                        && e.resource == resource
                        && e.namespace.as_deref() == Some(namespace)
                })
                .count(),
        }
    }
}
