//! `kubewasm wit`: writes the WIT of a plugin contract, as this binary implements it.

use std::path::PathBuf;

use anyhow::Context as _;

use crate::app::UsageError;
use crate::cli::WitArgs;
use crate::contracts;

/// Writes the files of the contract `--contract` names into `-o DIR` (default `wit/`), or lists
/// the contracts with `--list`.
pub fn run(args: WitArgs) -> anyhow::Result<()> {
    if args.list {
        for contract in contracts::CONTRACTS {
            let default = if contract.version == contracts::DEFAULT {
                " (default)"
            } else {
                ""
            };
            println!(
                "{:<6} {}{default}: {}",
                contract.version, contract.package, contract.summary
            );
        }
        return Ok(());
    }
    let version = args.contract.as_deref().unwrap_or(contracts::DEFAULT);
    let contract = contracts::find(version).map_err(|e| UsageError(e.into()))?;
    let dir = args.output.unwrap_or_else(|| PathBuf::from("wit"));
    let written = contract
        .write_to(&dir)
        .with_context(|| format!("cannot write the WIT into {}", dir.display()))?;
    for path in written {
        println!("{}", path.display());
    }
    Ok(())
}
