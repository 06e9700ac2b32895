//! The contract side of a build: which WIT world a guest targets, making a component of a core
//! module (embed the world, wrap with the preview1 reactor adapter), and checking a finished
//! component against its world.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use wit_component::{ComponentEncoder, DecodedWasm, StringEncoding};
use wit_parser::{PackageId, Resolve, WorldId, WorldItem, WorldKey};

/// The world a guest is built for: a WIT directory (its package at the top, the packages it
/// uses under `deps/`) and a world of that package.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub wit_dir: PathBuf,
    pub world: String,
}

impl Target {
    /// The `controller` world of the package in `wit_dir`.
    pub fn controller(wit_dir: impl Into<PathBuf>) -> Target {
        Target {
            wit_dir: wit_dir.into(),
            world: "controller".to_owned(),
        }
    }

    /// The world a project's `wit/` is built and checked against, the first its package has of
    /// `controller` (0.1, 0.2), `reconciler` (0.2.2, whose worlds are `reconciler` and
    /// `batch-controller`: the exports every 0.2.2 plugin has; the Rust SDK's components,
    /// `batch-controller`, add `batch-handler` to them) and `admission-policy` (0.3, beside
    /// `admission-controller`), else its only world. WIT that does not parse stays on
    /// `controller`, whose resolve then says what is wrong.
    pub fn for_project(wit_dir: impl Into<PathBuf>) -> Target {
        const PREFERRED: [&str; 3] = ["controller", "reconciler", "admission-policy"];
        let mut target = Target::controller(wit_dir);
        if let Ok((resolve, package)) = target.package() {
            let worlds = &resolve.packages[package].worlds;
            let chosen = PREFERRED
                .iter()
                .find(|w| worlds.contains_key(**w))
                .map(|w| (*w).to_owned())
                .or_else(|| match worlds.keys().collect::<Vec<_>>()[..] {
                    [only] => Some(only.clone()),
                    _ => None,
                });
            if let Some(world) = chosen {
                target.world = world;
            }
        }
        target
    }

    /// The parsed package and the world's id.
    pub fn resolve(&self) -> anyhow::Result<(Resolve, WorldId)> {
        let (resolve, package) = self.package()?;
        let world = resolve
            .select_world(&[package], Some(&self.world))
            .with_context(|| {
                format!(
                    "the WIT in {} has no world `{}`",
                    self.wit_dir.display(),
                    self.world
                )
            })?;
        Ok((resolve, world))
    }

    fn package(&self) -> anyhow::Result<(Resolve, PackageId)> {
        let mut resolve = Resolve::default();
        let (package, _) = resolve
            .push_dir(&self.wit_dir)
            .with_context(|| format!("parsing the WIT package in {}", self.wit_dir.display()))?;
        Ok((resolve, package))
    }

    /// The name of the package the world belongs to (`kubewasm:controller@0.2.0`): the contract
    /// the guest claims.
    pub fn package_name(&self) -> anyhow::Result<String> {
        let (resolve, package) = self.package()?;
        Ok(resolve.packages[package].name.to_string())
    }
}

/// Appends the world's type information to a core module (what `wasm-tools component embed`
/// does), for toolchains whose output lacks it.
pub fn embed_world(target: &Target, module: &mut Vec<u8>) -> anyhow::Result<()> {
    let (resolve, world) = target.resolve()?;
    wit_component::embed_component_metadata(module, &resolve, world, StringEncoding::UTF8, false)
}

/// Turns a preview1 reactor module that carries the world's type information into a component
/// (what `wasm-tools component new --adapt` does): wasmtime 48's preview1 reactor adapter maps
/// the module's `wasi_snapshot_preview1` imports onto WASI 0.2.
pub fn componentize_reactor(module: &[u8]) -> anyhow::Result<Vec<u8>> {
    ComponentEncoder::default()
        .validate(true)
        .module(module)?
        .adapter(
            wasi_preview1_component_adapter_provider::WASI_SNAPSHOT_PREVIEW1_ADAPTER_NAME,
            wasi_preview1_component_adapter_provider::WASI_SNAPSHOT_PREVIEW1_REACTOR_ADAPTER,
        )?
        .encode()
        .context("encoding the component")
}

/// Checks that a component exports every interface the target world exports and imports
/// nothing but the world's package family (`kubewasm:controller/...`) and WASI 0.2: what the
/// host's linker provides.
pub fn check(bytes: &[u8], target: &Target) -> anyhow::Result<()> {
    let (want_resolve, want_world) = target.resolve()?;
    let required = export_names(&want_resolve, &want_resolve.worlds[want_world].exports);
    let (resolve, world) = match wit_component::decode(bytes).context("decoding the component")? {
        DecodedWasm::Component(resolve, world) => (resolve, world),
        DecodedWasm::WitPackage(..) => bail!("expected a component, found a WIT package"),
    };
    let world = &resolve.worlds[world];
    let exports = export_names(&resolve, &world.exports);
    for name in &required {
        if !exports.iter().any(|have| have == name) {
            bail!("the component does not export {name} (exports: {exports:?})");
        }
    }
    for import in export_names(&resolve, &world.imports) {
        let allowed = import.starts_with("wasi:") || import.starts_with("kubewasm:controller/");
        if !allowed {
            bail!("the component imports {import}, which the host does not provide");
        }
    }
    Ok(())
}

fn export_names(
    resolve: &Resolve,
    items: &wit_parser::IndexMap<WorldKey, WorldItem>,
) -> Vec<String> {
    items
        .iter()
        .map(|(key, item)| match item {
            WorldItem::Interface { id, .. } => resolve
                .id_of(*id)
                .unwrap_or_else(|| resolve.name_world_key(key)),
            _ => resolve.name_world_key(key),
        })
        .collect()
}

/// Writes `bytes` to `path` through a file beside it renamed into place, so a watching host
/// never sees half a component; the file is not touched when it already holds the same bytes.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    if std::fs::read(path).is_ok_and(|existing| existing == bytes) {
        return Ok(());
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let mut partial = path.as_os_str().to_owned();
    partial.push(".partial");
    let partial = PathBuf::from(partial);
    std::fs::write(&partial, bytes).with_context(|| format!("writing {}", partial.display()))?;
    std::fs::rename(&partial, path).with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use wit_parser::ManglingAndAbi;

    use super::*;

    /// The repository's WIT directory of a contract (`wit/`, `wit/0.2`).
    pub fn repo_wit(sub: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../wit")
            .join(sub)
    }

    /// A core module for `world` (every import and export present, bodies unreachable), turned
    /// into a component the way the C and Go builds do it.
    pub fn component_for(resolve: &Resolve, world: WorldId) -> Vec<u8> {
        let mut module = wit_component::dummy_module(resolve, world, ManglingAndAbi::Standard32);
        wit_component::embed_component_metadata(
            &mut module,
            resolve,
            world,
            StringEncoding::UTF8,
            false,
        )
        .expect("embedding the world");
        componentize_reactor(&module).expect("componentizing")
    }

    #[test]
    fn a_controller_module_becomes_a_component_the_check_accepts() {
        let target = Target::controller(repo_wit(""));
        let (resolve, world) = target.resolve().expect("wit/ parses");
        check(&component_for(&resolve, world), &target).expect("a controller component passes");
        assert_eq!(target.package_name().unwrap(), "kubewasm:controller@0.1.0");
    }

    #[test]
    fn a_0_2_controller_passes_its_own_check_and_not_the_0_1_one() {
        let v0_2 = Target::controller(repo_wit("0.2"));
        let (resolve, world) = v0_2.resolve().expect("wit/0.2 parses");
        let component = component_for(&resolve, world);
        check(&component, &v0_2).expect("a 0.2 controller passes");
        let err = check(&component, &Target::controller(repo_wit(""))).expect_err("not 0.1");
        assert!(format!("{err:#}").contains("handler@0.1.0"), "{err:#}");
    }

    /// A project's `wit/` as `kubewasm wit` lays it out: the package (`file`, from the
    /// repository's `from`) with 0.2.0 and 0.2.1 under `deps/`.
    fn package_on_0_2(file: &str, from: &str) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (to, from) in [
            (file, from),
            ("deps/v0-2-0/controller.wit", "0.2/controller.wit"),
            ("deps/v0-2-1/batch.wit", "0.2.1/batch.wit"),
        ] {
            let path = dir.path().join(to);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, std::fs::read_to_string(repo_wit(from)).unwrap()).unwrap();
        }
        dir
    }

    #[test]
    fn a_project_on_0_2_2_is_checked_against_reconciler_and_one_on_0_2_against_controller() {
        assert_eq!(Target::for_project(repo_wit("0.2")).world, "controller");
        let dir = package_on_0_2("predicates.wit", "0.2.2/predicates.wit");
        let target = Target::for_project(dir.path());
        assert_eq!(target.world, "reconciler");
        // A batch-controller (what the Rust SDK builds) passes; a 0.2.0 controller does not.
        let batch = Target {
            world: "batch-controller".to_owned(),
            ..target.clone()
        };
        let (resolve, world) = batch.resolve().expect("batch-controller");
        check(&component_for(&resolve, world), &target).expect("a batch-controller passes");
        let v0_2 = Target::controller(repo_wit("0.2"));
        let (resolve, world) = v0_2.resolve().unwrap();
        let err = check(&component_for(&resolve, world), &target).expect_err("0.2.0 plugin");
        assert!(format!("{err:#}").contains("plugin@0.2.2"), "{err:#}");
    }

    #[test]
    fn a_project_on_0_3_is_built_for_admission_policy_and_a_one_world_package_for_that_world() {
        let dir = package_on_0_2("admission.wit", "0.3/admission.wit");
        let target = Target::for_project(dir.path());
        assert_eq!(target.world, "admission-policy");
        assert_eq!(target.package_name().unwrap(), "kubewasm:controller@0.3.0");
        target.resolve().expect("the world resolves");

        let one = tempfile::tempdir().unwrap();
        std::fs::write(
            one.path().join("w.wit"),
            "package example:only@1.0.0;\nworld mine { export run: func(); }\n",
        )
        .unwrap();
        assert_eq!(Target::for_project(one.path()).world, "mine");
    }

    #[test]
    fn the_0_2_check_rejects_a_component_of_the_observer_world_alone() {
        let v0_2 = Target::controller(repo_wit("0.2"));
        let observer = Target {
            world: "observer".to_owned(),
            ..v0_2.clone()
        };
        let (resolve, world) = observer.resolve().expect("observer world");
        let err = check(&component_for(&resolve, world), &v0_2).expect_err("no reconcile");
        assert!(format!("{err:#}").contains("reconcile@0.2.0"), "{err:#}");
    }

    #[test]
    fn the_check_rejects_imports_the_host_does_not_provide() {
        let target = Target::controller(repo_wit(""));
        let (mut resolve, _) = target.resolve().expect("wit/ parses");
        let package = resolve
            .push_str(
                "extra.wit",
                "package test:extra;\ninterface sockets { connect: func(); }\n\
                 world w { include kubewasm:controller/controller@0.1.0; import sockets; }\n",
            )
            .expect("test WIT parses");
        let world = resolve.select_world(&[package], Some("w")).expect("world");
        let err = check(&component_for(&resolve, world), &target).expect_err("unknown import");
        assert!(format!("{err:#}").contains("test:extra/sockets"), "{err:#}");
    }

    #[test]
    fn write_atomically_rewrites_only_changed_bytes() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out/p.wasm");
        write_atomically(&path, b"v1").unwrap();
        let first = std::fs::metadata(&path).unwrap().ino();
        write_atomically(&path, b"v1").unwrap();
        assert_eq!(
            std::fs::metadata(&path).unwrap().ino(),
            first,
            "same bytes: untouched"
        );
        write_atomically(&path, b"v2").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"v2");
        assert!(!dir.path().join("out/p.wasm.partial").exists());
    }
}
