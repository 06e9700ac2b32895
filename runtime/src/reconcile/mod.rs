//! Reconciling: the workqueue a 0.2 plugin's keys wait in, which keys an event queues and on
//! which updates, and the workers that call `reconcile`.

pub(crate) mod context;
pub(crate) mod keys;
pub(crate) mod predicates;
pub(crate) mod rate_limit;
pub(crate) mod reconciler;
pub(crate) mod workqueue;
