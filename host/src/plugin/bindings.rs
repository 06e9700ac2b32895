//! Host bindings generated from the WIT packages in `wit/`, the one place `bindgen!` runs:
//! `kubewasm:controller@0.1.0` (`wit/controller.wit`) at the top, and
//! `kubewasm:controller@0.2.0` (`wit/0.2/controller.wit`) in [`v0_2`].

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
    use super::super::state::HostState;

    /// Which world of the 0.2 package a component targets, read from its exports.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum World {
        /// `init` and the event handlers.
        Observer,
        /// `init` and `reconcile`.
        Reconciler,
        /// Both.
        Controller,
    }

    impl World {
        /// The world's name in the WIT package.
        pub fn as_str(self) -> &'static str {
            match self {
                World::Observer => "observer",
                World::Reconciler => "reconciler",
                World::Controller => "controller",
            }
        }
    }

    /// A 0.2 component linked against the host's imports, with the exports of its world found
    /// once: `plugin` always, `handler` and `reconcile` as its world has them.
    #[derive(Clone)]
    pub(crate) struct PluginPre {
        pre: InstancePre<HostState>,
        plugin: plugin::GuestIndices,
        handler: Option<handler::GuestIndices>,
        reconcile: Option<reconcile::GuestIndices>,
    }

    /// The exports of one 0.2 instance.
    pub(crate) struct PluginExports {
        pub(crate) plugin: plugin::Guest,
        pub(crate) handler: Option<handler::Guest>,
        pub(crate) reconcile: Option<reconcile::Guest>,
    }

    impl PluginPre {
        /// `None` when the component does not export the 0.2 `plugin` interface (it is not a
        /// 0.2 component); an error when it exports neither handlers nor `reconcile`.
        pub(crate) fn new(pre: InstancePre<HostState>) -> Option<wasmtime::Result<Self>> {
            let plugin = plugin::GuestIndices::new(&pre).ok()?;
            let handler = handler::GuestIndices::new(&pre).ok();
            let reconcile = reconcile::GuestIndices::new(&pre).ok();
            if handler.is_none() && reconcile.is_none() {
                return Some(Err(wasmtime::format_err!(
                    "it exports `kubewasm:controller/plugin@0.2.0` but neither `handler` nor \
                     `reconcile`: it targets none of the worlds observer, reconciler, controller"
                )));
            }
            Some(Ok(PluginPre {
                pre,
                plugin,
                handler,
                reconcile,
            }))
        }

        /// The world the component targets.
        pub fn world(&self) -> World {
            match (self.handler.is_some(), self.reconcile.is_some()) {
                (true, true) => World::Controller,
                (true, false) => World::Observer,
                _ => World::Reconciler,
            }
        }

        pub(crate) fn engine(&self) -> &wasmtime::Engine {
            self.pre.engine()
        }

        /// Instantiates the component and finds its exports.
        pub(crate) async fn instantiate_async(
            &self,
            store: &mut Store<HostState>,
        ) -> wasmtime::Result<PluginExports> {
            let instance = self.pre.instantiate_async(&mut *store).await?;
            Ok(PluginExports {
                plugin: self.plugin.load(&mut *store, &instance)?,
                handler: match &self.handler {
                    Some(h) => Some(h.load(&mut *store, &instance)?),
                    None => None,
                },
                reconcile: match &self.reconcile {
                    Some(r) => Some(r.load(&mut *store, &instance)?),
                    None => None,
                },
            })
        }
    }
}

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

    /// The host tells the contract versions apart by their exports: a 0.2 component matches
    /// the 0.2 bindings, a 0.1 component does not.
    #[test]
    fn a_0_2_guest_matches_the_host_0_2_bindings_and_a_0_1_guest_does_not() {
        use wasmtime::component::{Component, Linker};
        let engine = wasmtime::Engine::default();
        let exports_of = |package: &str| {
            let bytes = kubewasm_tests::guest_bytes(package);
            let component = Component::new(&engine, &bytes).expect("the guest compiles");
            let mut linker = Linker::<()>::new(&engine);
            linker
                .define_unknown_imports_as_traps(&component)
                .expect("imports stubbed");
            let pre = linker
                .instantiate_pre(&component)
                .expect("pre-instantiates");
            super::v0_2::ControllerIndices::new(&pre).map(drop)
        };
        exports_of("contract-v0-2").expect("a 0.2 guest has every 0.2 export");
        exports_of("sdk-v0-2-stamp").expect("a guest of the 0.2 SDK has every 0.2 export");
        assert!(
            exports_of("probe").is_err(),
            "a 0.1 guest is not taken for 0.2"
        );
    }

    const PUBLISHED_0_1_SHA256: &str =
        "78324bb13209a6bc6b8ad5edbcba1b967f69fd2b1cd99102515329f65abba083";
}
