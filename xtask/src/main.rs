//! Repository chores, run as `cargo xtask <command>`.
//!
//! - `bindings`: regenerate the Rust guest SDKs' committed wit-bindgen bindings from `wit/`.
//! - `cycles`: fail when files of one crate import each other in a circle.
//! - `build-guests`: build every example and test guest (Rust, C, Go, Python, JavaScript) into
//!   `target/plugins/` (test guests into `target/test-plugins/`), installing missing language
//!   toolchains from the registries first.
//! - `test`: what CI runs: the module-cycle check, fmt check, clippy with warnings denied,
//!   guests, the whole test suite (with the real-server tier when `KUBEBUILDER_ASSETS` names
//!   kube-apiserver and etcd).
//! - `dev`: the main job: the example plugins on the embedded development API server.
//! - `bench`: every benchmark in release, gathered into BENCHMARKS.md.
//! - `protobuf-schema`: the protobuf crate's schema tables, generated from k8s.io/api's Go types.
//! - `image`: the container image (static binary, from scratch) as an OCI archive.

#[cfg(test)]
mod architecture;
mod bench;
mod bindings;
mod cmd;
mod cycles;
mod dev;
mod guests;
mod image;
mod install;
mod protobuf_schema;
mod real_tier;
mod stages;
mod suite_build;
mod test;
mod workspace;

use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (command, rest) = match args.split_first() {
        Some((command, rest)) => (command.as_str(), rest),
        None => ("", &[][..]),
    };
    let result = match command {
        "bindings" => write_bindings(),
        "build-guests" => build_guests(),
        "cycles" => match rest {
            [] => cycles::check(&workspace::root()),
            [dir] => cycles::check(std::path::Path::new(dir)),
            _ => Err(anyhow::anyhow!("usage: cargo xtask cycles [WORKSPACE_DIR]")),
        },
        "test" => test::run(&guests::Ctx::new()),
        "dev" => dev::run(&guests::Ctx::new(), rest),
        "bench" => bench::run(&guests::Ctx::new().with_lto(), rest),
        "protobuf-schema" => protobuf_schema::run(&workspace::root(), rest),
        "image" => image::Profile::from_args(rest)
            .and_then(|profile| image::build(&workspace::root(), profile))
            .map(drop),
        "help" | "--help" | "-h" => {
            println!("{USAGE}");
            Ok(())
        }
        "" => Err(anyhow::anyhow!("{USAGE}")),
        other => Err(anyhow::anyhow!("unknown command `{other}`\n\n{USAGE}")),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("xtask: {err:#}");
            ExitCode::FAILURE
        }
    }
}

/// Regenerates the SDK's bindings and lists the files that changed.
fn write_bindings() -> anyhow::Result<()> {
    let changed = bindings::write(&workspace::root())?;
    if changed.is_empty() {
        eprintln!("xtask: the SDK's bindings are up to date");
    }
    for path in changed {
        eprintln!("xtask: wrote {}", path.display());
    }
    Ok(())
}

/// Builds every guest and lists what was written.
fn build_guests() -> anyhow::Result<()> {
    let ctx = guests::Ctx::new();
    let built = guests::build_all(&ctx)?;
    guests::print_summary(&built);
    Ok(())
}

const USAGE: &str = "\
usage: cargo xtask <command> [args]

commands:
  bindings       regenerate the Rust guest SDKs' wit-bindgen bindings (guest-sdk/v0.*/src/bindings/)
                 from wit/ after a contract change (a test fails while they are stale)
  build-guests   build every example guest into target/plugins/ and every test guest into
                 target/test-plugins/ (installs missing language toolchains first)
  cycles [DIR]   fail when the files of one crate import each other in a circle (each cycle is
                 printed with the names that tie its files); the first stage of `test`. DIR: the
                 workspace to check (default: this one)
  test           what CI runs: the module-cycle check, cargo fmt --check, the build with clippy
                 -D warnings, build-guests, the image (the dev build inside), the test suite
                 (doc tests + cargo nextest when installed, else cargo test); the real-server
                 tier (tests in `real` modules) runs when KUBEBUILDER_ASSETS names a folder with
                 kube-apiserver and etcd, and is reported as skipped otherwise
  dev [ARGS..]   build-guests, then `kubewasm dev --plugins target/plugins --manifests
                 examples/manifests --config examples/kubewasm-dev.toml ARGS..` (the example
                 plugins on the embedded API server; a --config in ARGS replaces the example one)
  bench [NAME..] run every benchmark (or the named ones) in release and write BENCHMARKS.md
  protobuf-schema --api DIR --apimachinery DIR [--out FILE]
                 generate protobuf/src/kinds/generated.rs (the built-in kinds' protobuf schemas)
                 from checkouts of k8s.io/api and k8s.io/apimachinery (their Go struct tags)
  image [--profile release|test]
                 build the container image offline with buildah (static musl binary, from
                 scratch) into target/image/kubewasm.oci.tar (needs root); `test` is the test
                 suite's image: the same layout around the dev build and the libraries it links";
