//! Declarative plugin tests (`kubewasm test`): a scenario file names objects to start from and
//! steps, each an action on the embedded API server followed by asserts polled until they hold
//! or the step's timeout passes. Objects are matched partially, as kuttl and Chainsaw assert.
//!
//! ```yaml
//! name: the mirror copies ConfigMaps
//! objects:                      # created before the plugins load
//!   - {apiVersion: v1, kind: ConfigMap, metadata: {name: app, namespace: default}, data: {k: v}}
//! steps:
//!   - name: the copy appears
//!     assert:
//!       exist:
//!         - {apiVersion: v1, kind: ConfigMap, metadata: {name: app-mirror, namespace: default}, data: {k: v}}
//!       count: [{object: {apiVersion: v1, kind: ConfigMap, metadata: {namespace: default}}, exactly: 2}]
//!       converged: true
//!   - name: a change reaches the copy
//!     patch: {object: {apiVersion: v1, kind: ConfigMap, metadata: {name: app}}, patch: {data: {k: w}}}
//!     assert:
//!       exist:   # operators: $any, $absent, $changed (since the step began), $matches, $count
//!         - {apiVersion: v1, kind: ConfigMap, metadata: {name: app-mirror}, data: {k: {$changed: true}}}
//!   - name: a conflict on update is retried
//!     fault: {verb: update, code: 409}
//!     patch: ...
//!   - name: the policy refuses a taken host
//!     apply: [{apiVersion: networking.k8s.io/v1, kind: Ingress, ...}]
//!     expect: {denied: "is already used", code: 409}
//! ```
//!
//! An action's writes are accepted, or the step fails with the API server's message; a write
//! an admission webhook denies is tried again until the step's timeout first (a policy that
//! answers from its cache may not have seen the previous step's writes yet). `expect:
//! {denied: TEXT, code: N}` turns that around: every write of the action must be refused, with
//! a message containing TEXT (and status N). When a loaded plugin declares admission webhooks
//! (contract 0.3), the run serves them on loopback and stores their webhook configurations in
//! the embedded API server before the first step, so its admission chain calls them as a
//! cluster's would; a mutation is asserted with `exist`.

mod format;
mod junit;
mod matcher;
mod runner;

pub use format::{
    Assert, Bounds, Expect, Fault, LoggedLineAssert, ObjectCount, PatchAction, PatchType, Scenario,
    ScenarioError, Step, WriteCount, parse_duration,
};
pub use junit::junit_xml;
pub use matcher::{Mismatch, matches};
pub use runner::{Outcome, Progress, RunOptions, SLOW_LOAD, StepResult, run};
