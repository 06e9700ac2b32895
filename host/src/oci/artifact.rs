//! The Wasm OCI artifact layout (CNCF TAG Runtime): a config of media type
//! `application/vnd.wasm.config.v0+json` and exactly one `application/wasm` layer, the
//! component. kubewasm adds annotations saying which plugin it is and for which contract, and
//! may add one layer of [`PRECOMPILED_MEDIA_TYPE`]: the component compiled ahead of time for
//! one engine and target (`kubewasm compile --out`), which hosts that trust it load instead of
//! compiling. kubewasm before this layer existed refuses such an artifact (it took exactly one
//! layer).

use std::collections::BTreeMap;

use oci_client::client::{Config, ImageLayer};
use oci_client::manifest::{OciDescriptor, OciImageManifest};

pub const CONFIG_MEDIA_TYPE: &str = "application/vnd.wasm.config.v0+json";
pub const LAYER_MEDIA_TYPE: &str = "application/wasm";
/// The layer of precompiled code: kubewasm's precompiled format (header naming engine, target
/// and component, then wasmtime's serialized component).
pub const PRECOMPILED_MEDIA_TYPE: &str = "application/vnd.kubewasm.precompiled.v1";
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
    /// Not exactly one layer of type `application/wasm` (and at most one precompiled layer).
    #[error(
        "not a Wasm artifact: it must have exactly one `{LAYER_MEDIA_TYPE}` layer and at most one `{PRECOMPILED_MEDIA_TYPE}` layer, it has {0}"
    )]
    Layers(String),
    /// The layer is larger than any plugin the host takes ([`MAX_COMPONENT_BYTES`]).
    #[error("the component layer of {0} bytes is over the limit of {MAX_COMPONENT_BYTES} bytes")]
    TooLarge(i64),
    /// The precompiled layer is larger than the host takes ([`MAX_PRECOMPILED_BYTES`]).
    #[error(
        "the precompiled layer of {0} bytes is over the limit of {MAX_PRECOMPILED_BYTES} bytes"
    )]
    PrecompiledTooLarge(i64),
}

/// The largest component the host pulls (the Python example, the largest, is 18 MB): a
/// registry cannot make the host allocate whatever its manifest or its body claims.
pub const MAX_COMPONENT_BYTES: usize = 256 << 20;

/// The largest precompiled layer the host pulls: compiled code is larger than its component
/// (2.2 to 3.2 times for pod-diff, sample-controller and configmap-counter-go, measured with
/// `kubewasm compile --out`), so the bound is twice [`MAX_COMPONENT_BYTES`]. Code past it is
/// refused and its component compiled instead.
pub const MAX_PRECOMPILED_BYTES: usize = 512 << 20;

/// The layers, config and manifest that publish `wasm` (and, when given, its precompiled code)
/// as a Wasm OCI artifact.
pub(crate) fn build(
    wasm: Vec<u8>,
    precompiled: Option<Vec<u8>>,
    file_name: &str,
    meta: &Metadata,
) -> (Vec<ImageLayer>, Config, OciImageManifest) {
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
    let mut layers = vec![layer];
    if let Some(code) = precompiled {
        layers.push(ImageLayer::new(
            code,
            PRECOMPILED_MEDIA_TYPE.to_owned(),
            Some(BTreeMap::from([(
                ANNOTATION_TITLE.to_owned(),
                format!("{file_name}.cwasm"),
            )])),
        ));
    }
    let manifest = OciImageManifest::build(&layers, &config, Some(annotations));
    (layers, config, manifest)
}

/// The component's layer of a Wasm artifact's manifest, refusing anything else.
pub(crate) fn wasm_layer(manifest: &OciImageManifest) -> Result<&OciDescriptor, ArtifactError> {
    layers(manifest).map(|(wasm, _)| wasm)
}

/// The precompiled layer of a Wasm artifact's manifest, if it has one.
pub(crate) fn precompiled_layer(
    manifest: &OciImageManifest,
) -> Result<Option<&OciDescriptor>, ArtifactError> {
    layers(manifest).map(|(_, precompiled)| precompiled)
}

/// The component's layer and the precompiled layer, refusing any other layout.
fn layers(
    manifest: &OciImageManifest,
) -> Result<(&OciDescriptor, Option<&OciDescriptor>), ArtifactError> {
    if manifest.config.media_type != CONFIG_MEDIA_TYPE {
        return Err(ArtifactError::Config(manifest.config.media_type.clone()));
    }
    let is = |layer: &OciDescriptor, kind: &str| layer.media_type == kind;
    match manifest.layers.as_slice() {
        [wasm] if is(wasm, LAYER_MEDIA_TYPE) => Ok((wasm, None)),
        [wasm, code] if is(wasm, LAYER_MEDIA_TYPE) && is(code, PRECOMPILED_MEDIA_TYPE) => {
            Ok((wasm, Some(code)))
        }
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
        let (layers, _, manifest) = build(b"\0asm".to_vec(), None, "pod-diff.wasm", &meta);
        let found = wasm_layer(&manifest).expect("a wasm artifact");
        assert_eq!(found.digest, layers[0].sha256_digest());
        assert!(precompiled_layer(&manifest).unwrap().is_none());
        let (with_code, _, both) = build(
            b"\0asm".to_vec(),
            Some(b"code".to_vec()),
            "pod-diff.wasm",
            &meta,
        );
        assert_eq!(wasm_layer(&both).unwrap().digest, layers[0].sha256_digest());
        assert_eq!(
            precompiled_layer(&both).unwrap().map(|l| l.digest.as_str()),
            Some(with_code[1].sha256_digest().as_str())
        );
        let mut swapped = both.clone();
        swapped.layers.reverse();
        assert!(matches!(
            wasm_layer(&swapped),
            Err(ArtifactError::Layers(_))
        ));
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
