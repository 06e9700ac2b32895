//! `kubewasm new`: writes a new plugin project that builds and tests with this binary alone.

use std::path::PathBuf;

use crate::app::UsageError;
use crate::cli::NewArgs;
use crate::scaffold;

/// Writes the project into `NAME/` (or `--dir`) and prints what to run next.
pub fn run(args: NewArgs) -> anyhow::Result<()> {
    let files =
        scaffold::files(&args.name, args.lang, args.kind).map_err(|e| UsageError(e.into()))?;
    let dir = args.dir.unwrap_or_else(|| PathBuf::from(&args.name));
    let written = scaffold::write(&dir, &files).map_err(|e| UsageError(e.into()))?;
    for path in &written {
        println!("{}", path.display());
    }
    eprintln!(
        "kubewasm: next: cd {} && kubewasm build && kubewasm test build/{}.wasm --scenario \
         scenario.yaml",
        dir.display(),
        args.name
    );
    Ok(())
}
