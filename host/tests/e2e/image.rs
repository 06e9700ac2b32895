//! The container image that `cargo xtask image` builds: its configuration, and its binary run
//! inside its own root filesystem as its non-root user (`buildah mount` + `chroot`; containers
//! cannot be started on these machines).
//!
//! Needs root and the archive `target/image/kubewasm.oci.tar`; `cargo xtask test` builds it
//! first, and leaves this test binary out (saying so) where it cannot.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use kubewasm_tests::{guest_path, workspace_root};
use serde_json::Value;

const USER: &str = "65532:65532";
const CHROOT: &str = "/usr/sbin/chroot";
const ENTRYPOINT: [&str; 4] = ["/usr/local/bin/kubewasm", "run", "--plugins", "/plugins"];
/// The label of the suite's image (xtask's `image::TEST_LABEL`).
const TEST_LABEL: &str = "dev.kubewasm.image.test-build";

/// The image's archive, or a panic that says how to make it.
fn archive() -> PathBuf {
    let path = workspace_root().join("target/image/kubewasm.oci.tar");
    assert!(
        path.is_file(),
        "{} is missing: build it with `cargo xtask image` (as root)",
        path.display()
    );
    path
}

/// The files under `dir` (none when it is missing).
fn walk(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .flat_map(|e| {
            let path = e.path();
            if path.is_dir() {
                walk(&path)
            } else {
                vec![path]
            }
        })
        .collect()
}

fn buildah(args: &[&str]) -> Output {
    let out = Command::new("buildah")
        .args(["--storage-driver", "vfs"])
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("running buildah {args:?}: {e}"));
    assert!(
        out.status.success(),
        "buildah {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// A working container made from the archive, with its root filesystem mounted; removed on drop.
struct Mounted {
    name: String,
    rootfs: PathBuf,
    /// The image's OCI configuration (`config` of the image config blob).
    config: Value,
}

impl Mounted {
    fn new(archive: &Path) -> Self {
        let name = format!("kubewasm-image-test-{}", std::process::id());
        let _ = Command::new("buildah")
            .args(["--storage-driver", "vfs", "rm", &name])
            .output();
        buildah(&[
            "from",
            "--name",
            &name,
            &format!("oci-archive:{}", archive.display()),
        ]);
        let rootfs =
            PathBuf::from(String::from_utf8_lossy(&buildah(&["mount", &name]).stdout).trim());
        let inspect: Value = serde_json::from_slice(&buildah(&["inspect", &name]).stdout)
            .expect("buildah inspect prints JSON");
        let config = inspect["OCIv1"]["config"].clone();
        Mounted {
            name,
            rootfs,
            config,
        }
    }

    /// Runs `args` inside the root filesystem as the image's user, with exactly the image's
    /// environment (as a container runtime would).
    fn run(&self, args: &[&str]) -> Output {
        let user = self.config["User"].as_str().unwrap_or_default();
        // Absolute: the child's environment (and so its PATH) is the image's.
        let mut command = Command::new(CHROOT);
        command
            .arg(format!("--userspec={user}"))
            .arg(&self.rootfs)
            .args(args)
            .env_clear();
        for pair in self.config["Env"].as_array().into_iter().flatten() {
            let pair = pair.as_str().unwrap_or_default();
            if let Some((key, value)) = pair.split_once('=') {
                command.env(key, value);
            }
        }
        command
            .output()
            .unwrap_or_else(|e| panic!("running chroot {args:?}: {e}"))
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = Command::new("buildah")
            .args(["--storage-driver", "vfs", "umount", &self.name])
            .output();
        let _ = Command::new("buildah")
            .args(["--storage-driver", "vfs", "rm", &self.name])
            .output();
    }
}

#[test]
fn image_runs_its_binary_as_the_non_root_user() {
    let image = Mounted::new(&archive());

    assert_eq!(image.config["User"], USER, "the image runs as nonroot");
    let entrypoint: Vec<&str> = image.config["Entrypoint"]
        .as_array()
        .expect("an entry point")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(entrypoint, ENTRYPOINT);
    let labels = &image.config["Labels"];
    for label in ["source", "version", "revision"] {
        let key = format!("org.opencontainers.image.{label}");
        assert!(
            labels[&key].as_str().is_some_and(|v| !v.is_empty()),
            "label {key} is missing: {labels}"
        );
    }
    assert_eq!(
        labels["org.opencontainers.image.version"],
        env!("CARGO_PKG_VERSION")
    );
    // Nothing but the binary's own code can run: no shell, and no libc in the shipped image.
    // The suite's image (`cargo xtask image --profile test`, labelled) holds its dev build and
    // exactly the libraries that links.
    assert!(!image.rootfs.join("bin/sh").exists());
    if labels[TEST_LABEL] == "true" {
        let mut libraries: Vec<String> = ["lib", "lib64"]
            .iter()
            .flat_map(|d| walk(&image.rootfs.join(d)))
            .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .collect();
        libraries.sort();
        assert!(
            libraries.iter().all(|l| l.contains(".so"))
                && libraries.iter().any(|l| l.starts_with("libc.so")),
            "{libraries:?}"
        );
    } else {
        assert!(!image.rootfs.join("lib").exists());
    }
    assert!(
        image
            .rootfs
            .join("etc/ssl/certs/ca-certificates.crt")
            .is_file()
    );

    let version = image.run(&[entrypoint[0], "--version"]);
    assert!(
        version.status.success(),
        "kubewasm --version failed: {}",
        String::from_utf8_lossy(&version.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&version.stdout).trim(),
        format!("kubewasm {}", env!("CARGO_PKG_VERSION"))
    );

    // An example plugin dropped into /plugins compiles and initialises inside the image, its
    // compile cache written where the image's user may write.
    let plugin = guest_path("ready-pods");
    std::fs::copy(&plugin, image.rootfs.join("plugins/ready-pods.wasm")).expect("copying");
    let check = image.run(&[entrypoint[0], "check", "/plugins/ready-pods.wasm"]);
    let stdout = String::from_utf8_lossy(&check.stdout);
    assert!(
        check.status.success(),
        "kubewasm check failed in the image: {stdout}{}",
        String::from_utf8_lossy(&check.stderr)
    );
    assert!(stdout.contains("/plugins/ready-pods.wasm: ok"), "{stdout}");
    let cache = image.rootfs.join("var/cache/kubewasm");
    let cached = std::fs::read_dir(&cache)
        .map(|entries| entries.count())
        .unwrap_or(0);
    assert!(cached > 0, "no compiled plugin cached under {cache:?}");
}
