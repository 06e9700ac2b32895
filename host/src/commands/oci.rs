//! `kubewasm push` and `kubewasm pull`: plugins to and from an OCI registry.

use std::path::{Path, PathBuf};

use anyhow::Context as _;

use crate::app::UsageError;
use crate::cli::{PullArgs, PushArgs, RegistryArgs};
use crate::config::Config;
use crate::oci::{
    ANNOTATION_PLUGIN, Credentials, Metadata, Registry, RegistryOptions, parse_reference,
};

fn registry(args: &RegistryArgs) -> Registry {
    Registry::new(RegistryOptions {
        credentials: Credentials::from_file_or_default(args.registry_config.as_deref()),
        plain_http: if args.plain_http {
            vec!["*".to_owned()]
        } else {
            Vec::new()
        },
    })
}

/// Publishes a plugin file; prints `REF@DIGEST`.
pub async fn push(args: PushArgs) -> anyhow::Result<()> {
    let reference = parse_reference(&args.reference).map_err(|e| UsageError(e.into()))?;
    let wasm = std::fs::read(&args.file)
        .with_context(|| format!("cannot read {}", args.file.display()))
        .map_err(UsageError)?;
    let (name, contract) = crate::inspect::identify(&args.file, &wasm)
        .await
        .map_err(UsageError)?;
    let file_name = args
        .file
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let precompiled = match &args.precompiled {
        Some(path) => Some(precompiled_for(path, &args.file, &wasm).map_err(UsageError)?),
        None => None,
    };
    let meta = Metadata {
        name,
        contract: contract.to_owned(),
        source: args.source,
    };
    let digest = registry(&args.registry)
        .push(&reference, wasm, precompiled, &file_name, &meta)
        .await?;
    tracing::info!(reference = %reference.whole(), %digest, plugin = %meta.name, "pushed");
    println!(
        "{}/{}@{digest}",
        reference.registry(),
        reference.repository()
    );
    Ok(())
}

/// The precompiled artifact at `path`, refused unless it is one and was compiled from `wasm`
/// (read from `file`). Its engine is not checked here: it is for the hosts that load it, which
/// check it against their own.
fn precompiled_for(path: &Path, file: &Path, wasm: &[u8]) -> anyhow::Result<Vec<u8>> {
    use sha2::Digest as _;
    let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    let parsed = kubewasm_runtime::precompiled::parse(&bytes)
        .with_context(|| format!("{}: not usable as --precompiled", path.display()))?;
    let hash: String = sha2::Sha256::digest(wasm)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let header = &parsed.header;
    parsed.check(&header.stamp, Some(&hash)).with_context(|| {
        format!(
            "{} is not the precompiled code of {}",
            path.display(),
            file.display()
        )
    })?;
    tracing::info!(
        wasmtime = %header.stamp.wasmtime,
        target = %header.stamp.target,
        engine = %header.stamp.engine,
        "shipping precompiled code"
    );
    Ok(bytes)
}

/// Fetches a plugin, checked against its digests; prints where it was written and its digest.
pub async fn pull(args: PullArgs) -> anyhow::Result<()> {
    let reference = parse_reference(&args.reference).map_err(|e| UsageError(e.into()))?;
    let registry = registry(&args.registry);
    let digest = registry.resolve(&reference).await?;
    let pulled = registry.fetch_manifest(&reference, &digest).await?;
    let wasm = registry.fetch_component(&reference, &pulled).await?;
    let output = args.output.unwrap_or_else(|| {
        let name = pulled
            .annotation(ANNOTATION_PLUGIN)
            .filter(|n| !n.is_empty() && !n.contains(['/', '\\']) && !n.starts_with('.'))
            .or_else(|| reference.repository().rsplit('/').next())
            .unwrap_or("plugin");
        PathBuf::from(format!("{name}.wasm"))
    });
    std::fs::write(&output, &wasm).with_context(|| format!("cannot write {}", output.display()))?;
    println!("{} {digest}", output.display());
    Ok(())
}

/// The components of the config's `source = "oci://..."` plugins, fetched into memory (not the
/// store) for `kubewasm rbac`: each as `NAME.wasm` with its bytes, or why it could not be had.
pub async fn fetch_sources(
    config: &Config,
    registry_config: Option<&Path>,
) -> Vec<(PathBuf, anyhow::Result<Vec<u8>>)> {
    let registry = Registry::new(RegistryOptions {
        credentials: Credentials::from_file_or_default(
            registry_config.or(config.registries.config.as_deref()),
        ),
        plain_http: config.registries.plain_http.clone(),
    });
    let mut out = Vec::new();
    for spec in config.sources() {
        let fetched = async {
            let digest = registry.resolve(&spec.reference).await?;
            let pulled = registry.fetch_manifest(&spec.reference, &digest).await?;
            registry.fetch_component(&spec.reference, &pulled).await
        }
        .await
        .with_context(|| format!("cannot fetch {}", spec.source));
        out.push((PathBuf::from(format!("{}.wasm", spec.name)), fetched));
    }
    out
}
