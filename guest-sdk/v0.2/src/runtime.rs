//! The glue [`export_controller!`](crate::export_controller) expands to: the plugin's state
//! between calls, and conversions to the contract's types.

use std::any::Any;
use std::cell::RefCell;
use std::time::Duration;

use crate::bindings::exports::kubewasm::controller::reconcile::Action as WitAction;
use crate::{Action, Controller, Error, Key, PluginInfo};

thread_local! {
    /// The instance's plugin, set by `init`.
    static PLUGIN: RefCell<Option<Box<dyn Any>>> = const { RefCell::new(None) };
}

/// `delay` in whole milliseconds, saturating at the contract's `u32`.
pub fn millis(delay: Duration) -> u32 {
    u32::try_from(delay.as_millis()).unwrap_or(u32::MAX)
}

pub fn init<C: Controller>(config: &str) -> Result<PluginInfo, String> {
    let (plugin, info) = C::init(config).map_err(|e| e.0)?;
    PLUGIN.with(|p| *p.borrow_mut() = Some(Box::new(plugin)));
    Ok(info)
}

/// Runs `f` on the plugin; an error if `init` has not run.
pub fn with<C: Controller, R>(f: impl FnOnce(&mut C) -> Result<R, Error>) -> Result<R, String> {
    PLUGIN.with(|p| {
        let mut slot = p.borrow_mut();
        let plugin = slot
            .as_mut()
            .and_then(|p| p.downcast_mut::<C>())
            .ok_or_else(|| "called before init".to_owned())?;
        f(plugin).map_err(|e| e.0)
    })
}

pub fn reconcile<C: Controller>(key: Key) -> Result<WitAction, String> {
    with::<C, _>(|c| c.reconcile(key)).map(|action| match action {
        Action::Done => WitAction::Done,
        Action::RequeueAfter(delay) => WitAction::RequeueAfter(millis(delay)),
    })
}

/// Exports a [`Controller`] as the component's `plugin`, `handler` and `reconcile` exports
/// (world `controller`). Use it once, in the guest crate (a `cdylib`).
#[macro_export]
macro_rules! export_controller {
    ($controller:ty) => {
        const _: () = {
            struct KubewasmGuest;

            impl $crate::bindings::exports::kubewasm::controller::plugin::Guest for KubewasmGuest {
                fn init(
                    config: ::std::string::String,
                ) -> ::std::result::Result<$crate::PluginInfo, ::std::string::String> {
                    $crate::runtime::init::<$controller>(&config)
                }
            }

            impl $crate::bindings::exports::kubewasm::controller::handler::Guest for KubewasmGuest {
                fn on_add(
                    subscription: u32,
                    object: ::std::string::String,
                    initial: bool,
                ) -> ::std::result::Result<(), ::std::string::String> {
                    $crate::runtime::with::<$controller, _>(|c| {
                        $crate::Controller::on_add(c, subscription, &object, initial)
                    })
                }

                fn on_update(
                    subscription: u32,
                    old: ::std::string::String,
                    new: ::std::string::String,
                ) -> ::std::result::Result<(), ::std::string::String> {
                    $crate::runtime::with::<$controller, _>(|c| {
                        $crate::Controller::on_update(c, subscription, &old, &new)
                    })
                }

                fn on_delete(
                    subscription: u32,
                    object: ::std::string::String,
                    unknown: bool,
                ) -> ::std::result::Result<(), ::std::string::String> {
                    $crate::runtime::with::<$controller, _>(|c| {
                        $crate::Controller::on_delete(c, subscription, &object, unknown)
                    })
                }
            }

            impl $crate::bindings::exports::kubewasm::controller::reconcile::Guest
                for KubewasmGuest
            {
                fn reconcile(
                    key: $crate::Key,
                ) -> ::std::result::Result<
                    $crate::bindings::exports::kubewasm::controller::reconcile::Action,
                    ::std::string::String,
                > {
                    $crate::runtime::reconcile::<$controller>(key)
                }
            }

            $crate::bindings::export!(KubewasmGuest with_types_in $crate::bindings);
        };
    };
}
