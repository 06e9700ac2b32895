use parking_lot::Mutex;
use tracing::Level;

use super::*;
use kubewasm_runtime::PluginState;

const HOSTILE: &str = "<script>document.title='owned'</script><img src=x onerror=alert(1)>";

fn plugin(key: &str) -> PluginView {
    PluginView {
        key: key.into(),
        file: format!("{key}.wasm"),
        name: key.into(),
        contract: "kubewasm:controller@0.1.0, world controller".into(),
        state: PluginState::Running,
        failed: false,
        replay_done: true,
        content_hash: "ab12".into(),
        events: 0,
        handler_errors: 0,
        reconciles: 0,
        reconcile_errors: 0,
        faults: 0,
        restarts: 0,
        queue_depth: 0,
        workqueue: None,
        retries: 0,
        writes_refused: 0,
        call_seconds: 0.0,
        memory_bytes: 2 << 20,
        last_error: None,
        subscriptions: vec!["/v1/ConfigMap".into()],
        reads: Vec::new(),
        writes: Vec::new(),
        webhooks: None,
    }
}

fn page_over(state: Arc<Mutex<Snapshot>>, logs: RecentLogs) -> StatusPage {
    StatusPage::new(Arc::new(move || state.lock().clone()), logs)
}

/// The keys of the overview's plugin rows, in the order shown.
fn row_keys(html: &str) -> Vec<String> {
    let table = html
        .split("id=\"plugins\"")
        .nth(1)
        .and_then(|rest| rest.split("</table>").next())
        .unwrap_or_default();
    table
        .split("data-key=\"")
        .skip(1)
        .filter_map(|rest| Some(rest[..rest.find('"')?].to_owned()))
        .collect()
}

#[test]
fn guest_text_is_shown_as_text_never_as_markup() {
    let mut hostile = plugin("hostile");
    hostile.name = HOSTILE.into();
    hostile.last_error = Some(HOSTILE.into());
    hostile.webhooks = Some(HOSTILE.into());
    hostile.subscriptions = vec![HOSTILE.into()];
    hostile.handler_errors = 1;
    let snapshot = Snapshot {
        plugins: vec![hostile],
        files: vec![FileView {
            path: "/plugins/x.wasm".into(),
            key: "x".into(),
            error: HOSTILE.into(),
        }],
        ready: Err(HOSTILE.into()),
        ..Snapshot::default()
    };
    let logs = RecentLogs::default();
    logs.push(
        "hostile",
        Line {
            at: Timestamp::now(),
            level: Level::INFO,
            guest: true,
            text: HOSTILE.into(),
        },
    );
    let page = page_over(Arc::new(Mutex::new(snapshot)), logs);
    let escaped =
        "&lt;script&gt;document.title='owned'&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;";
    for html in [
        page.overview_html(),
        page.plugin_html("hostile").expect("a page"),
    ] {
        assert!(!html.contains("<script"), "{html}");
        assert!(!html.contains("<img"), "{html}");
        assert!(html.contains(escaped), "{html}");
    }
    let plugin_page = page.plugin_html("hostile").expect("a page");
    assert!(
        plugin_page.matches(escaped).count() >= 5,
        "name, error, subscription, webhooks and the log line: {plugin_page}"
    );
    let odd = Snapshot {
        plugins: vec![plugin("a b?c#d")],
        ..Snapshot::default()
    };
    let html = page_over(Arc::new(Mutex::new(odd)), RecentLogs::default()).overview_html();
    assert!(html.contains("href=\"/plugin/a%20b%3Fc%23d\""), "{html}");
    let missing = page.plugin_html(HOSTILE).expect_err("no such plugin");
    assert!(!missing.contains("<script"), "{missing}");
}

#[test]
fn a_failing_plugin_comes_first_and_says_since_when() {
    let state = Arc::new(Mutex::new(Snapshot {
        plugins: vec![plugin("alpha"), plugin("beta"), plugin("gamma")],
        ..Snapshot::default()
    }));
    let page = page_over(state.clone(), RecentLogs::default());
    page.sample();
    assert_eq!(row_keys(&page.overview_html()), ["alpha", "beta", "gamma"]);

    {
        let mut snapshot = state.lock();
        let gamma = &mut snapshot.plugins[2];
        gamma.faults = 1;
        gamma.restarts = 1;
        gamma.last_error = Some("trap: probe told to trap".into());
        let beta = &mut snapshot.plugins[1];
        beta.state = PluginState::Failed;
        beta.failed = true;
    }
    page.sample();
    let html = page.overview_html();
    assert_eq!(row_keys(&html), ["beta", "gamma", "alpha"], "{html}");
    assert!(html.contains("data-condition=\"failed\""), "{html}");
    assert!(html.contains("data-condition=\"erroring\""), "{html}");
    assert!(html.contains("trap: probe told to trap"), "{html}");
    assert!(html.contains("since 0 s ago"), "{html}");

    let text = page.overview_text();
    let first = text.lines().nth(1).expect("a plugin line");
    assert!(first.starts_with("beta failed"), "{text}");
}

#[test]
fn an_unloaded_plugin_leaves_the_page_and_its_lines_go() {
    let state = Arc::new(Mutex::new(Snapshot {
        plugins: vec![plugin("stays"), plugin("goes")],
        ..Snapshot::default()
    }));
    let logs = RecentLogs::default();
    let line = Line {
        at: Timestamp::now(),
        level: Level::INFO,
        guest: true,
        text: "hello".into(),
    };
    logs.push("goes", line.clone());
    logs.push("stays", line);
    let page = page_over(state.clone(), logs.clone());
    let with_both = page.sample();
    state.lock().plugins.pop();
    let with_one = page.sample();
    assert!(with_one < with_both, "{with_one} < {with_both}");
    assert!(logs.lines("goes").is_empty());
    assert_eq!(logs.lines("stays").len(), 1);
    assert!(page.plugin_html("goes").is_err());
    assert_eq!(row_keys(&page.overview_html()), ["stays"]);
}
