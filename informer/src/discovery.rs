//! Which resource serves a kind, found through discovery once per kind and kept.
//!
//! Every plugin names its subscriptions and writes by kind, and the API server answers the
//! question with a whole group version's resource list (`/api/v1` is some forty resources).
//! Asked per plugin, a host starting a thousand plugins asked it thousands of times and the
//! API server's CPU grew with the plugin count although the informers did not. The answer
//! for a served kind does not change while it is served, so it is kept for
//! [`KindResolver::MAX_AGE`] (a kind whose CustomResourceDefinition was removed is then refused
//! at load again, not only by its informer's failing LISTs); a kind not found is asked again
//! the next time (its CustomResourceDefinition may have been installed meanwhile).

use std::collections::HashMap;
use std::sync::Arc;

use kube::api::GroupVersionKind;
use kube::discovery::{ApiResource, Scope};
use parking_lot::Mutex;
use tokio::sync::OnceCell;
use tokio::time::{Duration, Instant};

/// A resource as discovery answered it for a kind: its names, and whether it is namespaced.
pub type Served = (ApiResource, bool);

/// Finds the resource serving a kind, asking the API server once per kind however many ask
/// at once. Cheap to clone: clones share what was found.
#[derive(Clone)]
pub struct KindResolver {
    client: kube::Client,
    found: Arc<Mutex<HashMap<GroupVersionKind, Answer>>>,
}

/// One kind's answer, with when it came: filled once by whichever caller asks first.
type Answer = Arc<OnceCell<(Served, Instant)>>;

impl KindResolver {
    /// How long an answer is kept: a thousand plugins loading at once ask once, and a kind
    /// the server stopped serving is found out within a minute.
    pub const MAX_AGE: Duration = Duration::from_secs(60);

    /// Resolves kinds through `client`'s API server.
    pub fn new(client: kube::Client) -> Self {
        KindResolver {
            client,
            found: Arc::default(),
        }
    }

    /// The resource serving `gvk`: from what was found before, or from discovery. Callers
    /// asking for one kind at the same time wait for one request; a failure is kept by no
    /// one, so the next call asks again.
    pub async fn resolve(&self, gvk: &GroupVersionKind) -> Result<Served, kube::Error> {
        // A fresh answer (or one being asked for) is taken without copying the kind: every
        // write of every plugin comes through here.
        let cell = {
            let mut found = self.found.lock();
            match found.get(gvk) {
                Some(cell)
                    if cell
                        .get()
                        .is_none_or(|(_, at)| at.elapsed() < Self::MAX_AGE) =>
                {
                    cell.clone()
                }
                _ => {
                    let cell = Answer::default();
                    found.insert(gvk.clone(), cell.clone());
                    cell
                }
            }
        };
        let asking = Asking {
            found: &self.found,
            gvk,
            cell,
        };
        asking
            .cell
            .get_or_try_init(|| async {
                let (resource, capabilities) =
                    kube::discovery::pinned_kind(&self.client, gvk).await?;
                let namespaced = capabilities.scope == Scope::Namespaced;
                Ok::<_, kube::Error>(((resource, namespaced), Instant::now()))
            })
            .await
            .map(|(served, _)| served.clone())
    }

    /// The resource serving `gvk` if discovery has found it (however long ago).
    pub fn known(&self, gvk: &GroupVersionKind) -> Option<Served> {
        let found = self.found.lock();
        found.get(gvk)?.get().map(|(served, _)| served.clone())
    }
}

/// One caller's claim on a kind's answer. Kinds come from guests too: when the last caller
/// leaves without an answer (the kind is not served, the request failed, or the caller gave up
/// waiting: a write's timeout, a plugin unloaded), the empty entry goes with it, or inventing
/// kinds would grow the host.
struct Asking<'a> {
    found: &'a Mutex<HashMap<GroupVersionKind, Answer>>,
    gvk: &'a GroupVersionKind,
    cell: Answer,
}

impl Drop for Asking<'_> {
    fn drop(&mut self) {
        if self.cell.initialized() {
            return;
        }
        let mut found = self.found.lock();
        // Two holders: the map and this caller. Another caller still waiting holds a third
        // and takes the request over; the last to leave empty-handed removes the entry.
        if found
            .get(self.gvk)
            .is_some_and(|c| Arc::ptr_eq(c, &self.cell) && Arc::strong_count(c) == 2)
        {
            found.remove(self.gvk);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use http::{Request, Response};
    use kube::client::Body;

    use super::*;

    /// A client whose server answers `/api/v1` with the ConfigMap resource and everything
    /// else with 404, counting the discovery requests it serves.
    fn counting_client() -> (kube::Client, Arc<AtomicUsize>) {
        let served = Arc::new(AtomicUsize::new(0));
        let counter = served.clone();
        let service = tower::service_fn(move |request: Request<Body>| {
            let counter = counter.clone();
            async move {
                counter.fetch_add(1, Ordering::SeqCst);
                let (status, body) = if request.uri().path() == "/api/v1" {
                    (
                        200,
                        serde_json::json!({
                            "kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "v1",
                            "resources": [{"name": "configmaps", "singularName": "configmap",
                                           "namespaced": true, "kind": "ConfigMap",
                                           "verbs": ["get", "list", "watch"]}],
                        }),
                    )
                } else {
                    (
                        404,
                        serde_json::json!({"kind": "Status", "apiVersion": "v1",
                                           "status": "Failure", "reason": "NotFound",
                                           "code": 404, "message": "not found"}),
                    )
                };
                let body = Body::from(serde_json::to_vec(&body).expect("json"));
                Ok::<_, std::convert::Infallible>(
                    Response::builder()
                        .status(status)
                        .header("content-type", "application/json")
                        .body(body)
                        .expect("response"),
                )
            }
        });
        (kube::Client::new(service, "default"), served)
    }

    #[tokio::test]
    async fn a_kind_is_discovered_once_however_many_ask_at_once() {
        let (client, served) = counting_client();
        let kinds = KindResolver::new(client);
        let config_map = GroupVersionKind::gvk("", "v1", "ConfigMap");
        assert!(kinds.known(&config_map).is_none());
        let answers = futures::future::join_all((0..50).map(|_| kinds.resolve(&config_map))).await;
        for answer in answers {
            let (resource, namespaced) = answer.expect("ConfigMaps are served");
            assert_eq!((resource.plural.as_str(), namespaced), ("configmaps", true));
        }
        kinds.clone().resolve(&config_map).await.expect("kept");
        assert_eq!(served.load(Ordering::SeqCst), 1, "one discovery request");
        assert!(kinds.known(&config_map).is_some());
    }

    #[tokio::test(start_paused = true)]
    async fn an_answer_is_asked_again_once_it_is_older_than_the_max_age() {
        let (client, served) = counting_client();
        let kinds = KindResolver::new(client);
        let config_map = GroupVersionKind::gvk("", "v1", "ConfigMap");
        kinds.resolve(&config_map).await.expect("served");
        tokio::time::advance(KindResolver::MAX_AGE - Duration::from_secs(1)).await;
        kinds.resolve(&config_map).await.expect("kept");
        assert_eq!(served.load(Ordering::SeqCst), 1, "still fresh");
        tokio::time::advance(Duration::from_secs(1)).await;
        kinds.resolve(&config_map).await.expect("asked again");
        kinds.resolve(&config_map).await.expect("kept again");
        assert_eq!(
            served.load(Ordering::SeqCst),
            2,
            "asked again once, at its age"
        );
    }

    #[tokio::test]
    async fn a_kind_not_served_is_asked_again() {
        let (client, served) = counting_client();
        let kinds = KindResolver::new(client);
        let widget = GroupVersionKind::gvk("example.com", "v1", "Widget");
        assert!(kinds.resolve(&widget).await.is_err());
        assert!(kinds.resolve(&widget).await.is_err());
        assert_eq!(served.load(Ordering::SeqCst), 2, "a miss is not kept");
        assert!(kinds.known(&widget).is_none());
        for n in 0..100 {
            let invented = GroupVersionKind::gvk("example.com", "v1", &format!("Kind{n}"));
            assert!(kinds.resolve(&invented).await.is_err());
        }
        assert_eq!(kinds.found.lock().len(), 0, "misses leave no entry behind");
        let not_served = GroupVersionKind::gvk("", "v1", "Widget");
        assert!(
            kinds.resolve(&not_served).await.is_err(),
            "v1 has no Widget"
        );
    }

    /// A client whose server never answers.
    fn silent_client() -> kube::Client {
        let service = tower::service_fn(|_: Request<Body>| async {
            std::future::pending::<Result<Response<Body>, std::convert::Infallible>>().await
        });
        kube::Client::new(service, "default")
    }

    #[tokio::test(start_paused = true)]
    async fn a_caller_that_gives_up_waiting_leaves_no_entry_behind() {
        let kinds = KindResolver::new(silent_client());
        for n in 0..10 {
            let invented = GroupVersionKind::gvk("example.com", "v1", &format!("Kind{n}"));
            let gave_up =
                tokio::time::timeout(Duration::from_secs(10), kinds.resolve(&invented)).await;
            assert!(gave_up.is_err(), "the server never answers");
        }
        assert_eq!(kinds.found.lock().len(), 0, "abandoned asks leave no entry");

        // One of two callers giving up leaves the other's wait, and its entry, in place.
        let widget = GroupVersionKind::gvk("example.com", "v1", "Widget");
        let staying = kinds.resolve(&widget);
        let leaving = tokio::time::timeout(Duration::from_secs(1), kinds.resolve(&widget));
        let (stayed, left) = futures::future::join(
            tokio::time::timeout(Duration::from_secs(5), staying),
            async {
                let left = leaving.await;
                let entries = kinds.found.lock().len();
                (left, entries)
            },
        )
        .await;
        assert!(stayed.is_err() && left.0.is_err());
        assert_eq!(left.1, 1, "the entry stays while a caller still waits");
        assert_eq!(kinds.found.lock().len(), 0, "and goes with the last one");
    }
}
