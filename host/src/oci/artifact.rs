//! The Wasm OCI artifact layout (CNCF TAG Runtime): a config of media type
//! `application/vnd.wasm.config.v0+json` and exactly one `application/wasm` layer, the
//! component. kubewasm adds annotations saying which plugin it is and for which contract.

use std::collections::BTreeMap;

use oci_client::client::{Config, ImageLayer};
use oci_client::manifest::{OciDescriptor, OciImageManifest};

pub const CONFIG_MEDIA_TYPE: &str = "application/vnd.wasm.config.v0+json";
pub const LAYER_MEDIA_TYPE: &str = "application/wasm";
/// The plugin's name, as its `init` returns it.
pub const ANNOTATION_PLUGIN: &str = "dev.kubewasm.plugin.name";
/// The contract the component was built for, e.g. `kubewasm:controller@0.2.0`.
pub const ANNOTATION_CONTRACT: &str = "dev.kubewasm.plugin.contract";
/// Where the plugin's source lives (the standard OCI annotation).
pub const ANNOTATION_SOURCE: &str = "org.opencontainers.image.source";
const ANNOTATION_TITLE: &str = "org.opencontainers.image.title";

/// What a pushed artifact says about the plugin inside.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Metadata {
    pub name: String,
    pub contract: String,
    /// A URL of the plugin's source, when the publisher gives one.
    pub source: Option<String>,
}

/// Why a manifest is not a Wasm component artifact.
#[derive(Debug, thiserror::Error)]
pub enum ArtifactError {
    /// The config says it is something else (a container image, a Helm chart, ...).
    #[error("not a Wasm artifact: its config is `{0}`, not `{CONFIG_MEDIA_TYPE}`")]
    Config(String),
    /// Not exactly one layer of type `application/wasm`.
    #[error("not a Wasm artifact: it must have exactly one `{LAYER_MEDIA_TYPE}` layer, it has {0}")]
    Layers(String),
    /// The layer is larger than any plugin the host takes ([`MAX_COMPONENT_BYTES`]).
    #[error("the component layer of {0} bytes is over the limit of {MAX_COMPONENT_BYTES} bytes")]
    TooLarge(i64),
}

/// The largest component the host pulls (the Python example, the largest, is 18 MB): a
/// registry cannot make the host allocate whatever its manifest or its body claims.
pub const MAX_COMPONENT_BYTES: usize = 256 << 20;

/// The layer, config and manifest that publish `wasm` as a Wasm OCI artifact.
pub(crate) fn build(
    wasm: Vec<u8>,
    file_name: &str,
    meta: &Metadata,
) -> (ImageLayer, Config, OciImageManifest) {
    let layer = ImageLayer::new(
        wasm,
        LAYER_MEDIA_TYPE.to_owned(),
        Some(BTreeMap::from([(
            ANNOTATION_TITLE.to_owned(),
            file_name.to_owned(),
        )])),
    );
    // No creation time: pushing the same file twice gives the same digest.
    let config = serde_json::json!({
        "architecture": "wasm",
        "os": "wasip2",
        "layerDigests": [layer.sha256_digest()],
    });
    let config = Config::new(
        serde_json::to_vec(&config).unwrap_or_default(),
        CONFIG_MEDIA_TYPE.to_owned(),
        None,
    );
    let mut annotations = BTreeMap::from([
        (ANNOTATION_PLUGIN.to_owned(), meta.name.clone()),
        (ANNOTATION_CONTRACT.to_owned(), meta.contract.clone()),
    ]);
    if let Some(source) = &meta.source {
        annotations.insert(ANNOTATION_SOURCE.to_owned(), source.clone());
    }
    let manifest =
        OciImageManifest::build(std::slice::from_ref(&layer), &config, Some(annotations));
    (layer, config, manifest)
}

/// The component's layer of a Wasm artifact's manifest, refusing anything else.
pub(crate) fn wasm_layer(manifest: &OciImageManifest) -> Result<&OciDescriptor, ArtifactError> {
    if manifest.config.media_type != CONFIG_MEDIA_TYPE {
        return Err(ArtifactError::Config(manifest.config.media_type.clone()));
    }
    match manifest.layers.as_slice() {
        [layer] if layer.media_type == LAYER_MEDIA_TYPE => Ok(layer),
        [] => Err(ArtifactError::Layers("none".to_owned())),
        layers => Err(ArtifactError::Layers(
            layers
                .iter()
                .map(|l| format!("`{}`", l.media_type))
                .collect::<Vec<_>>()
                .join(", "),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_built_artifact_is_recognised_and_others_are_refused() {
        let meta = Metadata {
            name: "pod-diff".into(),
            contract: "kubewasm:controller@0.1.0".into(),
            source: Some("https://example.org/pod-diff".into()),
        };
        let (layer, _, manifest) = build(b"\0asm".to_vec(), "pod-diff.wasm", &meta);
        let found = wasm_layer(&manifest).expect("a wasm artifact");
        assert_eq!(found.digest, layer.sha256_digest());
        let annotations = manifest.annotations.clone().unwrap_or_default();
        assert_eq!(annotations[ANNOTATION_PLUGIN], "pod-diff");
        assert_eq!(
            annotations[ANNOTATION_SOURCE],
            "https://example.org/pod-diff"
        );

        let mut image = manifest.clone();
        image.config.media_type = "application/vnd.oci.image.config.v1+json".into();
        assert!(matches!(wasm_layer(&image), Err(ArtifactError::Config(_))));
        let mut tarball = manifest.clone();
        tarball.layers[0].media_type = "application/vnd.oci.image.layer.v1.tar".into();
        let err = wasm_layer(&tarball).unwrap_err().to_string();
        assert!(err.contains("layer.v1.tar"), "{err}");
        let mut two = manifest;
        two.layers.push(two.layers[0].clone());
        assert!(matches!(wasm_layer(&two), Err(ArtifactError::Layers(_))));
    }
}
