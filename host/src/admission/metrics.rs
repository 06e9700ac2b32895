//! The webhook server's metrics: reviews by plugin, webhook and result, policy failures by
//! reason, the time each review took in the host, and requests refused before any policy saw
//! them. Registered in the host's registry under the `kubewasm_` prefix.

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReviewLabels {
    plugin: String,
    webhook: String,
    /// `allowed`, `denied`, or `failed` (the failure policy answered).
    result: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FailureLabels {
    plugin: String,
    webhook: String,
    reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct WebhookLabels {
    plugin: String,
    webhook: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RefusedLabels {
    reason: String,
}

/// What the webhook server counts. Cheap to clone.
#[derive(Clone, Debug)]
pub struct AdmissionMetrics {
    reviews: Family<ReviewLabels, Counter>,
    failures: Family<FailureLabels, Counter>,
    seconds: Family<WebhookLabels, Histogram>,
    refused: Family<RefusedLabels, Counter>,
}

impl Default for AdmissionMetrics {
    fn default() -> Self {
        AdmissionMetrics {
            reviews: Family::default(),
            failures: Family::default(),
            seconds: Family::new_with_constructor(|| {
                Histogram::new(exponential_buckets(0.000_025, 2.0, 16))
            }),
            refused: Family::default(),
        }
    }
}

impl AdmissionMetrics {
    /// Adds the families to `registry`.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "admission_reviews",
            "AdmissionReviews answered, by plugin, webhook (validating, mutating) and result \
             (allowed, denied, failed: the policy failed and its failure policy answered)",
            self.reviews.clone(),
        );
        registry.register(
            "admission_policy_failures",
            "Reviews a policy did not answer, by reason (trap, timeout, memory, error, garbage, \
             unavailable)",
            self.failures.clone(),
        );
        registry.register(
            "admission_review_duration_seconds",
            "Time from a review's body read to its answer, in the host",
            self.seconds.clone(),
        );
        registry.register(
            "admission_requests_refused",
            "Webhook requests answered with an HTTP error before any policy saw them, by \
             reason (malformed, unknown-plugin, too-large)",
            self.refused.clone(),
        );
    }

    /// Counts one review answered.
    pub fn reviewed(&self, plugin: &str, webhook: &str, result: &str, took: Duration) {
        self.reviews
            .get_or_create(&ReviewLabels {
                plugin: plugin.to_owned(),
                webhook: webhook.to_owned(),
                result: result.to_owned(),
            })
            .inc();
        self.seconds
            .get_or_create(&WebhookLabels {
                plugin: plugin.to_owned(),
                webhook: webhook.to_owned(),
            })
            .observe(took.as_secs_f64());
    }

    /// Counts one review the policy failed.
    pub fn failed(&self, plugin: &str, webhook: &str, reason: &str) {
        self.failures
            .get_or_create(&FailureLabels {
                plugin: plugin.to_owned(),
                webhook: webhook.to_owned(),
                reason: reason.to_owned(),
            })
            .inc();
    }

    /// Counts one request refused before review.
    pub fn refused(&self, reason: &str) {
        self.refused
            .get_or_create(&RefusedLabels {
                reason: reason.to_owned(),
            })
            .inc();
    }
}
