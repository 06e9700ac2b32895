//! The status page in a real browser, and the operations files in `deploy/` against what a
//! running host exports.
//!
//! `kubewasm dev` runs the example plugins as `cargo xtask dev` does, plus `hostile.wasm` (the
//! probe) whose declared name and one log line carry markup that would change the page if it
//! ran. Headless Chromium (Debian's `chromium`, installed by `cargo xtask test`) loads the
//! pages and the test reads the DOM it rendered (`--dump-dom`). Without Chromium the browser
//! test fails saying so; `cargo xtask test` leaves it out then, and says it did.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use kubewasm_tests::{free_port, http_get};

use crate::fixture::{Host, example_plugins, shared_compile_cache, wait_until_ready};

/// Where Debian's `chromium` package puts the browser.
const CHROMIUM: &str = "/usr/bin/chromium";

/// Markup that marks the page if a browser ever ran it.
const HOSTILE: &str = "<script>document.body.setAttribute('data-owned','1')</script>\
    <img src=x onerror=\"document.body.setAttribute('data-owned','1')\">";

/// What a browser would have done had it run [`HOSTILE`].
const OWNED: &str = "data-owned=\"1\"";

/// Bounds every wait; nothing here is timed.
const PATIENCE: Duration = Duration::from_secs(120);

/// The DOM Chromium renders for `url`.
fn rendered(url: &str) -> String {
    assert!(
        Path::new(CHROMIUM).exists(),
        "{CHROMIUM} is missing: install Debian's chromium (`cargo xtask test` does, as root)"
    );
    let output = Command::new(CHROMIUM)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--dump-dom",
            url,
        ])
        .stderr(Stdio::null())
        .output()
        .expect("chromium runs");
    assert!(output.status.success(), "chromium failed on {url}");
    String::from_utf8(output.stdout).expect("a UTF-8 DOM")
}

/// The `data-key`s of the rows of the table with id `table`, in the order shown.
fn row_keys(dom: &str, table: &str) -> Vec<String> {
    let Some((_, rest)) = dom.split_once(&format!("id=\"{table}\"")) else {
        return Vec::new();
    };
    let table = rest.split("</table>").next().unwrap_or_default();
    table
        .split("data-key=\"")
        .skip(1)
        .filter_map(|rest| Some(rest[..rest.find('"')?].to_owned()))
        .collect()
}

/// The `data-condition` of the row of `key` in the plugins table.
fn condition(dom: &str, key: &str) -> Option<String> {
    let row = dom.split(&format!("data-key=\"{key}\"")).nth(1)?;
    let value = row.split("data-condition=\"").nth(1)?;
    Some(value[..value.find('"')?].to_owned())
}

/// A running `kubewasm dev` with the example plugins and the hostile probe.
struct Running {
    _work: tempfile::TempDir,
    work: std::path::PathBuf,
    _host: Host,
    port: u16,
    keys: Vec<String>,
}

impl Running {
    /// Starts the host with `args` added to `kubewasm dev`'s, and waits until it is ready.
    fn start(args: &[&str]) -> Running {
        let work = tempfile::tempdir().expect("work dir");
        let dir = work.path().to_owned();
        let plugins = dir.join("plugins");
        std::fs::create_dir(&plugins).expect("plugins dir");
        let mut keys: Vec<String> = example_plugins(&plugins)
            .iter()
            .map(|n| n.trim_end_matches(".wasm").to_owned())
            .collect();
        kubewasm_tests::write_settled(
            &plugins.join("hostile.wasm"),
            &kubewasm_tests::guest_bytes("probe"),
        );
        keys.push("hostile".into());
        let probe = serde_json::json!({
            "name": HOSTILE,
            "subscriptions": [{"version": "v1", "kind": "ConfigMap"}],
            "mode": "trap",
            "trigger": "trigger",
        });
        let examples = std::fs::read_to_string(
            kubewasm_tests::workspace_root().join("examples/kubewasm-dev.toml"),
        )
        .expect("the examples' config");
        let config = dir.join("kubewasm.toml");
        std::fs::write(
            &config,
            format!(
                "{examples}\n[plugins.hostile]\nconfig = {}\n",
                toml_string(&probe.to_string())
            ),
        )
        .expect("config");
        let port = free_port();
        let log = dir.join("host.log");
        let cache = shared_compile_cache().expect("the shared compile cache");
        let child = kubewasm_tests::dev_host_command_with_config(
            Path::new(env!("CARGO_BIN_EXE_kubewasm")),
            &plugins,
            &dir,
            &cache,
            port,
            &config,
        )
        .args(args)
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).expect("log file"))
        .spawn()
        .expect("start kubewasm dev");
        let mut host = Host(child);
        wait_until_ready(&mut host, port, &log);
        Running {
            _work: work,
            work: dir,
            _host: host,
            port,
            keys,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.work.join("host.log")).unwrap_or_default()
    }

    /// `kubectl apply` of `manifest` (JSON) against the host's dev server.
    fn apply(&self, manifest: &serde_json::Value) {
        let file = self.work.join("manifest.json");
        std::fs::write(&file, manifest.to_string()).expect("manifest");
        let output = Command::new(kubewasm_tests::kubectl_binary())
            .arg("--kubeconfig")
            .arg(self.work.join("kubeconfig"))
            .arg("apply")
            .arg("-f")
            .arg(&file)
            .output()
            .expect("kubectl runs");
        assert!(
            output.status.success(),
            "kubectl apply: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }

    /// The plugin `key` in `/plugins`.
    fn status(&self, key: &str) -> serde_json::Value {
        let (_, body) = http_get(self.port, "/plugins").expect("/plugins answers");
        let listing: serde_json::Value = serde_json::from_str(&body).expect("JSON");
        listing["plugins"]
            .as_array()
            .and_then(|all| all.iter().find(|p| p["plugin"] == key).cloned())
            .unwrap_or_default()
    }

    /// Waits until `check` holds of the plugin `key`'s status.
    fn wait_for(&self, key: &str, what: &str, check: impl Fn(&serde_json::Value) -> bool) {
        let deadline = Instant::now() + PATIENCE;
        while !check(&self.status(key)) {
            assert!(
                Instant::now() < deadline,
                "{key} never {what}: {}; the host's log:\n{}",
                self.status(key),
                self.log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// `text` as a TOML basic string.
fn toml_string(text: &str) -> String {
    serde_json::Value::String(text.to_owned()).to_string()
}

#[test]
fn the_status_page_in_a_browser_shows_every_plugin_and_the_failing_one_first() {
    let running = Running::start(&[]);

    let dom = rendered(&running.url("/"));
    let shown: BTreeSet<String> = row_keys(&dom, "plugins").into_iter().collect();
    let loaded: BTreeSet<String> = running.keys.iter().cloned().collect();
    assert_eq!(shown, loaded, "every plugin has a row: {dom}");
    assert!(dom.contains("id=\"informers\""), "{dom}");
    assert!(dom.contains(">ready<"), "{dom}");
    assert!(
        dom.contains("&lt;script&gt;document.body.setAttribute"),
        "the declared name is shown as text: {dom}"
    );
    assert!(!dom.contains(OWNED), "the declared name ran: {dom}");

    // A log line of the guest's with markup in it, and a fault.
    running.apply(&serde_json::json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "ask", "namespace": "default", "labels": {"probe-query": "yes"}},
        "data": {"op": HOSTILE},
    }));
    running.apply(&serde_json::json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "trigger-1", "namespace": "default"},
    }));
    running.wait_for("hostile", "trapped", |s| s["traps"].as_u64() >= Some(1));

    let dom = rendered(&running.url("/"));
    let order = row_keys(&dom, "plugins");
    assert_eq!(
        order.first().map(String::as_str),
        Some("hostile"),
        "the faulted plugin comes first: {order:?}"
    );
    let worst = condition(&dom, "hostile");
    assert!(
        matches!(worst.as_deref(), Some("erroring" | "restarting" | "failed")),
        "{worst:?}: {dom}"
    );
    assert!(
        dom.contains("trap: add of v1/ConfigMap default/trigger-1"),
        "its last error: {dom}"
    );
    assert!(!dom.contains(OWNED), "{dom}");

    // Its page: the log line with the markup shown as text, and its declarations.
    running.wait_for("hostile", "recovered", |s| s["state"] == "running");
    let deadline = Instant::now() + PATIENCE;
    let page = loop {
        let page = rendered(&running.url("/plugin/hostile"));
        if page.contains("unknown op &lt;script&gt;") {
            break page;
        }
        assert!(
            Instant::now() < deadline,
            "the guest's line never shown: {page}"
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    assert!(!page.contains(OWNED), "{page}");
    assert!(!page.contains("<script"), "{page}");
    assert!(page.contains("id=\"log\""), "{page}");
    assert!(page.contains("kubewasm:controller@0.1.0"), "{page}");
    assert!(page.contains("v1/ConfigMap"), "{page}");
    let missing = rendered(&running.url("/plugin/no-such-plugin"));
    assert!(missing.contains("No plugin is loaded"), "{missing}");
}

/// The metric names a PromQL expression reads: identifiers that are not functions, keywords,
/// label names or values, durations, grouping labels or Grafana variables.
fn metric_names(expr: &str) -> BTreeSet<String> {
    const KEYWORDS: [&str; 13] = [
        "and",
        "or",
        "unless",
        "by",
        "without",
        "on",
        "ignoring",
        "group_left",
        "group_right",
        "offset",
        "bool",
        "inf",
        "nan",
    ];
    // Strings, label matchers, ranges and grouping lists go first.
    let mut plain = String::new();
    let mut depth_brace = 0;
    let mut depth_bracket = 0;
    let mut quote = None;
    for c in expr.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '"' | '\'' | '`') => quote = Some(c),
            (None, '{') => depth_brace += 1,
            (None, '}') => depth_brace -= 1,
            (None, '[') => depth_bracket += 1,
            (None, ']') => depth_bracket -= 1,
            (None, c) if depth_brace == 0 && depth_bracket == 0 => plain.push(c),
            _ => {}
        }
    }
    let mut names = BTreeSet::new();
    let mut tokens = Vec::new();
    let mut token = String::new();
    for c in plain.chars().chain(std::iter::once(' ')) {
        if c.is_ascii_alphanumeric() || c == '_' || c == ':' || c == '$' || c == '.' {
            token.push(c);
        } else {
            if !token.is_empty() {
                tokens.push(std::mem::take(&mut token));
            }
            if !c.is_whitespace() {
                tokens.push(c.to_string());
            }
        }
    }
    let mut i = 0;
    while i < tokens.len() {
        let t = &tokens[i];
        let next = tokens.get(i + 1).map(String::as_str);
        let grouping = matches!(
            t.as_str(),
            "by" | "without" | "on" | "ignoring" | "group_left" | "group_right"
        );
        if grouping && next == Some("(") {
            // Skip the label list.
            while i < tokens.len() && tokens[i] != ")" {
                i += 1;
            }
        } else if next == Some("(")
            || matches!(next, Some("by" | "without"))
            || KEYWORDS.contains(&t.as_str())
            || t.starts_with('$')
            || !t.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_' || c == ':')
        {
            // A function, a keyword, a variable or a number.
        } else {
            names.insert(t.clone());
        }
        i += 1;
    }
    names
}

/// Every series name `/metrics` exports: each family's samples as its type names them, whether
/// or not the family has a sample yet (prometheus-client writes `# TYPE` for every family
/// registered, and a counter's samples end in `_total`, a histogram's in `_bucket`, `_sum` and
/// `_count`).
fn exported(metrics: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for line in metrics.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let mut parts = rest.split_whitespace();
            let (Some(name), Some(kind)) = (parts.next(), parts.next()) else {
                continue;
            };
            match kind {
                "counter" => {
                    names.insert(format!("{name}_total"));
                }
                "histogram" => {
                    for suffix in ["_bucket", "_sum", "_count"] {
                        names.insert(format!("{name}{suffix}"));
                    }
                }
                _ => {
                    names.insert(name.to_owned());
                }
            }
        } else if !line.starts_with('#')
            && let Some(name) = line.split(['{', ' ']).next()
            && !name.is_empty()
        {
            names.insert(name.to_owned());
        }
    }
    names
}

/// Series that appear only after something this test does not provoke: the name, the file that
/// registers its family, and the family's name there (without prefix and `_total`).
const EMITTED_LATER: [(&str, &str, &str); 2] = [
    (
        "kubewasm_admission_policy_failures_total",
        "host/src/admission/metrics.rs",
        "admission_policy_failures",
    ),
    // Leader election is `kubewasm run`'s alone (`dev` refuses its flags).
    ("kubewasm_leader", "host/src/metrics.rs", "leader"),
];

/// Every PromQL expression of the dashboard (its panels' targets) and of the alert rules.
fn deploy_expressions() -> Vec<(String, String)> {
    let root = kubewasm_tests::workspace_root().join("deploy");
    let dashboard: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root.join("grafana/kubewasm-dashboard.json"))
            .expect("the dashboard"),
    )
    .expect("the dashboard is JSON");
    let mut found = Vec::new();
    let mut panels: Vec<&serde_json::Value> = dashboard["panels"]
        .as_array()
        .map(|p| p.iter().collect())
        .unwrap_or_default();
    while let Some(panel) = panels.pop() {
        if let Some(nested) = panel["panels"].as_array() {
            panels.extend(nested);
        }
        for target in panel["targets"].as_array().into_iter().flatten() {
            if let Some(expr) = target["expr"].as_str() {
                let title = panel["title"].as_str().unwrap_or_default();
                found.push((format!("panel {title}"), expr.to_owned()));
            }
        }
    }
    for variable in dashboard["templating"]["list"]
        .as_array()
        .into_iter()
        .flatten()
    {
        if let Some(query) = variable["query"]["query"]
            .as_str()
            .or(variable["query"].as_str())
            .and_then(|q| q.strip_prefix("label_values("))
            .and_then(|q| q.split_once(',').map(|(metric, _)| metric.to_owned()))
        {
            found.push(("variable".into(), query));
        }
    }
    let rules: serde_json::Value = serde_norway::from_str(
        &std::fs::read_to_string(root.join("kubernetes/kubewasm-alerts.yaml")).expect("the rules"),
    )
    .expect("the rules are YAML");
    for group in rules["spec"]["groups"].as_array().into_iter().flatten() {
        for rule in group["rules"].as_array().into_iter().flatten() {
            let alert = rule["alert"].as_str().unwrap_or_default();
            let expr = rule["expr"].as_str().expect("every rule has an expression");
            found.push((format!("alert {alert}"), expr.to_owned()));
        }
    }
    found
}

#[test]
fn names_in_promql_are_found() {
    let names = metric_names(
        "sum by (plugin) (rate(kubewasm_plugin_events_total{outcome=\"error\",plugin=~\"$plugin\"}[$__rate_interval])) \
         / on (plugin) group_left kubewasm_plugin_memory_bytes > 0.9 and histogram_quantile(0.99, \
         sum by (le) (rate(workqueue_queue_duration_seconds_bucket[5m])))",
    );
    let expected: BTreeSet<String> = [
        "kubewasm_plugin_events_total",
        "kubewasm_plugin_memory_bytes",
        "workqueue_queue_duration_seconds_bucket",
    ]
    .map(String::from)
    .into();
    assert_eq!(names, expected);
}

#[test]
fn the_dashboard_and_alerts_read_only_metrics_the_host_exports() {
    let running = Running::start(&[]);
    // The controllers have reconciled and written by now: their write series exist.
    running.wait_for("sample-controller", "reconciled", |s| {
        s["reconciles"].as_u64() >= Some(1)
    });
    // Without `Accept: text/html`, `/` answers one line per plugin.
    let (code, text) = http_get(running.port, "/").expect("/ answers");
    assert_eq!(code, 200, "{text}");
    assert!(text.starts_with("kubewasm "), "{text}");
    assert!(
        text.lines().any(|l| l.starts_with("sample-controller ")),
        "{text}"
    );
    let (_, metrics) = http_get(running.port, "/metrics").expect("/metrics answers");
    let exported = exported(&metrics);
    let expressions = deploy_expressions();
    assert!(expressions.len() >= 10, "{expressions:?}");
    let alerts = expressions
        .iter()
        .filter(|(w, _)| w.starts_with("alert "))
        .count();
    assert!(alerts >= 6, "{expressions:?}");
    // A family with no series yet is not in /metrics at all: the ones this host cannot have
    // without a fault the test does not make are taken from where the host registers them.
    let registered_later = EMITTED_LATER
        .iter()
        .filter(|(_, file, registered)| {
            let source = std::fs::read_to_string(kubewasm_tests::workspace_root().join(file))
                .expect("the host's source");
            source.contains(&format!("\"{registered}\""))
        })
        .map(|(name, _, _)| *name)
        .collect::<Vec<_>>();
    assert_eq!(
        registered_later.len(),
        EMITTED_LATER.len(),
        "{EMITTED_LATER:?}"
    );
    let mut unknown = Vec::new();
    for (what, expr) in &expressions {
        let names = metric_names(expr);
        assert!(!names.is_empty(), "{what} reads no metric: {expr}");
        for name in names {
            if !exported.contains(&name) && !registered_later.contains(&name.as_str()) {
                unknown.push(format!("{what}: {name}"));
            }
        }
    }
    assert!(
        unknown.is_empty(),
        "metrics the host does not export:\n{}\nexported: {exported:?}",
        unknown.join("\n")
    );
}
