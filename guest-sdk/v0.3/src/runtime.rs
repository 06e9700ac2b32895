//! The glue [`export_policy!`](crate::export_policy) expands to: the policy's state between
//! calls, and the contract's calls turned into the [`Policy`] trait's.

use std::any::Any;
use std::cell::RefCell;

use crate::{
    AdmissionInfo, AdmissionRequest, Error, Mutation, PluginInfo, Policy, Review, Verdict,
};

thread_local! {
    /// The instance's policy, set by `init`.
    static POLICY: RefCell<Option<Box<dyn Any>>> = const { RefCell::new(None) };
}

pub fn init<P: Policy>(config: &str) -> Result<PluginInfo, String> {
    let (policy, info) = P::init(config).map_err(|e| e.0)?;
    POLICY.with(|p| *p.borrow_mut() = Some(Box::new(policy)));
    Ok(info)
}

/// Runs `f` on the policy; an error if `init` has not run.
fn with<P: Policy, R>(f: impl FnOnce(&mut P) -> Result<R, Error>) -> Result<R, String> {
    POLICY.with(|p| {
        let mut slot = p.borrow_mut();
        let policy = slot
            .as_mut()
            .and_then(|p| p.downcast_mut::<P>())
            .ok_or_else(|| "called before init".to_owned())?;
        f(policy).map_err(|e| e.0)
    })
}

pub fn declare<P: Policy>() -> Result<AdmissionInfo, String> {
    with::<P, _>(|p| p.webhooks())
}

pub fn validate<P: Policy>(request: AdmissionRequest) -> Result<Verdict, String> {
    let review = Review::from_request(request).map_err(|e| e.0)?;
    with::<P, _>(|p| p.validate(&review))
}

pub fn mutate<P: Policy>(request: AdmissionRequest) -> Result<Mutation, String> {
    let review = Review::from_request(request).map_err(|e| e.0)?;
    with::<P, _>(|p| p.mutate(&review))
}

/// Exports a [`Policy`] as the component's `plugin` and `admission` exports (world
/// `admission-policy` of contract 0.3). Use it once, in the guest crate (a `cdylib`).
#[macro_export]
macro_rules! export_policy {
    ($policy:ty) => {
        const _: () = {
            struct KubewasmGuest;

            impl $crate::bindings::exports::kubewasm::controller0_2_0::plugin::Guest
                for KubewasmGuest
            {
                fn init(
                    config: ::std::string::String,
                ) -> ::std::result::Result<$crate::PluginInfo, ::std::string::String> {
                    $crate::runtime::init::<$policy>(&config)
                }
            }

            impl $crate::bindings::exports::kubewasm::controller0_3_0::admission::Guest
                for KubewasmGuest
            {
                fn declare()
                -> ::std::result::Result<$crate::AdmissionInfo, ::std::string::String> {
                    $crate::runtime::declare::<$policy>()
                }

                fn validate(
                    request: $crate::AdmissionRequest,
                ) -> ::std::result::Result<$crate::Verdict, ::std::string::String> {
                    $crate::runtime::validate::<$policy>(request)
                }

                fn mutate(
                    request: $crate::AdmissionRequest,
                ) -> ::std::result::Result<$crate::Mutation, ::std::string::String> {
                    $crate::runtime::mutate::<$policy>(request)
                }
            }

            $crate::bindings::export!(KubewasmGuest with_types_in $crate::bindings);
        };
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::review::tests::request;
    use crate::{Patch, Rule, Webhook};

    /// Denies ConfigMaps whose data has key `deny`, marks the others.
    struct Marker {
        mark: String,
    }

    impl Policy for Marker {
        fn init(config: &str) -> Result<(Self, PluginInfo), Error> {
            let info = PluginInfo {
                name: "marker".into(),
                subscriptions: Vec::new(),
                indexes: Vec::new(),
            };
            Ok((
                Marker {
                    mark: config.to_owned(),
                },
                info,
            ))
        }

        fn webhooks(&self) -> Result<AdmissionInfo, Error> {
            Ok(AdmissionInfo {
                validating: Some(Webhook::new([Rule::of::<
                    k8s_openapi::api::core::v1::ConfigMap,
                >()])),
                mutating: None,
            })
        }

        fn validate(&mut self, review: &Review) -> Result<Verdict, Error> {
            let denied = review
                .object
                .as_ref()
                .is_some_and(|o| !o["data"]["deny"].is_null());
            Ok(if denied {
                Verdict::deny("denied").with_code(422)
            } else {
                Verdict::allow()
            })
        }

        fn mutate(&mut self, review: &Review) -> Result<Mutation, Error> {
            review.patched(
                &Patch::new().set(&["metadata", "annotations", "mark"], self.mark.as_str()),
            )
        }
    }

    /// Never initialised: its calls must fail, not reach it.
    struct Idle;

    impl Policy for Idle {
        fn init(_config: &str) -> Result<(Self, PluginInfo), Error> {
            Err(Error("refused".into()))
        }

        fn webhooks(&self) -> Result<AdmissionInfo, Error> {
            unreachable!("declare before init must not reach the policy")
        }
    }

    #[test]
    fn calls_reach_the_policy_init_made_with_its_review() {
        init::<Marker>("m1").unwrap();
        assert!(declare::<Marker>().unwrap().validating.is_some());
        let denied = validate::<Marker>(request(Some(r#"{"data":{"deny":"1"}}"#))).unwrap();
        assert!(!denied.allowed && denied.code == 422);
        assert!(
            validate::<Marker>(request(Some(r#"{"data":{}}"#)))
                .unwrap()
                .allowed
        );
        let marked = mutate::<Marker>(request(Some("{}"))).unwrap();
        assert_eq!(
            marked.object.as_deref(),
            Some(r#"{"metadata":{"annotations":{"mark":"m1"}}}"#)
        );
    }

    #[test]
    fn a_bad_object_or_a_call_before_init_answers_err() {
        init::<Marker>("").unwrap();
        let err = validate::<Marker>(request(Some("[]"))).unwrap_err();
        assert!(err.contains("not a JSON object"), "{err}");
        assert_eq!(init::<Idle>("").unwrap_err(), "refused");
        assert_eq!(declare::<Idle>().unwrap_err(), "called before init");
    }

    #[test]
    fn the_default_handlers_say_the_webhook_is_not_declared() {
        struct Quiet;
        impl Policy for Quiet {
            fn init(_config: &str) -> Result<(Self, PluginInfo), Error> {
                Ok((
                    Quiet,
                    PluginInfo {
                        name: "quiet".into(),
                        subscriptions: Vec::new(),
                        indexes: Vec::new(),
                    },
                ))
            }
            fn webhooks(&self) -> Result<AdmissionInfo, Error> {
                Ok(AdmissionInfo {
                    validating: None,
                    mutating: None,
                })
            }
        }
        init::<Quiet>("").unwrap();
        let err = validate::<Quiet>(request(Some("{}"))).unwrap_err();
        assert!(err.contains("no validating webhook"), "{err}");
        let err = mutate::<Quiet>(request(Some("{}"))).unwrap_err();
        assert!(err.contains("no mutating webhook"), "{err}");
    }
}
