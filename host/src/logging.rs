//! The process's log: text or JSON on stderr, colour only on a terminal, and kube's client's
//! per-attempt HTTP failures logged for what they are. Each line about a plugin is also kept
//! for its status page ([`RecentLogs`]).
//!
//! kube's client logs every failed HTTP attempt at ERROR (target `kube_client::client::builder`),
//! even the 503 and 504 answers its own retry layer then retries, often successfully. Those
//! become one WARN per status and minute ([`KubeFailures`]). kube's line for any other failure
//! is dropped: whoever made the request reports the error it finally gets (the reflector logs
//! "list/watch failed" at WARN and retries with backoff), so it is logged once, not twice.

use std::collections::HashMap;
use std::io::IsTerminal as _;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use parking_lot::Mutex;
use tracing::callsite::{Callsite, Identifier};
use tracing::field::{FieldSet, Value};
use tracing::metadata::Kind;
use tracing::subscriber::Interest;
use tracing::{Event, Level, Metadata, Subscriber};
use tracing_subscriber::Layer;
use tracing_subscriber::filter::EnvFilter;
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::layer::{Context, SubscriberExt as _};
use tracing_subscriber::registry::LookupSpan;

use crate::status_page::RecentLogs;

/// Where kube's client logs each failed HTTP attempt (and the host's client, built in
/// [`crate::api_client`], logs its own the same way).
pub(crate) const KUBE_HTTP_TARGET: &str = "kube_client::client::builder";

/// The target of the warnings [`KubeFailures`] writes in place of kube's lines.
pub const API_TARGET: &str = "kubewasm::api";

/// How long a retried status is logged only once.
const REPEAT_WINDOW: Duration = Duration::from_secs(60);

/// How log lines are written: text for people, JSON for a log pipeline (`--log-format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// Installs the process-wide log: `filter` in `RUST_LOG` syntax, to stderr, with ANSI colour
/// only when stderr is a terminal (not in a file, a pipe or a container log).
pub fn init(format: LogFormat, filter: &str) -> anyhow::Result<()> {
    let ansi = std::io::stderr().is_terminal();
    tracing::subscriber::set_global_default(subscriber(format, filter, std::io::stderr, ansi)?)
        .context("a global log subscriber is already set")
}

/// Installs the process-wide log as [`init`] does, but into `path` (replaced; its directory
/// created), without colour: for a command whose own output is what the user reads.
pub fn init_file(format: LogFormat, filter: &str, path: &Path) -> anyhow::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("cannot create {} for the log", dir.display()))?;
    }
    let file = std::fs::File::create(path)
        .with_context(|| format!("cannot write the log to {}", path.display()))?;
    tracing::subscriber::set_global_default(subscriber(format, filter, Arc::new(file), false)?)
        .context("a global log subscriber is already set")
}

/// The log subscriber [`init`] installs, writing to `writer` (public so tests can capture it).
pub fn subscriber<W>(
    format: LogFormat,
    filter: &str,
    writer: W,
    ansi: bool,
) -> anyhow::Result<impl Subscriber + Send + Sync + 'static>
where
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    let filter =
        EnvFilter::try_new(filter).with_context(|| format!("bad log filter `{filter}`"))?;
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(writer)
        .with_ansi(ansi);
    let fmt = match format {
        LogFormat::Text => fmt.boxed(),
        LogFormat::Json => fmt.json().boxed(),
    };
    Ok(tracing_subscriber::registry()
        .with(filter)
        .with(KubeFailures::new(fmt))
        .with(RecentLogs::global().layer()))
}

/// Wraps the layer that writes the log and rewrites kube's per-attempt ERROR lines on their way
/// to it: a status kube's client retries by itself (503, 504; kube does not log 429) becomes one
/// WARN per status per minute, saying how many more were seen; any other is dropped, since the
/// caller reports the error it finally gets. Everything else passes through untouched.
struct KubeFailures<L> {
    inner: L,
    /// Per retried status: when it was last logged at WARN, and how many were seen since.
    retried: Mutex<HashMap<u16, (Instant, u64)>>,
}

impl<L> KubeFailures<L> {
    fn new(inner: L) -> Self {
        KubeFailures {
            inner,
            retried: Mutex::default(),
        }
    }

    /// Whether the retried `status`, seen at `now`, is logged at WARN; otherwise it is counted.
    /// Returns how many times it was seen, unlogged, since the last WARN.
    fn warn_now(&self, status: u16, now: Instant) -> Option<u64> {
        let mut retried = self.retried.lock();
        match retried.get_mut(&status) {
            Some((last, unlogged)) if now.duration_since(*last) < REPEAT_WINDOW => {
                *unlogged += 1;
                None
            }
            Some((last, unlogged)) => {
                *last = now;
                Some(std::mem::take(unlogged))
            }
            None => {
                retried.insert(status, (now, 0));
                Some(0)
            }
        }
    }
}

/// The static description of the WARN line written for a retried status (events need one; this
/// one is handed straight to the writing layer, never dispatched).
struct RetriedCallsite;

static RETRIED_CALLSITE: RetriedCallsite = RetriedCallsite;

static RETRIED: Metadata<'static> = Metadata::new(
    "kube request retried",
    API_TARGET,
    Level::WARN,
    Some(file!()),
    Some(line!()),
    Some(module_path!()),
    FieldSet::new(
        &["message", "status", "repeats_unlogged"],
        Identifier(&RETRIED_CALLSITE),
    ),
    Kind::EVENT,
);

impl Callsite for RetriedCallsite {
    fn set_interest(&self, _: Interest) {}

    fn metadata(&self) -> &Metadata<'_> {
        &RETRIED
    }
}

impl<S, L> Layer<S> for KubeFailures<L>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    L: Layer<S>,
{
    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let meta = event.metadata();
        if meta.target() != KUBE_HTTP_TARGET || *meta.level() != Level::ERROR {
            return self.inner.on_event(event, ctx);
        }
        let mut message = Message::default();
        event.record(&mut message);
        let Some(status) = retried_status(&message.0) else {
            return;
        };
        let Some(unlogged) = self.warn_now(status, Instant::now()) else {
            return;
        };
        let fields = RETRIED.fields();
        let (Some(message), Some(status_field), Some(unlogged_field)) = (
            fields.field("message"),
            fields.field("status"),
            fields.field("repeats_unlogged"),
        ) else {
            return;
        };
        let text = format_args!(
            "the API server answered {status}; kube's client retries the request by itself \
             (logged once a minute per status)"
        );
        let values: [(&tracing::field::Field, Option<&dyn Value>); 3] = [
            (&message, Some(&text)),
            (&status_field, Some(&status)),
            (&unlogged_field, Some(&unlogged)),
        ];
        self.inner
            .on_event(&Event::new(&RETRIED, &fields.value_set(&values)), ctx);
    }

    fn on_register_dispatch(&self, subscriber: &tracing::Dispatch) {
        self.inner.on_register_dispatch(subscriber);
    }

    fn on_layer(&mut self, subscriber: &mut S) {
        self.inner.on_layer(subscriber);
    }

    fn register_callsite(&self, metadata: &'static Metadata<'static>) -> Interest {
        self.inner.register_callsite(metadata)
    }

    fn enabled(&self, metadata: &Metadata<'_>, ctx: Context<'_, S>) -> bool {
        self.inner.enabled(metadata, ctx)
    }

    fn on_new_span(
        &self,
        attrs: &tracing::span::Attributes<'_>,
        id: &tracing::span::Id,
        ctx: Context<'_, S>,
    ) {
        self.inner.on_new_span(attrs, id, ctx);
    }

    fn on_record(
        &self,
        span: &tracing::span::Id,
        values: &tracing::span::Record<'_>,
        ctx: Context<'_, S>,
    ) {
        self.inner.on_record(span, values, ctx);
    }

    fn on_follows_from(
        &self,
        span: &tracing::span::Id,
        follows: &tracing::span::Id,
        ctx: Context<'_, S>,
    ) {
        self.inner.on_follows_from(span, follows, ctx);
    }

    fn on_enter(&self, id: &tracing::span::Id, ctx: Context<'_, S>) {
        self.inner.on_enter(id, ctx);
    }

    fn on_exit(&self, id: &tracing::span::Id, ctx: Context<'_, S>) {
        self.inner.on_exit(id, ctx);
    }

    fn on_close(&self, id: tracing::span::Id, ctx: Context<'_, S>) {
        self.inner.on_close(id, ctx);
    }

    fn on_id_change(&self, old: &tracing::span::Id, new: &tracing::span::Id, ctx: Context<'_, S>) {
        self.inner.on_id_change(old, new, ctx);
    }
}

/// The status in kube's "failed with status 503 Service Unavailable", if kube's client retries it.
fn retried_status(message: &str) -> Option<u16> {
    let status = message
        .strip_prefix("failed with status ")?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    matches!(status, 429 | 503 | 504).then_some(status)
}

/// An event's `message` field.
#[derive(Default)]
struct Message(String);

impl tracing::field::Visit for Message {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.0 = format!("{value:?}");
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use kubewasm_devserver::Verb;

    use super::*;

    /// Everything the subscriber writes, shared with the test.
    #[derive(Clone, Default)]
    struct Buffer(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Buffer {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl<'w> MakeWriter<'w> for Buffer {
        type Writer = Buffer;
        fn make_writer(&'w self) -> Buffer {
            self.clone()
        }
    }

    impl Buffer {
        fn text(&self) -> String {
            String::from_utf8_lossy(&self.0.lock()).into_owned()
        }
    }

    #[test]
    fn only_statuses_kube_retries_are_warnings() {
        assert_eq!(
            retried_status("failed with status 503 Service Unavailable"),
            Some(503)
        );
        assert_eq!(
            retried_status("failed with status 429 Too Many Requests"),
            Some(429)
        );
        assert_eq!(
            retried_status("failed with status 500 Internal Server Error"),
            None
        );
        assert_eq!(retried_status("failed with error connection refused"), None);
    }

    /// Requests the dev server answers with 503 (then 504) a few times, which kube's client
    /// retries and then gets through, and one 500, which the caller gets: the log holds no
    /// ERROR, one WARN per retried status, and no colour codes when colour is off.
    #[tokio::test(flavor = "current_thread")]
    async fn retried_failures_are_one_warning_and_no_error() {
        let buffer = Buffer::default();
        let subscriber =
            subscriber(LogFormat::Text, "info", buffer.clone(), false).expect("subscriber");
        let _guard = tracing::subscriber::set_default(subscriber);
        let (server, client) = kubewasm_tests::devserver().await;
        let configmaps: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
            kube::Api::default_namespaced(client);

        server.fail_next(Verb::List, 3, 503);
        configmaps
            .list(&Default::default())
            .await
            .expect("kube's client retries 503 until the list goes through");
        server.fail_next(Verb::List, 2, 504);
        configmaps
            .list(&Default::default())
            .await
            .expect("kube's client retries 504 until the list goes through");
        server.fail_next(Verb::List, 1, 500);
        configmaps
            .list(&Default::default())
            .await
            .expect_err("kube's client does not retry 500");
        server.shutdown().await;

        let text = buffer.text();
        assert!(!text.contains("ERROR"), "{text}");
        assert!(
            !text.contains('\u{1b}'),
            "colour codes with colour off: {text}"
        );
        let warnings: Vec<&str> = text.lines().filter(|l| l.contains("WARN")).collect();
        assert_eq!(warnings.len(), 2, "one warning per status: {text}");
        assert!(warnings[0].contains("answered 503"), "{text}");
        assert!(warnings[1].contains("answered 504"), "{text}");
    }

    #[test]
    fn a_status_repeated_within_the_window_is_counted_not_logged() {
        let failures = KubeFailures::new(());
        let start = Instant::now();
        let later = |secs| start + Duration::from_secs(secs);
        assert_eq!(failures.warn_now(503, start), Some(0));
        assert_eq!(failures.warn_now(503, later(1)), None);
        assert_eq!(failures.warn_now(503, later(59)), None);
        assert_eq!(
            failures.warn_now(504, later(59)),
            Some(0),
            "another status is logged"
        );
        assert_eq!(
            failures.warn_now(503, later(60)),
            Some(2),
            "the window is over: the count is told"
        );
        assert_eq!(failures.warn_now(503, later(61)), None);
    }

    #[test]
    fn a_bad_filter_is_refused() {
        let err = subscriber(LogFormat::Json, "info,=[", std::io::sink, false)
            .err()
            .expect("bad filter");
        assert!(err.to_string().contains("bad log filter"), "{err:#}");
    }
}
