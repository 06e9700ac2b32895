//! Host bindings generated from the WIT packages in `wit/`, the one place `bindgen!` runs:
//! `kubewasm:controller@0.1.0` (`wit/controller.wit`) at the top, and
//! `kubewasm:controller@0.2.0` (`wit/0.2/controller.wit`) in [`v0_2`], and the one interface
//! 0.2.1 adds (`wit/0.2.1/batch.wit`) in [`v0_2_1`], 0.2.2's predicates in [`v0_2_2`], and
//! 0.3.0's `admission` in [`v0_3`]; and the host side of each contract's imports
//! ([`imports_v0_1`], [`imports_v0_2`]).

wasmtime::component::bindgen!({
    path: "../wit",
    world: "controller",
    exports: { default: async },
});

/// The 0.2.0 contract: world `controller` (handlers and reconcile); the `observer` and
/// `reconciler` worlds are its subsets, so a component of either is loaded through the
/// interfaces it exports.
pub(crate) mod v0_2 {
    wasmtime::component::bindgen!({
        path: "../wit/0.2",
        world: "controller",
        imports: { "kubewasm:controller/client": async },
        exports: { default: async },
    });

    use wasmtime::Store;
    use wasmtime::component::InstancePre;

    use self::exports::kubewasm::controller::{handler, plugin, reconcile};
    use super::AdmissionIndices;
    use super::v0_2_1::exports::kubewasm::controller0_2_1::batch_handler;
    use super::v0_2_2::exports::kubewasm::controller0_2_2::plugin as plugin_0_2_2;
    use crate::wasm::state::HostState;

    /// Which world of the 0.2 contract a component targets, read from its exports.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum World {
        /// `init` and the event handlers.
        Observer,
        /// `init` and `reconcile`.
        Reconciler,
        /// Both.
        Controller,
        /// `init` and the batched event handlers (0.2.1).
        BatchObserver,
        /// `init`, the batched event handlers and `reconcile` (0.2.1).
        BatchController,
        /// 0.2.2's `reconciler`: 0.2.0's, declaring through `plugin@0.2.2`.
        PredicateReconciler,
        /// 0.2.2's `batch-controller`: 0.2.1's, declaring through `plugin@0.2.2`.
        PredicateBatchController,
        /// `init` and `admission` (0.3.0).
        AdmissionPolicy,
        /// `init`, the batched event handlers, `reconcile` and `admission` (0.3.0).
        AdmissionController,
    }

    impl World {
        /// The world's name in its WIT package.
        pub fn as_str(self) -> &'static str {
            match self {
                World::Observer => "observer",
                World::Reconciler => "reconciler",
                World::Controller => "controller",
                World::BatchObserver => "batch-observer",
                World::BatchController | World::PredicateBatchController => "batch-controller",
                World::PredicateReconciler => "reconciler",
                World::AdmissionPolicy => "admission-policy",
                World::AdmissionController => "admission-controller",
            }
        }

        /// The package version that defines the world.
        pub fn package(self) -> &'static str {
            match self {
                World::BatchObserver | World::BatchController => "kubewasm:controller@0.2.1",
                World::PredicateReconciler | World::PredicateBatchController => {
                    "kubewasm:controller@0.2.2"
                }
                World::AdmissionPolicy | World::AdmissionController => "kubewasm:controller@0.3.0",
                _ => "kubewasm:controller@0.2.0",
            }
        }

        /// Whether the world exports event handlers (one by one or batched).
        pub fn has_handlers(self) -> bool {
            !matches!(
                self,
                World::Reconciler | World::PredicateReconciler | World::AdmissionPolicy
            )
        }

        /// Whether the world exports `reconcile`.
        pub fn has_reconcile(self) -> bool {
            matches!(
                self,
                World::Reconciler
                    | World::Controller
                    | World::BatchController
                    | World::PredicateReconciler
                    | World::PredicateBatchController
                    | World::AdmissionController
            )
        }

        /// Whether the world exports `admission` (0.3.0).
        pub fn has_admission(self) -> bool {
            matches!(self, World::AdmissionPolicy | World::AdmissionController)
        }
    }

    /// How a 0.2 component takes events, if it does.
    #[derive(Clone)]
    enum Handlers {
        None,
        /// `handler`: one call per event.
        Single(handler::GuestIndices),
        /// `batch-handler` (0.2.1): one call per batch.
        Batch(batch_handler::GuestIndices),
    }

    /// A 0.2 component linked against the host's imports, with the exports of its world found
    /// once: `plugin` always, event handlers and `reconcile` as its world has them.
    /// Which contract's `plugin` (the declaration) the component exports.
    #[derive(Clone)]
    enum Declares {
        V0_2_0(plugin::GuestIndices),
        V0_2_2(plugin_0_2_2::GuestIndices),
    }

    /// A component's `plugin` export, of 0.2.0 or 0.2.2.
    #[derive(Clone)]
    pub(crate) enum PluginExport {
        V0_2_0(plugin::Guest),
        V0_2_2(plugin_0_2_2::Guest),
    }

    #[derive(Clone)]
    pub(crate) struct PluginPre {
        pre: InstancePre<HostState>,
        plugin: Declares,
        handlers: Handlers,
        reconcile: Option<reconcile::GuestIndices>,
        /// `admission` (0.3.0), called by the plugin's admission instances.
        admission: Option<AdmissionIndices>,
    }

    /// The event handlers of one 0.2 instance.
    #[derive(Clone)]
    pub(crate) enum HandlerExports {
        Single(handler::Guest),
        Batch(batch_handler::Guest),
    }

    /// The exports of one 0.2 instance.
    pub(crate) struct PluginExports {
        pub(crate) plugin: PluginExport,
        pub(crate) handler: Option<HandlerExports>,
        pub(crate) reconcile: Option<reconcile::Guest>,
    }

    impl PluginPre {
        /// `None` when the component does not export the 0.2 `plugin` interface (it is not a
        /// 0.2 component); an error when it exports neither handlers nor `reconcile`. A
        /// component exporting both kinds of handlers is called through `batch-handler`.
        pub(crate) fn new(pre: InstancePre<HostState>) -> Option<wasmtime::Result<Self>> {
            // Looked up by its exact name: wasmtime would match `plugin@0.2.2` to a 0.2.0
            // component's `plugin@0.2.0` (semver-compatible names), whose types differ.
            let declares_0_2_2 = pre
                .component()
                .component_type()
                .get_export(pre.engine(), "kubewasm:controller/plugin@0.2.2")
                .is_some();
            let plugin = if declares_0_2_2 {
                Declares::V0_2_2(plugin_0_2_2::GuestIndices::new(&pre).ok()?)
            } else {
                Declares::V0_2_0(plugin::GuestIndices::new(&pre).ok()?)
            };
            let handlers = match batch_handler::GuestIndices::new(&pre) {
                Ok(b) => Handlers::Batch(b),
                Err(_) => match handler::GuestIndices::new(&pre) {
                    Ok(h) => Handlers::Single(h),
                    Err(_) => Handlers::None,
                },
            };
            let reconcile = reconcile::GuestIndices::new(&pre).ok();
            let admission = AdmissionIndices::new(&pre).ok();
            if matches!(handlers, Handlers::None) && reconcile.is_none() && admission.is_none() {
                return Some(Err(wasmtime::format_err!(
                    "it exports `kubewasm:controller/plugin@0.2.0` but neither `handler`, \
                     `batch-handler`, `reconcile` nor `admission`: it targets none of the worlds \
                     observer, reconciler, controller, batch-observer, batch-controller, \
                     admission-policy, admission-controller"
                )));
            }
            if admission.is_some()
                && !matches!(
                    (&handlers, reconcile.is_some()),
                    (Handlers::None, false) | (Handlers::Batch(_), true)
                )
            {
                return Some(Err(wasmtime::format_err!(
                    "it exports `kubewasm:controller/admission@0.3.0` with some but not all of \
                     `batch-handler` and `reconcile`: it targets neither admission-policy (no \
                     handlers, no reconcile) nor admission-controller (both)"
                )));
            }
            Some(Ok(PluginPre {
                pre,
                plugin,
                handlers,
                reconcile,
                admission,
            }))
        }

        /// The world the component targets.
        pub fn world(&self) -> World {
            if self.admission.is_some() {
                return match self.handlers {
                    Handlers::None => World::AdmissionPolicy,
                    _ => World::AdmissionController,
                };
            }
            if matches!(self.plugin, Declares::V0_2_2(_)) {
                return match self.handlers {
                    Handlers::None => World::PredicateReconciler,
                    _ => World::PredicateBatchController,
                };
            }
            match (&self.handlers, self.reconcile.is_some()) {
                (Handlers::Single(_), true) => World::Controller,
                (Handlers::Single(_), false) => World::Observer,
                (Handlers::Batch(_), true) => World::BatchController,
                (Handlers::Batch(_), false) => World::BatchObserver,
                (Handlers::None, _) => World::Reconciler,
            }
        }

        pub(crate) fn engine(&self) -> &wasmtime::Engine {
            self.pre.engine()
        }

        /// The linked component, for the admission instances (which load `admission` too).
        pub(crate) fn instance_pre(&self) -> &InstancePre<HostState> {
            &self.pre
        }

        /// Where 0.2.0's `plugin` is in the component's exports (the admission worlds declare
        /// through it); `None` for a component declaring through 0.2.2's.
        pub(crate) fn plugin_indices(&self) -> Option<&plugin::GuestIndices> {
            match &self.plugin {
                Declares::V0_2_0(indices) => Some(indices),
                Declares::V0_2_2(_) => None,
            }
        }

        /// Where `admission` is, if the component exports it.
        pub(crate) fn admission_indices(&self) -> Option<&AdmissionIndices> {
            self.admission.as_ref()
        }

        /// Instantiates the component and finds its exports.
        pub(crate) async fn instantiate_async(
            &self,
            store: &mut Store<HostState>,
        ) -> wasmtime::Result<PluginExports> {
            let instance = self.pre.instantiate_async(&mut *store).await?;
            Ok(PluginExports {
                plugin: match &self.plugin {
                    Declares::V0_2_0(p) => PluginExport::V0_2_0(p.load(&mut *store, &instance)?),
                    Declares::V0_2_2(p) => PluginExport::V0_2_2(p.load(&mut *store, &instance)?),
                },
                handler: match &self.handlers {
                    Handlers::None => None,
                    Handlers::Single(h) => {
                        Some(HandlerExports::Single(h.load(&mut *store, &instance)?))
                    }
                    Handlers::Batch(b) => {
                        Some(HandlerExports::Batch(b.load(&mut *store, &instance)?))
                    }
                },
                reconcile: match &self.reconcile {
                    Some(r) => Some(r.load(&mut *store, &instance)?),
                    None => None,
                },
            })
        }
    }
}

/// The interface `kubewasm:controller@0.2.1` adds: `batch-handler`. The host calls `on-events`
/// with its own batch type, [`EventBatch`](crate::events::batch::EventBatch), which lowers the
/// cache's objects straight into the guest's memory; these bindings find the export and give
/// the error type.
pub(crate) mod v0_2_1 {
    wasmtime::component::bindgen!({
        path: ["../wit/0.2", "../wit/0.2.1"],
        inline: "package kubewasm:host; world batch { export kubewasm:controller/batch-handler@0.2.1; }",
        exports: { default: async },
        ownership: Borrowing { duplicate_if_necessary: false },
    });
}

/// `plugin` of 0.2.2: the declaration with predicates on queue rules; 0.2.0's types are the
/// [`v0_2`] ones.
pub(crate) mod v0_2_2 {
    wasmtime::component::bindgen!({
        path: ["../wit/0.2", "../wit/0.2.1", "../wit/0.2.2"],
        inline: "package kubewasm:host; world declare { export kubewasm:controller/plugin@0.2.2; }",
        exports: { default: async },
        with: { "kubewasm:controller/types@0.2.0": super::v0_2::kubewasm::controller::types },
    });
}

/// Host bindings of the one interface 0.3.0 adds for the host to call: `admission`.
pub(crate) mod v0_3 {
    wasmtime::component::bindgen!({
        path: ["../wit/0.2", "../wit/0.2.1", "../wit/0.3"],
        inline: "package kubewasm:host; world admission { export kubewasm:controller/admission@0.3.0; }",
        exports: { default: async },
    });
}

/// Where `admission` is in a component's exports.
pub(crate) type AdmissionIndices =
    v0_3::exports::kubewasm::controller0_3_0::admission::GuestIndices;

pub(crate) mod imports_v0_1;
pub(crate) mod imports_v0_2;

#[cfg(test)]
mod tests {
    use sha2::{Digest, Sha256};

    /// 0.1.0 is published: components built against it must keep loading, so its text never
    /// changes. A new version is a new package (`wit/0.2/`, ...), never an edit of this one.
    #[test]
    fn the_published_0_1_package_is_unchanged() {
        let text = include_bytes!("../../../wit/controller.wit");
        let digest = format!("{:x}", Sha256::digest(text));
        assert_eq!(digest, PUBLISHED_0_1_SHA256);
    }

    /// 0.2.0 is published too: 0.2.1 adds to it from its own directory (`wit/0.2.1/`), never
    /// by editing it.
    #[test]
    fn the_published_0_2_0_package_is_unchanged() {
        let text = include_bytes!("../../../wit/0.2/controller.wit");
        let digest = format!("{:x}", Sha256::digest(text));
        assert_eq!(digest, PUBLISHED_0_2_0_SHA256);
    }

    /// The host tells the contract versions apart by their exports: a 0.2 component matches
    /// the 0.2 bindings, in the world its exports make; a 0.1 component does not.
    #[test]
    fn each_guest_matches_the_world_it_was_built_for() {
        use super::v0_2::{PluginPre, World};
        use wasmtime::component::{Component, Linker};
        let engine = wasmtime::Engine::default();
        let world_of = |package: &str| {
            let bytes = kubewasm_tests::guest_bytes(package);
            let component = Component::new(&engine, &bytes).expect("the guest compiles");
            let mut linker = Linker::new(&engine);
            linker
                .define_unknown_imports_as_traps(&component)
                .expect("imports stubbed");
            let pre = linker
                .instantiate_pre(&component)
                .expect("pre-instantiates");
            PluginPre::new(pre).map(|p| p.expect("a 0.2 world").world())
        };
        assert_eq!(world_of("contract-v0-2"), Some(World::Controller));
        assert_eq!(world_of("observer-v0-2"), Some(World::Observer));
        assert_eq!(world_of("reconciler-v0-2"), Some(World::Reconciler));
        assert_eq!(world_of("batch-observer"), Some(World::BatchObserver));
        assert_eq!(
            world_of("sdk-v0-2-stamp"),
            Some(World::PredicateBatchController),
            "a guest of the 0.2 SDK takes events in batches and declares through 0.2.2"
        );
        assert_eq!(
            World::PredicateBatchController.package(),
            "kubewasm:controller@0.2.2"
        );
        assert_eq!(
            world_of("admission-probe"),
            Some(World::AdmissionPolicy),
            "a 0.3 guest with no handlers and no reconcile is an admission policy"
        );
        assert_eq!(world_of("probe"), None, "a 0.1 guest is not taken for 0.2");
    }

    const PUBLISHED_0_2_0_SHA256: &str =
        "bae58a18d6cdd14b2c2d7ac4bc25c1cb03eda87aa4ec7a9bdd8e5a629706138d";
    const PUBLISHED_0_1_SHA256: &str =
        "78324bb13209a6bc6b8ad5edbcba1b967f69fd2b1cd99102515329f65abba083";
}
