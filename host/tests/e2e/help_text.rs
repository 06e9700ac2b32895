//! The help texts and the guide say what the binary does: every contract `wit --list` carries
//! is named by `wit --help` and written by `wit` with worlds the guide names; every language
//! `new --lang` takes is named by `build --help` and has a row in the guide's `kubewasm new`
//! table; every assert a scenario takes is named by `test --help`; `dev --help` lists only flags
//! `dev` honours and says where its webhooks are served.

use std::process::Command;

use kubewasm_tests::workspace_root;

const BIN: &str = env!("CARGO_BIN_EXE_kubewasm");

fn kubewasm(args: &[&str]) -> String {
    let output = Command::new(BIN)
        .args(args)
        .output()
        .expect("kubewasm runs");
    assert!(output.status.success(), "kubewasm {args:?}: {output:?}");
    String::from_utf8(output.stdout).expect("UTF-8 help")
}

fn guide() -> String {
    std::fs::read_to_string(workspace_root().join("docs/guest-guide.md")).expect("the guide")
}

/// What clap lists after `[possible values: ...]` for an option in `help`.
fn possible_values(help: &str, option: &str) -> Vec<String> {
    let at = help
        .find(option)
        .unwrap_or_else(|| panic!("no {option} in:\n{help}"));
    let rest = &help[at..];
    let list = rest
        .split_once("[possible values: ")
        .and_then(|(_, tail)| tail.split_once(']'))
        .unwrap_or_else(|| panic!("no possible values for {option} in:\n{help}"))
        .0;
    list.split(", ").map(str::to_owned).collect()
}

/// Help text as one line: clap wraps at the terminal's width.
fn flat(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[test]
fn every_contract_the_binary_carries_is_in_wit_help_and_its_worlds_in_the_guide() {
    let listed = kubewasm(&["wit", "--list"]);
    let versions: Vec<&str> = listed
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .collect();
    assert!(versions.len() >= 5, "{listed}");
    let help = flat(&kubewasm(&["wit", "--help"]));
    let guide = guide();
    for version in &versions {
        assert!(help.contains(version), "wit --help omits {version}: {help}");
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("wit");
        kubewasm(&["wit", "--contract", version, "-o", out.to_str().unwrap()]);
        // The version's own package: the files at the top of the directory, not its deps.
        for entry in std::fs::read_dir(&out).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_none_or(|e| e != "wit") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            for world in text
                .lines()
                .filter_map(|l| l.strip_prefix("world "))
                .filter_map(|l| l.split_whitespace().next())
            {
                assert!(
                    guide.contains(&format!("`{world}`")),
                    "the guide never names world `{world}` of contract {version}"
                );
            }
        }
    }
}

#[test]
fn every_language_new_takes_is_in_build_help_and_the_guides_table() {
    let languages = possible_values(&kubewasm(&["new", "--help"]), "--lang");
    assert!(languages.len() >= 5, "{languages:?}");
    let build = flat(&kubewasm(&["build", "--help"]));
    let guide = guide();
    for lang in &languages {
        let name = match lang.as_str() {
            "js" => "JavaScript",
            "rust" => "Rust",
            "go" => "Go",
            "python" => "Python",
            "c" => "C",
            other => panic!("a language this test does not know: {other}: name it here"),
        };
        assert!(
            build.contains(&format!("{name},")) || build.contains(&format!("{name} ")),
            "build --help omits {name}: {build}"
        );
        assert!(
            guide.contains(&format!("| {name} | done:")),
            "the guide's `kubewasm new` table has no row for {name}"
        );
    }
}

#[test]
fn every_scenario_assert_and_operator_is_in_test_help() {
    let help = flat(&kubewasm(&["test", "--help"]));
    for assert in [
        "`exist`",
        "`absent`",
        "`count`",
        "`events`",
        "`writes`",
        "`logged`",
        "`converged`",
        "$any",
        "$absent",
        "$changed",
        "$matches",
        "$count",
        "--verbose",
        "--log-file",
    ] {
        assert!(help.contains(assert), "test --help omits {assert}: {help}");
    }
}

/// `dev` is one replica against the API server inside it: the leader-election and sharding
/// flags are `run`'s alone, and without `--webhook-addr` its webhooks are still served (on
/// loopback), which the help must not contradict.
#[test]
fn dev_help_lists_only_what_dev_honours() {
    let dev = flat(&kubewasm(&["dev", "--help"]));
    let run = flat(&kubewasm(&["run", "--help"]));
    for flag in [
        "--leader-elect ",
        "--leader-elect-lease-name",
        "--leader-elect-namespace",
        "--leader-elect-lease-duration",
        "--leader-elect-renew-deadline",
        "--leader-elect-retry-period",
        "--shards",
    ] {
        assert!(!dev.contains(flag), "dev --help lists {flag}: {dev}");
        assert!(run.contains(flag), "run --help omits {flag}: {run}");
    }
    assert!(
        dev.contains("`dev` serves them on loopback"),
        "dev --help must say where webhooks go without --webhook-addr: {dev}"
    );
    assert!(!dev.contains("no webhooks"), "{dev}");
    for flag in [
        "--webhook-addr",
        "--webhook-cert",
        "--webhook-key",
        "--manifests",
    ] {
        assert!(dev.contains(flag), "dev --help omits {flag}: {dev}");
    }
}
