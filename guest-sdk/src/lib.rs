//! Write kubewasm plugins in Rust.
//!
//! A plugin is a type implementing [`Controller`]: its `init` returns a [`Plugin`] that names the
//! plugin, declares what it subscribes to ([`Subscription`]) and which indexes the host should
//! keep ([`Index`]), and registers one typed handler per watched resource. [`export_controller!`]
//! turns the type into the component's exports. Handlers receive [`Event`]s of k8s-openapi types,
//! of [`DynamicObject`] (for custom resources) or of any serde type, parsed from the host's JSON
//! exactly once, and read the host's shared cache through [`Cache`].
//!
//! ```
//! use kubewasm_guest::k8s_openapi::api::core::v1::Pod;
//! use kubewasm_guest::{Controller, Error, Event, Plugin, Subscription};
//!
//! struct Phases;
//!
//! impl Phases {
//!     fn on_pod(&mut self, event: Event<Pod>) -> Result<(), Error> {
//!         let pod = event.object();
//!         let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref()).unwrap_or("?");
//!         kubewasm_guest::info!("{} is {phase}", pod.metadata.name.as_deref().unwrap_or(""));
//!         Ok(())
//!     }
//! }
//!
//! impl Controller for Phases {
//!     fn init(_config: &str) -> Result<Plugin<Self>, Error> {
//!         Ok(Plugin::new("phases", Phases).watch(Subscription::to::<Pod>(), Self::on_pod))
//!     }
//! }
//!
//! kubewasm_guest::export_controller!(Phases);
//! ```
//!
//! Build with `cargo build --target wasm32-wasip2 --profile guest` (the crate must be a `cdylib`);
//! the resulting `.wasm` file is already a component. On other targets the crate still compiles
//! (for tests and clippy): logs go to stderr and cache queries answer [`Error::NoHost`].

extern crate self as kubewasm_guest;

#[doc(hidden)]
pub mod bindings;
pub mod cache;
mod controller;
mod error;
mod event;
mod export;
mod index;
pub mod log;
mod object;
mod plugin;
mod resource;
#[doc(hidden)]
pub mod runtime;
mod subscription;

pub use cache::Cache;
pub use controller::Controller;
pub use error::{CacheError, Error};
pub use event::Event;
pub use index::{Index, IndexSource};
pub use object::DynamicObject;
pub use plugin::Plugin;
pub use resource::{Kind, Resource};
pub use subscription::{Delivery, Subscription};

pub use k8s_openapi;
pub use serde_json;

/// The guest guide's Rust examples (`docs/guest-guide.md`), compiled as doc tests so the guide
/// cannot drift from the SDK.
#[cfg(doctest)]
#[doc = include_str!("../../docs/guest-guide.md")]
pub struct GuestGuide;
