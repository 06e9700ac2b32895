//! `cargo xtask image`: the container image, built offline from scratch with buildah.
//!
//! Base images cannot be pulled everywhere this project is built, and kubewasm needs none: the
//! host is one static binary (`x86_64-unknown-linux-musl`). The image holds that binary, the CA
//! certificates, a non-root user, `/plugins` and a writable compile cache, with the entry point
//! `kubewasm run --plugins /plugins`. `deploy/Dockerfile` produces the same layout where base
//! images can be pulled; the constants below are that layout, and the image test checks them.
//!
//! The test suite's image (`--profile test`) has the same layout around the suite's own
//! (dev, glibc) binary and the libraries it links, labelled as such: see [`Profile::Test`].
//!
//! The result is the OCI archive `target/image/kubewasm.oci.tar` (load it with
//! `podman load -i`, `skopeo copy oci-archive:...`, or push it to a registry). buildah needs
//! root here: it mounts the image's root filesystem to fill it.

use std::os::unix::fs::{PermissionsExt, chown};
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};

use crate::{cmd, install};

/// The static target the image's binary is built for.
const TARGET: &str = "x86_64-unknown-linux-musl";
/// The non-root user and group the image runs as (distroless's `nonroot`).
const USER_ID: u32 = 65532;
/// Where the binary lives in the image.
const BINARY: &str = "/usr/local/bin/kubewasm";
/// The compile cache, writable by the user; `XDG_CACHE_HOME` makes it the default of every
/// subcommand.
const CACHE_DIR: &str = "/var/cache/kubewasm";
/// Where the archive is written, relative to the workspace root.
pub const ARCHIVE: &str = "target/image/kubewasm.oci.tar";

/// What a build wrote.
pub struct Built {
    pub archive: PathBuf,
    /// The binary the image holds.
    pub binary: PathBuf,
}

/// Which binary the image holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Profile {
    /// What ships (`cargo xtask image`): the release build, static (musl).
    Release,
    /// What the test suite builds and runs: the same layout around the binary the suite's own
    /// build made (dev profile, glibc) and the shared libraries it links, copied from this
    /// machine. A second build of every dependency for musl, optimised or not, was the largest
    /// stage of the suite (4:39 of 23 minutes unoptimised, 9:30 optimised); nothing the image
    /// test checks (layout, user, configuration, the binary running and compiling a plugin as
    /// that user) depends on it. The static build is what `cargo xtask image` makes.
    Test,
}

/// The label that marks the suite's image, whose binary is not the static one.
pub const TEST_LABEL: &str = "dev.kubewasm.image.test-build";

impl Profile {
    /// `cargo xtask image [--profile NAME]`.
    pub fn from_args(args: &[String]) -> anyhow::Result<Profile> {
        match args {
            [] => Ok(Profile::Release),
            [flag, name] if flag == "--profile" => match name.as_str() {
                "release" => Ok(Profile::Release),
                "test" => Ok(Profile::Test),
                other => bail!("unknown image profile `{other}`: release or test"),
            },
            _ => bail!("usage: cargo xtask image [--profile release|test]"),
        }
    }
}

/// Builds the binary for `profile` and the image around it.
pub fn build(root: &Path, profile: Profile) -> anyhow::Result<Built> {
    if !install::is_root() {
        bail!("building the image mounts its root filesystem with buildah: run as root");
    }
    install::apt(
        &["buildah"],
        || cmd::succeeds("buildah", &["--version"]),
        "the image build",
    )?;
    install::apt(
        &["ca-certificates"],
        || Path::new(CA_BUNDLE).exists(),
        "the image build",
    )?;

    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let mut command = cmd::command(&cargo, root);
    let binary = match profile {
        Profile::Release => {
            install::rustup_target(TARGET)?;
            install::apt(
                &["musl-tools"],
                || Path::new("/usr/bin/musl-gcc").exists(),
                "the static build",
            )?;
            // The suite's lint pass is for the build the tests run, not for this one.
            for var in crate::suite_build::LINT_VARS {
                command.env_remove(var);
            }
            command.args([
                "build",
                "--release",
                "--locked",
                "--target",
                TARGET,
                "-p",
                "kubewasm",
                "--bin",
                "kubewasm",
            ]);
            target_dir(root).join(TARGET).join("release/kubewasm")
        }
        // The suite's own build, the same command with its lint variables kept: after the
        // suite's build stage there is nothing to do (a narrower build would unify other
        // features and compile half the dependencies again).
        Profile::Test => {
            command.args(crate::suite_build::BUILD);
            target_dir(root).join("debug/kubewasm")
        }
    };
    cmd::run(&mut command).context("building kubewasm")?;
    let libraries = match profile {
        Profile::Release => Vec::new(),
        Profile::Test => shared_libraries(&binary)?,
    };

    let archive = root.join(ARCHIVE);
    if let Some(dir) = archive.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let container = Container::from_scratch()?;
    let rootfs = container.mount()?;
    fill_rootfs(&rootfs, &binary, &libraries)?;
    container.configure(root, profile)?;
    container.commit(&archive)?;

    let built = Built { archive, binary };
    eprintln!(
        "xtask: wrote {} ({:.1} MiB; binary {:.1} MiB)",
        built.archive.display(),
        mib(&built.archive),
        mib(&built.binary)
    );
    Ok(built)
}

/// A file's size in MiB (0 when it cannot be read).
pub fn mib(path: &Path) -> f64 {
    std::fs::metadata(path).map_or(0.0, |m| m.len() as f64 / 1048576.0)
}

/// Debian's CA bundle, copied to the same path in the image.
const CA_BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";

/// Lays out the image: binary, certificates, users, and the directories the host uses.
/// The shared libraries `binary` loads (the dynamic loader included), as `ldd` resolves them
/// on this machine.
fn shared_libraries(binary: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let out = Command::new("ldd")
        .arg(binary)
        .output()
        .context("running ldd")?;
    if !out.status.success() {
        bail!(
            "ldd {} failed: {}",
            binary.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(parse_ldd(&String::from_utf8_lossy(&out.stdout)))
}

/// The absolute paths in `ldd`'s output: `libc.so.6 => /lib/.../libc.so.6 (0x...)` and the
/// loader's `/lib64/ld-linux-x86-64.so.2 (0x...)`; the vDSO has none.
fn parse_ldd(text: &str) -> Vec<PathBuf> {
    text.lines()
        .filter_map(|line| {
            let path = match line.split_once("=>") {
                Some((_, resolved)) => resolved.split_whitespace().next(),
                None => line.split_whitespace().next(),
            }?;
            path.starts_with('/').then(|| PathBuf::from(path))
        })
        .collect()
}

fn fill_rootfs(rootfs: &Path, binary: &Path, libraries: &[PathBuf]) -> anyhow::Result<()> {
    let at = |path: &str| rootfs.join(path.trim_start_matches('/'));
    let dir = |path: &str, mode: u32, owner: u32| -> anyhow::Result<()> {
        let dir = at(path);
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(mode))?;
        chown(&dir, Some(owner), Some(owner))
            .with_context(|| format!("chown {}", dir.display()))?;
        Ok(())
    };
    let file = |path: &str, mode: u32, from: &Path| -> anyhow::Result<()> {
        let to = at(path);
        std::fs::copy(from, &to)
            .with_context(|| format!("copying {} to {}", from.display(), to.display()))?;
        std::fs::set_permissions(&to, std::fs::Permissions::from_mode(mode))?;
        Ok(())
    };
    let text = |path: &str, body: &str| -> anyhow::Result<()> {
        let to = at(path);
        std::fs::write(&to, body).with_context(|| format!("writing {}", to.display()))?;
        std::fs::set_permissions(&to, std::fs::Permissions::from_mode(0o644))?;
        Ok(())
    };

    for path in ["/usr/local/bin", "/etc/ssl/certs"] {
        dir(path, 0o755, 0)?;
    }
    dir("/plugins", 0o755, 0)?;
    dir("/tmp", 0o1777, 0)?;
    dir("/home/nonroot", 0o700, USER_ID)?;
    dir(CACHE_DIR, 0o700, USER_ID)?;
    file(BINARY, 0o755, binary)?;
    file(CA_BUNDLE, 0o644, Path::new(CA_BUNDLE))?;
    for library in libraries {
        let path = library.to_string_lossy();
        if let Some(parent) = library.parent() {
            dir(&parent.to_string_lossy(), 0o755, 0)?;
        }
        file(&path, 0o755, library)?;
    }
    text(
        "/etc/passwd",
        &format!(
            "root:x:0:0:root:/root:/sbin/nologin\n\
             nonroot:x:{USER_ID}:{USER_ID}:nonroot:/home/nonroot:/sbin/nologin\n"
        ),
    )?;
    text("/etc/group", &format!("root:x:0:\nnonroot:x:{USER_ID}:\n"))?;
    Ok(())
}

/// A buildah working container, removed on drop.
struct Container {
    name: String,
}

impl Container {
    fn from_scratch() -> anyhow::Result<Self> {
        let name = format!("kubewasm-image-{}", std::process::id());
        // A container of that name left by an interrupted build is in the way.
        let _ = buildah().args(["rm", &name]).output();
        let status = buildah()
            .args(["from", "--name", &name, "scratch"])
            .stdout(std::process::Stdio::null())
            .status()
            .context("starting buildah")?;
        if !status.success() {
            bail!("buildah from scratch failed: {status}");
        }
        Ok(Container { name })
    }

    fn mount(&self) -> anyhow::Result<PathBuf> {
        let out = buildah()
            .args(["mount", &self.name])
            .output()
            .context("starting buildah")?;
        if !out.status.success() {
            bail!(
                "buildah mount failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()))
    }

    fn configure(&self, root: &Path, profile: Profile) -> anyhow::Result<()> {
        let version = env!("CARGO_PKG_VERSION");
        let revision = git_revision(root);
        let user = format!("{USER_ID}:{USER_ID}");
        let entrypoint = format!(r#"["{BINARY}", "run", "--plugins", "/plugins"]"#);
        let mut labels = vec![
            ("org.opencontainers.image.title", "kubewasm".to_owned()),
            (
                "org.opencontainers.image.description",
                "Shared Kubernetes informers feeding controllers written as WebAssembly components"
                    .to_owned(),
            ),
            (
                "org.opencontainers.image.source",
                "https://github.com/kubewasm/kubewasm".to_owned(),
            ),
            ("org.opencontainers.image.version", version.to_owned()),
            ("org.opencontainers.image.licenses", "Apache-2.0".to_owned()),
        ];
        if let Some(revision) = revision {
            labels.push(("org.opencontainers.image.revision", revision));
        }
        if profile == Profile::Test {
            labels.push((TEST_LABEL, "true".to_owned()));
        }
        let mut command = buildah();
        command.args([
            "config",
            "--user",
            &user,
            "--workingdir",
            "/",
            "--entrypoint",
            &entrypoint,
            "--cmd",
            "",
            "--port",
            "9090",
            "--env",
            "HOME=/home/nonroot",
            "--env",
            "XDG_CACHE_HOME=/var/cache",
            "--env",
            &format!("KUBEWASM_CACHE_DIR={CACHE_DIR}"),
            "--env",
            "KUBEWASM_METRICS_ADDR=0.0.0.0:9090",
            "--env",
            &format!("SSL_CERT_FILE={CA_BUNDLE}"),
            // No mimalloc options: the binary sets its own defaults before mimalloc's first
            // allocation (host/src/allocator.rs), and an environment variable here would
            // override them silently if they change.
        ]);
        for (key, value) in &labels {
            command.args(["--label", &format!("{key}={value}")]);
        }
        command.arg(&self.name);
        cmd::run(&mut command)
    }

    fn commit(&self, archive: &Path) -> anyhow::Result<()> {
        let _ = std::fs::remove_file(archive);
        cmd::run(buildah().args([
            "commit",
            "--quiet",
            "--format",
            "oci",
            // Layers are pulled over the network: gzip them (buildah stores them raw by default).
            "--disable-compression=false",
            &self.name,
            &format!("oci-archive:{}", archive.display()),
        ]))
    }
}

impl Drop for Container {
    fn drop(&mut self) {
        let _ = buildah().args(["umount", &self.name]).output();
        let _ = buildah().args(["rm", &self.name]).output();
    }
}

/// buildah with the storage driver that works without kernel overlay support.
fn buildah() -> Command {
    let mut command = Command::new("buildah");
    command.args(["--storage-driver", "vfs"]);
    command
}

/// The commit the image is built from, when the tree is a git checkout.
fn git_revision(root: &Path) -> Option<String> {
    let out = Command::new("git")
        .args(["rev-parse", "HEAD"])
        .current_dir(root)
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// Cargo's target directory: `CARGO_TARGET_DIR` when set, else the workspace's `target/`.
fn target_dir(root: &Path) -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ldd_output_gives_the_library_and_loader_paths() {
        let text = "\tlinux-vdso.so.1 (0x00007ffd)\n\
                    \tlibgcc_s.so.1 => /lib/x86_64-linux-gnu/libgcc_s.so.1 (0x00007f4c)\n\
                    \tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f4b)\n\
                    \tlibmissing.so => not found\n\
                    \t/lib64/ld-linux-x86-64.so.2 (0x00007f4c)\n";
        assert_eq!(
            parse_ldd(text),
            [
                PathBuf::from("/lib/x86_64-linux-gnu/libgcc_s.so.1"),
                PathBuf::from("/lib/x86_64-linux-gnu/libc.so.6"),
                PathBuf::from("/lib64/ld-linux-x86-64.so.2"),
            ]
        );
    }
}
