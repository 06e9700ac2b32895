//! Registry credentials from a Docker config file (`~/.docker/config.json`, or the
//! `.dockerconfigjson` key of a `kubernetes.io/dockerconfigjson` Secret mounted in the pod).
//!
//! The file is read at each use, so a rotated Secret is picked up without a restart. Nothing
//! read from it ever reaches a log line or an error message: errors name the file and the
//! registry only.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use oci_client::secrets::RegistryAuth;
use serde::Deserialize;

/// Why credentials could not be read. Never carries a secret.
#[derive(Debug, thiserror::Error)]
pub enum CredentialsError {
    #[error("cannot read registry credentials {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// Not a Docker config file (`{"auths": {...}}`).
    #[error("registry credentials {path} are not a Docker config file: {message}")]
    Parse { path: PathBuf, message: String },
    /// The entry for a registry has an `auth` that is not base64 of `user:password`.
    #[error("registry credentials {path}: the `auth` of {registry} is not base64 of user:password")]
    BadAuth { path: PathBuf, registry: String },
}

/// Where registry credentials come from: a Docker config file, or none (anonymous pulls).
#[derive(Debug, Clone, Default)]
pub struct Credentials {
    file: Option<PathBuf>,
    /// Named explicitly: a missing file is an error rather than anonymous access.
    required: bool,
}

#[derive(Deserialize)]
struct DockerConfig {
    #[serde(default)]
    auths: BTreeMap<String, AuthEntry>,
}

#[derive(Deserialize)]
struct AuthEntry {
    auth: Option<String>,
    username: Option<String>,
    password: Option<String>,
    registrytoken: Option<String>,
}

impl Credentials {
    /// No credentials: every registry is accessed anonymously.
    pub fn anonymous() -> Credentials {
        Credentials::default()
    }

    /// The file given (`--registry-config`; a directory means its `config.json` or
    /// `.dockerconfigjson`), else `$DOCKER_CONFIG/config.json`, else `~/.docker/config.json`;
    /// a default file that does not exist means anonymous access.
    pub fn from_file_or_default(file: Option<&Path>) -> Credentials {
        if let Some(file) = file {
            let file = if file.is_dir() {
                let config = file.join("config.json");
                if config.exists() {
                    config
                } else {
                    file.join(".dockerconfigjson")
                }
            } else {
                file.to_path_buf()
            };
            return Credentials {
                file: Some(file),
                required: true,
            };
        }
        let default = std::env::var_os("DOCKER_CONFIG")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".docker")))
            .map(|dir| dir.join("config.json"));
        Credentials {
            file: default,
            required: false,
        }
    }

    /// How to authenticate to `registry` (`host[:port]`): its entry in the file, else anonymous.
    pub fn auth_for(&self, registry: &str) -> Result<RegistryAuth, CredentialsError> {
        let Some(path) = &self.file else {
            return Ok(RegistryAuth::Anonymous);
        };
        let text = match std::fs::read(path) {
            Ok(text) => text,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound && !self.required => {
                return Ok(RegistryAuth::Anonymous);
            }
            Err(source) => {
                return Err(CredentialsError::Read {
                    path: path.clone(),
                    source,
                });
            }
        };
        // serde_json's messages name a position, never the value read there.
        let config: DockerConfig =
            serde_json::from_slice(&text).map_err(|e| CredentialsError::Parse {
                path: path.clone(),
                message: e.to_string(),
            })?;
        let wanted = canonical(registry);
        let Some(entry) = config
            .auths
            .iter()
            .find(|(key, _)| canonical(key) == wanted)
            .map(|(_, entry)| entry)
        else {
            return Ok(RegistryAuth::Anonymous);
        };
        if let Some(token) = &entry.registrytoken {
            return Ok(RegistryAuth::Bearer(token.clone()));
        }
        if let (Some(user), Some(password)) = (&entry.username, &entry.password) {
            return Ok(RegistryAuth::Basic(user.clone(), password.clone()));
        }
        let Some(auth) = &entry.auth else {
            return Ok(RegistryAuth::Anonymous);
        };
        let bad = || CredentialsError::BadAuth {
            path: path.clone(),
            registry: registry.to_owned(),
        };
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(auth.trim())
            .map_err(|_| bad())?;
        let decoded = String::from_utf8(decoded).map_err(|_| bad())?;
        let (user, password) = decoded.split_once(':').ok_or_else(bad)?;
        Ok(RegistryAuth::Basic(user.to_owned(), password.to_owned()))
    }
}

/// A registry key as written in Docker config files (`https://index.docker.io/v1/`,
/// `registry.example:5000`) reduced to its host, Docker Hub's aliases to one.
fn canonical(key: &str) -> &str {
    let key = key
        .strip_prefix("https://")
        .or_else(|| key.strip_prefix("http://"))
        .unwrap_or(key);
    let host = key.split('/').next().unwrap_or(key);
    match host {
        "docker.io" | "index.docker.io" | "registry-1.docker.io" => "docker.io",
        host => host,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn basic(auth: RegistryAuth) -> (String, String) {
        match auth {
            RegistryAuth::Basic(user, password) => (user, password),
            other => panic!("not basic auth: {other:?}"),
        }
    }

    #[test]
    fn entries_are_found_by_host_in_either_form_and_secrets_stay_out_of_errors() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(".dockerconfigjson");
        let auth = base64::engine::general_purpose::STANDARD.encode("ci:s3cret-pw");
        std::fs::write(
            &path,
            serde_json::json!({"auths": {
                "https://127.0.0.1:5000/v2/": {"auth": auth},
                "https://index.docker.io/v1/": {"username": "hub", "password": "hub-pw"},
                "broken.example": {"auth": "s3cret-not-base64!"},
            }})
            .to_string(),
        )
        .unwrap();
        // A mounted Secret's directory works as well as the file.
        let creds = Credentials::from_file_or_default(Some(dir.path()));
        assert_eq!(
            basic(creds.auth_for("127.0.0.1:5000").unwrap()),
            ("ci".into(), "s3cret-pw".into())
        );
        assert_eq!(basic(creds.auth_for("index.docker.io").unwrap()).0, "hub");
        assert_eq!(
            creds.auth_for("other.example").unwrap(),
            RegistryAuth::Anonymous
        );
        let err = creds.auth_for("broken.example").unwrap_err().to_string();
        assert!(
            err.contains("broken.example") && !err.contains("s3cret"),
            "{err}"
        );

        let missing = Credentials::from_file_or_default(Some(&dir.path().join("nope.json")));
        assert!(missing.auth_for("127.0.0.1:5000").is_err());
    }
}
