//! The glue [`export_controller!`](crate::export_controller) expands to: the plugin's state
//! between calls, and conversions to the contract's types.

use std::any::Any;
use std::cell::RefCell;
use std::time::Duration;

use crate::bindings::exports::kubewasm::controller0_2_0::reconcile::Action as WitAction;
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

pub use crate::bindings::batch::exports::kubewasm::controller0_2_1::batch_handler::{
    EventBatch, EventError as BatchEventError,
};

/// The JSON at `offset`, `len` in `documents`: an error if it lies outside them. The host
/// sends UTF-8 (the API server's JSON), so it is not checked again here: checking every byte
/// of every object would cost more than the whole call.
fn text(documents: &[u8], offset: u32, len: u32) -> Result<&str, Error> {
    let start = offset as usize;
    let bytes = documents
        .get(start..start.saturating_add(len as usize))
        .ok_or_else(|| Error(format!("an object outside the batch: {offset}+{len}")))?;
    // SAFETY: the contract says the host's JSON is UTF-8 (it keeps the API server's bytes,
    // which are), and the `&str` is only read.
    Ok(unsafe { std::str::from_utf8_unchecked(bytes) })
}

/// Hands each event of a batch to the plugin's handler for its kind, in order; answers the
/// ones that failed. Without an instance (`init` has not run) every event fails.
pub fn on_events<C: Controller>(batch: EventBatch) -> Vec<BatchEventError> {
    let documents = batch.documents.as_slice();
    let mut failed = Vec::new();
    for (index, event) in batch.events.chunks_exact(6).enumerate() {
        let &[subscription, what, offset, len, old_offset, old_len] = event else {
            continue;
        };
        let flag = what & 4 != 0;
        let handled = with::<C, _>(|c| {
            let object = text(documents, offset, len)?;
            match what & !4 {
                0 => c.on_add(subscription, object, flag),
                1 => c.on_update(subscription, text(documents, old_offset, old_len)?, object),
                2 => c.on_delete(subscription, object, flag),
                other => Err(Error(format!("an event of unknown kind {other}"))),
            }
        });
        if let Err(reason) = handled {
            failed.push(BatchEventError {
                index: u32::try_from(index).unwrap_or(u32::MAX),
                reason,
            });
        }
    }
    failed
}

pub fn reconcile<C: Controller>(key: Key) -> Result<WitAction, String> {
    with::<C, _>(|c| c.reconcile(key)).map(|action| match action {
        Action::Done => WitAction::Done,
        Action::RequeueAfter(delay) => WitAction::RequeueAfter(millis(delay)),
    })
}

/// Exports a [`Controller`] as the component's `plugin`, `batch-handler` and `reconcile`
/// exports (world `batch-controller` of 0.2.1). Use it once, in the guest crate (a `cdylib`).
#[macro_export]
macro_rules! export_controller {
    ($controller:ty) => {
        const _: () = {
            struct KubewasmGuest;

            impl $crate::bindings::exports::kubewasm::controller0_2_2::plugin::Guest
                for KubewasmGuest
            {
                fn init(
                    config: ::std::string::String,
                ) -> ::std::result::Result<$crate::PluginInfo, ::std::string::String> {
                    $crate::runtime::init::<$controller>(&config)
                }
            }

            impl $crate::bindings::batch::exports::kubewasm::controller0_2_1::batch_handler::Guest
                for KubewasmGuest
            {
                fn on_events(
                    batch: $crate::runtime::EventBatch,
                ) -> ::std::vec::Vec<$crate::runtime::BatchEventError> {
                    $crate::runtime::on_events::<$controller>(batch)
                }
            }

            impl $crate::bindings::exports::kubewasm::controller0_2_0::reconcile::Guest
                for KubewasmGuest
            {
                fn reconcile(
                    key: $crate::Key,
                ) -> ::std::result::Result<
                    $crate::bindings::exports::kubewasm::controller0_2_0::reconcile::Action,
                    ::std::string::String,
                > {
                    $crate::runtime::reconcile::<$controller>(key)
                }
            }

            $crate::bindings::export!(KubewasmGuest with_types_in $crate::bindings);
            $crate::bindings::batch::export_batch!(KubewasmGuest with_types_in $crate::bindings::batch);
        };
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_are_whole_milliseconds_saturating_at_the_contracts_u32() {
        assert_eq!(millis(Duration::from_micros(2500)), 2);
        assert_eq!(millis(Duration::from_secs(u64::MAX)), u32::MAX);
    }

    #[test]
    fn a_batch_object_is_read_where_its_numbers_say_and_outside_is_an_error() {
        let documents = br#"{"a":1}{"b":2}"#;
        assert_eq!(text(documents, 7, 7).unwrap(), r#"{"b":2}"#);
        assert!(text(documents, 10, 7).is_err());
        assert!(text(documents, u32::MAX, u32::MAX).is_err());
    }
}
