//! [`export_controller!`](crate::export_controller): a [`Controller`](crate::Controller) type as the
//! component's `handler` exports.

/// Exports a [`Controller`](crate::Controller) implementation as the component's `handler`
/// interface. Use it once, in the guest crate (a `cdylib`).
///
/// ```
/// # use kubewasm_guest::{Controller, Error, Plugin};
/// struct Quiet;
/// impl Controller for Quiet {
///     fn init(_config: &str) -> Result<Plugin<Self>, Error> {
///         Ok(Plugin::new("quiet", Quiet))
///     }
/// }
/// kubewasm_guest::export_controller!(Quiet);
/// ```
#[macro_export]
macro_rules! export_controller {
    ($controller:ty) => {
        const _: () = {
            struct KubewasmGuest;

            impl $crate::bindings::exports::kubewasm::controller::handler::Guest for KubewasmGuest {
                fn init(
                    config: ::std::string::String,
                ) -> ::std::result::Result<
                    $crate::bindings::kubewasm::controller::types::PluginInfo,
                    ::std::string::String,
                > {
                    $crate::runtime::init::<$controller>(&config)
                }

                fn on_add(
                    resource: $crate::bindings::kubewasm::controller::types::Gvk,
                    object: ::std::string::String,
                    in_initial_list: bool,
                ) -> ::std::result::Result<(), ::std::string::String> {
                    $crate::runtime::on_add::<$controller>(&resource, &object, in_initial_list)
                }

                fn on_update(
                    resource: $crate::bindings::kubewasm::controller::types::Gvk,
                    old: ::std::string::String,
                    new: ::std::string::String,
                ) -> ::std::result::Result<(), ::std::string::String> {
                    $crate::runtime::on_update::<$controller>(&resource, &old, &new)
                }

                fn on_delete(
                    resource: $crate::bindings::kubewasm::controller::types::Gvk,
                    object: ::std::string::String,
                    final_state_unknown: bool,
                ) -> ::std::result::Result<(), ::std::string::String> {
                    $crate::runtime::on_delete::<$controller>(
                        &resource,
                        &object,
                        final_state_unknown,
                    )
                }
            }

    $crate::bindings::export!(KubewasmGuest with_types_in $crate::bindings);
        };
    };
}
