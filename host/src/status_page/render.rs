//! The status page's HTML: one self-contained document per page (inline CSS and SVG, no
//! script, no outside asset), refreshing itself. Every string reaches the page through maud's
//! escaping: declared names, errors, log lines and webhooks are guest text.

use std::fmt::Write as _;

use jiff::Timestamp;
use maud::{DOCTYPE, Markup, html};

use super::history::{Point, SAMPLE_EVERY, SAMPLES};
use super::logs::Line;
use super::rank::Condition;
use super::row::{Row, Summary};
use super::snapshot::{PluginView, Snapshot};

/// The longest error a row of the overview shows; the plugin's page has all of it.
const OVERVIEW_ERROR_BYTES: usize = 240;

/// How often a page reloads itself, in seconds.
const REFRESH_SECONDS: u64 = 5;

const STYLE: &str = "
body{font:14px/1.4 system-ui,sans-serif;margin:1em 2em;color:#222}
h1{font-size:20px;margin:0 0 .3em}h2{font-size:16px;margin:1.2em 0 .4em}
table{border-collapse:collapse;width:100%}
th,td{text-align:left;padding:3px 8px;border-bottom:1px solid #ddd;vertical-align:top}
th{background:#f4f4f4;font-weight:600}td.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
.badge{display:inline-block;padding:0 6px;border-radius:3px;font-size:12px;font-weight:600}
.failed .badge,.badge.bad{background:#c62828;color:#fff}
.restarting .badge{background:#ef6c00;color:#fff}.erroring .badge{background:#f9a825}
.stopped .badge{background:#999;color:#fff}.healthy .badge,.badge.good{background:#2e7d32;color:#fff}
tr.failed{background:#fdecea}tr.restarting{background:#fff3e0}tr.erroring{background:#fffde7}
.err{color:#b71c1c;max-width:32em;overflow-wrap:anywhere}.dim{color:#777;font-size:12px}
pre{background:#f7f7f7;padding:6px;overflow-x:auto;white-space:pre-wrap;overflow-wrap:anywhere}
.log td{font:12px/1.3 ui-monospace,monospace}.log .WARN{color:#e65100}.log .ERROR{color:#b71c1c}
svg{vertical-align:middle}#identity th,#declarations th,#history th{width:12em}
";

/// The page of every plugin and informer: `rows` already worst first.
pub fn overview(summary: &Summary, snapshot: &Snapshot, rows: &[Row]) -> Markup {
    page(
        "kubewasm status",
        html! {
            (header(summary, snapshot))
            @if !snapshot.files.is_empty() {
                h2 { "Plugin files not loaded" }
                table #files {
                    tr { th { "Plugin" } th { "File" } th { "Why" } }
                    @for file in &snapshot.files {
                        tr.failed data-key=(file.key) {
                            td { (file.key) } td { (file.path) } td.err { (file.error) }
                        }
                    }
                }
            }
            h2 { "Plugins (" (rows.len()) ")" span.dim { " worst first; rates over the last "
                (SAMPLES as u64 * SAMPLE_EVERY.as_secs() / 60) " minutes, sampled every "
                (SAMPLE_EVERY.as_secs()) " s" } }
            table #plugins {
                tr {
                    th { "Plugin" } th { "Contract" } th { "Condition" } th { "Last error" }
                    th { "Events/s" } th { "Reconciles/s" }
                    th title="Time in its guest calls, as a share of one core (reconciles' API waits included)" { "In calls" }
                    th { "Queue" } th { "Retries" }
                    th { "Writes refused" } th { "Memory" }
                }
                @for row in rows { (plugin_row(summary.now, row)) }
            }
            h2 { "Informers (" (snapshot.informers.len()) ")" }
            table #informers {
                tr {
                    th { "Resource" } th { "Namespace" } th { "Selector" } th { "Synced" }
                    th { "Objects" } th { "Relists" } th { "Watch restarts" }
                    th { "Dead connections" }
                }
                @for i in &snapshot.informers {
                    tr data-resource=(i.resource) {
                        td { (i.resource) }
                        td { @if i.namespace.is_empty() { span.dim { "all" } } @else { (i.namespace) } }
                        td { (i.selector) }
                        td { @if i.synced { span.badge.good { "synced" } } @else { span.badge.bad { "not synced" } } }
                        td.n { (i.objects) } td.n { (i.relists) } td.n { (i.watch_restarts) }
                        td.n { (i.dead_connections) }
                    }
                }
            }
            (footer(summary))
        },
    )
}

/// One plugin's page: what it is, its state and counters, its declarations and recent lines.
pub fn plugin(summary: &Summary, snapshot: &Snapshot, row: &Row, lines: &[Line]) -> Markup {
    let p = &row.view;
    page(
        &format!("{} - kubewasm", p.key),
        html! {
            (header(summary, snapshot))
            p { a href="/" { "All plugins" } }
            h2 #plugin data-key=(p.key) data-condition=(row.condition.as_str()) class=(row.condition.as_str()) {
                (p.key) " " span.badge { (row.condition.as_str()) }
            }
            table #identity {
                tr { th { "Key (file name)" } td { (p.key) } }
                tr { th { "File" } td { (p.file) } }
                tr { th { "Declared name" } td { (p.name) } }
                tr { th { "Contract" } td { (p.contract) } }
                tr { th { "Content" } td { code { (p.content_hash) } } }
                tr { th { "State" } td { (format!("{:?}", p.state).to_lowercase())
                    @if let Some(track) = &row.track { span.dim { " (" (row.condition.as_str()) " since " (time(track.since)) ", " (ago(summary.now, track.since)) ")" } }
                    @if !p.replay_done { span.dim { "; replay of the cache in progress" } } } }
                tr { th { "Last error" } td.err { (last_error(summary.now, row, usize::MAX)) } }
                tr { th { "Events" } td { (p.events) " handled, " (p.handler_errors) " errors" } }
                tr { th { "Reconciles" } td { (p.reconciles) ", " (p.reconcile_errors) " errors" } }
                tr { th { "Faults" } td { (p.faults) " (traps, timeouts, memory), " (p.restarts) " restarts" } }
                tr { th { "Queue" } td { (queue(p)) } }
                tr { th { "Retries" } td { (p.retries) } }
                tr { th { "Writes refused" } td { (p.writes_refused) } }
                tr { th { "In calls" } td { (format!("{:.1}", p.call_seconds)) " s since it loaded (reconciles' API waits included)" } }
                tr { th { "Memory" } td { (bytes(p.memory_bytes)) } }
            }
            @if let Some(track) = &row.track {
                h2 { "Last " (SAMPLES as u64 * SAMPLE_EVERY.as_secs() / 60) " minutes" }
                table #history {
                    tr { th { "Events/s" } td { (sparkline(&track.points, |p| p.events, 360, 40)) } }
                    tr { th { "Reconciles/s" } td { (sparkline(&track.points, |p| p.reconciles, 360, 40)) } }
                    tr { th { "Errors/s" } td { (sparkline(&track.points, |p| p.errors, 360, 40)) } }
                    tr { th { "In calls (ms/s)" } td { (sparkline(&track.points, |p| p.busy_ms, 360, 40)) } }
                }
            }
            h2 { "Declarations" }
            table #declarations {
                tr { th { "Subscriptions" } td { (list(&p.subscriptions)) } }
                tr { th { "May read" } td { (list(&p.reads)) } }
                tr { th { "May write" } td { (list(&p.writes)) } }
                @if let Some(webhooks) = &p.webhooks {
                    tr { th { "Webhooks" } td { pre { (webhooks) } } }
                }
            }
            h2 { "Recent log lines (" (lines.len()) ")" }
            @if lines.is_empty() {
                p.dim { "None kept: it logged nothing the log filter let through since the host started." }
            } @else {
                table.log #log {
                    tr { th { "Time" } th { "Level" } th { "From" } th { "Line" } }
                    @for line in lines.iter().rev() {
                        tr {
                            td { (time(line.at)) }
                            td class=(line.level.as_str()) { (line.level.as_str()) }
                            td { @if line.guest { "guest" } @else { "host" } }
                            td { (line.text) }
                        }
                    }
                }
            }
            (footer(summary))
        },
    )
}

/// The page for a key no plugin has.
pub fn not_found(summary: &Summary, snapshot: &Snapshot, key: &str) -> Markup {
    page(
        "not found - kubewasm",
        html! {
            (header(summary, snapshot))
            p { "No plugin is loaded with key " code { (key) } ". " a href="/" { "All plugins" } }
        },
    )
}

/// The overview as plain text, for `curl` (one plugin per line, worst first).
pub fn text(summary: &Summary, snapshot: &Snapshot, rows: &[Row]) -> String {
    let mut out = format!(
        "kubewasm {} {}; {}\n",
        summary.version,
        role(snapshot),
        match &snapshot.ready {
            Ok(()) => "ready".to_owned(),
            Err(why) => format!("not ready: {why}"),
        }
    );
    for file in &snapshot.files {
        let _ = writeln!(out, "{}: not loaded: {}", file.key, file.error);
    }
    for row in rows {
        let p = &row.view;
        let _ = writeln!(
            out,
            "{} {} events {} reconciles {} queue {} memory {}{}",
            p.key,
            row.condition.as_str(),
            p.events,
            p.reconciles,
            p.queue_depth,
            bytes(p.memory_bytes),
            p.last_error
                .as_deref()
                .map(|e| format!(" last error: {e}"))
                .unwrap_or_default()
        );
    }
    out.push_str(
        "open / in a browser for the status page; /plugins (JSON), /metrics, /readyz, /healthz\n",
    );
    out
}

fn page(title: &str, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta http-equiv="refresh" content=(REFRESH_SECONDS);
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) }
                style { (STYLE) }
            }
            body { (body) }
        }
    }
}

fn role(snapshot: &Snapshot) -> &'static str {
    match (&snapshot.leader.election, snapshot.leader.leader) {
        (false, _) => "leader (no election)",
        (true, true) => "leader",
        (true, false) => "standby",
    }
}

fn header(summary: &Summary, snapshot: &Snapshot) -> Markup {
    let leader = &snapshot.leader;
    html! {
        h1 { "kubewasm " (summary.version) " "
            @if leader.leader { span.badge.good #role { (role(snapshot)) } }
            @else { span.badge.bad #role { (role(snapshot)) } }
            " "
            @match &snapshot.ready {
                Ok(()) => span.badge.good #ready { "ready" },
                Err(_) => span.badge.bad #ready { "not ready" },
            }
        }
        @if let Err(why) = &snapshot.ready { p.err { "not ready: " (why) } }
        p.dim {
            @if leader.election {
                "lease " (leader.lease) ", identity " (leader.identity)
                @if leader.shards > 1 {
                    ", shards led " (leader.led_shards.len()) " of " (leader.shards)
                }
                "; "
            }
            "up since " (time(summary.started)) " (" (ago(summary.now, summary.started))
            "); page made " (time(summary.now)) ", reloads every " (REFRESH_SECONDS) " s"
        }
    }
}

fn footer(summary: &Summary) -> Markup {
    html! {
        p.dim {
            "History kept: " (bytes(summary.history_bytes as u64)) ". Machine-readable: "
            a href="/plugins" { "/plugins" } ", " a href="/metrics" { "/metrics" } ", "
            a href="/readyz" { "/readyz" } "."
        }
    }
}

fn plugin_row(now: Timestamp, row: &Row) -> Markup {
    let p = &row.view;
    let condition = row.condition.as_str();
    let points = row.track.as_ref().map_or(&[][..], |t| &t.points[..]);
    html! {
        tr class={ "plugin " (condition) } data-key=(p.key) data-condition=(condition) {
            td {
                a href=(plugin_href(&p.key)) { (p.key) }
                @if p.name != p.key { br; span.dim { "declares " (p.name) } }
            }
            td.dim { (p.contract.trim_start_matches("kubewasm:controller@").replace(", world", "")) }
            td {
                span.badge { (condition) }
                @if let Some(track) = &row.track {
                    @if row.condition != Condition::Healthy {
                        br; span.dim { "since " (ago(now, track.since)) }
                    }
                }
            }
            td.err { (last_error(now, row, OVERVIEW_ERROR_BYTES)) }
            td.n { (rate(points.last().map(|p| p.events))) " " (sparkline(points, |p| p.events, 100, 20)) }
            td.n { (rate(points.last().map(|p| p.reconciles))) " " (sparkline(points, |p| p.reconciles, 100, 20)) }
            td.n { (busy(points.last().map(|p| p.busy_ms))) " " (sparkline(points, |p| p.busy_ms, 60, 20)) }
            td.n { (queue(p)) }
            td.n { (p.retries) }
            td.n { (p.writes_refused) }
            td.n { (bytes(p.memory_bytes)) }
        }
    }
}

/// The path of `key`'s page, every byte but unreserved ones percent-encoded.
fn plugin_href(key: &str) -> String {
    const KEEP: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
        .remove(b'-')
        .remove(b'_')
        .remove(b'.')
        .remove(b'~');
    format!(
        "/plugin/{}",
        percent_encoding::utf8_percent_encode(key, KEEP)
    )
}

/// The last error and when; cut at `limit` bytes (the overview's rows stay short).
fn last_error(now: Timestamp, row: &Row, limit: usize) -> Markup {
    let at = row.track.as_ref().and_then(|t| t.last_error_at);
    html! {
        @if let Some(error) = &row.view.last_error {
            @if error.len() > limit {
                (error[..error.floor_char_boundary(limit)]) "…"
            } @else {
                (error)
            }
            @if let Some(at) = at { br; span.dim { (time(at)) ", " (ago(now, at)) } }
        }
    }
}

fn queue(p: &PluginView) -> Markup {
    html! {
        (p.queue_depth)
        @if let Some(q) = &p.workqueue {
            @if q.waiting > 0 || q.processing > 0 {
                span.dim { " (" (q.waiting) " waiting, " (q.processing) " in progress)" }
            }
            @if let Some(oldest) = q.oldest_ready {
                span.dim { " oldest " (format!("{:.1}", oldest.as_secs_f64())) " s" }
            }
        }
    }
}

fn list(items: &[String]) -> Markup {
    html! {
        @if items.is_empty() { span.dim { "none" } }
        @for (i, item) in items.iter().enumerate() {
            @if i > 0 { br; }
            (item)
        }
    }
}

/// An inline SVG line of `value` over `points` (per sample, drawn per second), scaled to its
/// own maximum, which its title names.
fn sparkline(points: &[Point], value: fn(&Point) -> u32, width: u32, height: u32) -> Markup {
    let max = points.iter().map(value).max().unwrap_or(0).max(1);
    let step = f64::from(width) / (SAMPLES - 1) as f64;
    let offset = SAMPLES - points.len();
    let mut line = String::new();
    for (i, point) in points.iter().enumerate() {
        let x = (offset + i) as f64 * step;
        let y = f64::from(height - 1)
            - f64::from(value(point)) / f64::from(max) * f64::from(height - 2);
        let _ = write!(line, "{x:.1},{y:.1} ");
    }
    let peak = f64::from(max) / SAMPLE_EVERY.as_secs_f64();
    html! {
        svg.spark width=(width) height=(height) viewBox={ "0 0 " (width) " " (height) } role="img" {
            title { "peak " (format!("{peak:.1}")) "/s" }
            rect width=(width) height=(height) fill="#f4f6fa" {}
            polyline points=(line.trim_end()) fill="none" stroke="#1565c0" stroke-width="1.5" {}
        }
    }
}

fn rate(count: Option<u32>) -> String {
    count.map_or_else(
        || "-".to_owned(),
        |c| format!("{:.1}", f64::from(c) / SAMPLE_EVERY.as_secs_f64()),
    )
}

/// Milliseconds in calls over one sample, as a share of one core.
fn busy(ms: Option<u32>) -> String {
    ms.map_or_else(
        || "-".to_owned(),
        |ms| format!("{:.1}%", f64::from(ms) / SAMPLE_EVERY.as_secs_f64() / 10.0),
    )
}

fn time(at: Timestamp) -> String {
    Timestamp::from_second(at.as_second())
        .unwrap_or(at)
        .to_string()
}

fn ago(now: Timestamp, then: Timestamp) -> String {
    let seconds = now.as_second().saturating_sub(then.as_second()).max(0);
    match seconds {
        0..60 => format!("{seconds} s ago"),
        60..3600 => format!("{} min ago", seconds / 60),
        3600..86400 => format!("{} h {} min ago", seconds / 3600, seconds % 3600 / 60),
        _ => format!("{} days ago", seconds / 86400),
    }
}

fn bytes(n: u64) -> String {
    const KIB: f64 = 1024.0;
    let n = n as f64;
    if n >= KIB * KIB {
        format!("{:.1} MiB", n / KIB / KIB)
    } else if n >= KIB {
        format!("{:.1} KiB", n / KIB)
    } else {
        format!("{n} B")
    }
}
