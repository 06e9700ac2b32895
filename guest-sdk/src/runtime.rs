//! The glue [`export_controller!`](crate::export_controller) expands to: one plugin per instance,
//! kept in a thread-local between calls (a component instance is single-threaded and the host
//! never calls it twice at once).

use std::any::Any;
use std::cell::RefCell;

use crate::bindings::kubewasm::controller::types as wit;
use crate::event::RawEvent;
use crate::{Controller, Error, Plugin};

pub use wit_bindgen::rt as wit_bindgen_rt;

thread_local! {
    /// The `Plugin<C>` built by `init`, type-erased because statics cannot be generic.
    static PLUGIN: RefCell<Option<Box<dyn Any>>> = const { RefCell::new(None) };
}

/// The `init` export: builds the plugin and keeps it for the event calls.
pub fn init<C: Controller>(config: &str) -> Result<wit::PluginInfo, String> {
    let plugin = C::init(config).map_err(|error| error.to_string())?;
    let info = plugin.info().map_err(|error| error.to_string())?;
    PLUGIN.with(|slot| *slot.borrow_mut() = Some(Box::new(plugin)));
    Ok(info)
}

/// The `on-add` export.
pub fn on_add<C: Controller>(
    resource: &wit::Gvk,
    object: &str,
    in_initial_list: bool,
) -> Result<(), String> {
    dispatch::<C>(
        resource,
        RawEvent::Added {
            object,
            in_initial_list,
        },
    )
}

/// The `on-update` export.
pub fn on_update<C: Controller>(resource: &wit::Gvk, old: &str, new: &str) -> Result<(), String> {
    dispatch::<C>(resource, RawEvent::Updated { old, new })
}

/// The `on-delete` export.
pub fn on_delete<C: Controller>(
    resource: &wit::Gvk,
    object: &str,
    final_state_unknown: bool,
) -> Result<(), String> {
    dispatch::<C>(
        resource,
        RawEvent::Deleted {
            object,
            final_state_unknown,
        },
    )
}

fn dispatch<C: Controller>(resource: &wit::Gvk, event: RawEvent<'_>) -> Result<(), String> {
    PLUGIN.with(|slot| {
        let mut slot = slot.borrow_mut();
        let plugin = slot
            .as_mut()
            .and_then(|plugin| plugin.downcast_mut::<Plugin<C>>())
            .ok_or_else(|| Error::msg("event before a successful init"))
            .map_err(|error| error.to_string())?;
        plugin
            .dispatch(resource, event)
            .map_err(|error| error.to_string())
    })
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;

    use super::*;
    use crate::{Event, Resource, Subscription};

    /// Counts ConfigMap adds; `init` fails when the config says so.
    struct Counting(usize);

    impl Controller for Counting {
        fn init(config: &str) -> Result<Plugin<Self>, Error> {
            if config == "fail" {
                return Err(Error::msg("told to fail"));
            }
            Ok(Plugin::new("counting", Counting(0)).watch(
                Subscription::to::<ConfigMap>(),
                |state: &mut Counting, _: Event<ConfigMap>| {
                    state.0 += 1;
                    if state.0 > 1 {
                        Err(Error::msg("second add"))
                    } else {
                        Ok(())
                    }
                },
            ))
        }
    }

    #[test]
    fn events_reach_the_plugin_built_by_init_and_errors_become_strings() {
        let resource = Resource::of::<ConfigMap>().to_wit();
        assert_eq!(
            on_add::<Counting>(&resource, "{}", true),
            Err("event before a successful init".to_owned())
        );
        assert_eq!(init::<Counting>("fail").unwrap_err(), "told to fail");
        let info = init::<Counting>("").unwrap();
        assert_eq!(info.name, "counting");
        assert_eq!(on_add::<Counting>(&resource, "{}", true), Ok(()));
        assert_eq!(
            on_update::<Counting>(&resource, "{}", "{}"),
            Err("second add".to_owned())
        );
        let error = on_delete::<Counting>(&resource, "not json", false).unwrap_err();
        assert!(error.starts_with("cannot decode a v1 ConfigMap"), "{error}");
    }
}
