//! Admission: policies of contract 0.3 answer the API server's validating and mutating
//! webhooks from the shared cache, on the same instance model as controllers. [`declaration`]
//! is what a policy declares, `grants` whether its rules stay inside its plugin's grants,
//! [`review`] the AdmissionReview request and response, [`policy`] the pool of instances that
//! answers, and [`registry`] the policies being served, which the host's webhook server reads.

pub mod declaration;
pub(crate) mod grants;
pub mod policy;
pub mod registry;
pub mod review;
