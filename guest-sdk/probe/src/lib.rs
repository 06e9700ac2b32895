//! sdk-probe: a test guest for `host/tests/e2e/examples_rust.rs`. On every ConfigMap event it runs
//! each typed cache helper of the SDK and provokes each host refusal it can, logging one line
//! per answer, so an end-to-end test can check the SDK against the real host.
//!
//! Config: the namespace its `get` probes look in (default `default`).

use kubewasm_guest::k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret};
use kubewasm_guest::{
    Cache, CacheError, Controller, DynamicObject, Error, Event, Index, Plugin, Resource,
    Subscription,
};

/// The label index the probe declares on ConfigMaps.
const BY_APP: &str = "by-app";

struct Probe {
    namespace: String,
    config_maps: Cache<ConfigMap>,
}

impl Probe {
    fn on_config_map(&mut self, event: Event<DynamicObject>) -> Result<(), Error> {
        let object = event.object();
        kubewasm_guest::info!("event {}", object.key());

        let fetched = self.config_maps.get(Some(&self.namespace), object.name())?;
        let data = fetched.and_then(|cm| cm.data).unwrap_or_default();
        kubewasm_guest::info!("get {}: {data:?}", object.name());

        let web = self.config_maps.list(None, Some("app=web"))?;
        let mut names: Vec<_> = web
            .iter()
            .filter_map(|cm| cm.metadata.name.clone())
            .collect();
        names.sort();
        kubewasm_guest::info!("list app=web: {names:?}");

        let in_namespace = self.config_maps.by_index("namespace", &self.namespace)?;
        kubewasm_guest::info!(
            "by-index namespace={}: {}",
            self.namespace,
            in_namespace.len()
        );
        let mut apps = self.config_maps.index_values(BY_APP)?;
        apps.sort();
        kubewasm_guest::info!("index-values {BY_APP}: {apps:?}");
        let dynamic = Cache::dynamic(Resource::of::<ConfigMap>()).by_index(BY_APP, "web")?;
        let mut keys: Vec<_> = dynamic.iter().map(DynamicObject::key).collect();
        keys.sort();
        kubewasm_guest::info!("by-index {BY_APP}=web: {keys:?}");
        kubewasm_guest::info!("has-synced: {}", self.config_maps.has_synced()?);

        let refusals = [
            refusal(Cache::<Secret>::new().list(None, None)),
            // Pods as DynamicObject: k8s-openapi's Pod would bring its whole schema (600 KB).
            refusal(Cache::dynamic(Resource::of::<Pod>()).get(Some("default"), "p")),
            refusal(self.config_maps.by_index("no-such-index", "x")),
            refusal(self.config_maps.list(None, Some("app in (web"))),
        ];
        kubewasm_guest::info!("refusals: {}", refusals.join(", "));
        Ok(())
    }
}

/// The variant of the SDK error a refused query came back as.
fn refusal<T>(answer: Result<T, Error>) -> &'static str {
    match answer {
        Ok(_) => "answered",
        Err(Error::Cache(CacheError::NotGranted(_))) => "not-granted",
        Err(Error::Cache(CacheError::NotSubscribed(_))) => "not-subscribed",
        Err(Error::Cache(CacheError::UnknownIndex(_))) => "unknown-index",
        Err(Error::Cache(CacheError::Invalid(_))) => "invalid",
        Err(_) => "other",
    }
}

impl Controller for Probe {
    fn init(config: &str) -> Result<Plugin<Self>, Error> {
        let namespace = match config.trim() {
            "" => "default".to_owned(),
            namespace => namespace.to_owned(),
        };
        let state = Probe {
            namespace,
            config_maps: Cache::new(),
        };
        Ok(Plugin::new("sdk-probe", state)
            .watch(Subscription::to::<ConfigMap>(), Self::on_config_map)
            .index(Index::label::<ConfigMap>(BY_APP, "app")))
    }
}

kubewasm_guest::export_controller!(Probe);
