//! `cargo xtask protobuf-schema`: the protobuf crate's schema tables of the built-in kinds,
//! generated from the Go types of k8s.io/api and k8s.io/apimachinery (their `json` and
//! `protobuf` struct tags), into `protobuf/src/kinds/generated.rs`.
//!
//! A kind is in the table only when every type it reaches has a rendering in the crate (see
//! `field_kind`); the others are listed in the generated file's doc comment with the reason, and
//! the host reads them as JSON.

mod go;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, anyhow, bail};

use go::{GoField, GoType, Package};

const META: &str = "k8s.io/apimachinery/pkg/apis/meta/v1";
const RESOURCE: &str = "k8s.io/apimachinery/pkg/api/resource";
const INTSTR: &str = "k8s.io/apimachinery/pkg/util/intstr";
const RUNTIME: &str = "k8s.io/apimachinery/pkg/runtime";
const TYPES: &str = "k8s.io/apimachinery/pkg/types";

/// The fields holding structs that embed `TypeMeta` below a kind's top level whose `apiVersion`
/// and `kind` the API server sets itself in every answer, so the rendering can write them
/// though protobuf does not carry them: `(package prefix, struct, Go field, apiVersion, kind)`.
///
/// A StatefulSet's claim templates: kube-apiserver's conversion of a StatefulSetSpec from its
/// internal type to apps/v1, v1beta1 and v1beta2 (`pkg/apis/apps/*/conversion.go`) sets each
/// template's to `v1` `PersistentVolumeClaim`, overwriting what a client sent (the conversion
/// into the internal type clears them): kubernetes#87706, in 1.18 and, cherry-picked
/// (kubernetes#87721, February 2020), in 1.17's patch releases from then on. Before 1.17 the
/// reflective conversion set them too; the 1.17 releases before the cherry-pick left them empty
/// (kubernetes#87583), a server the protobuf tables do not match in other ways either.
const SERVER_SET_TYPE_META: &[(&str, &str, &str, &str, &str)] = &[(
    "k8s.io/api/apps/",
    "StatefulSetSpec",
    "VolumeClaimTemplates",
    "v1",
    "PersistentVolumeClaim",
)];

/// Where the generated table goes, relative to the workspace root.
pub const OUTPUT: &str = "protobuf/src/kinds/generated.rs";

/// Parses `--api DIR --apimachinery DIR [--out FILE]`, generates, writes and formats the file.
pub fn run(root: &Path, args: &[String]) -> Result<()> {
    let usage = "usage: cargo xtask protobuf-schema --api DIR --apimachinery DIR [--out FILE]";
    let (mut api, mut machinery, mut out) = (None, None, root.join(OUTPUT));
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        let value = args.next().ok_or_else(|| anyhow!("{usage}"))?;
        match arg.as_str() {
            "--api" => api = Some(PathBuf::from(value)),
            "--apimachinery" => machinery = Some(PathBuf::from(value)),
            "--out" => out = PathBuf::from(value),
            _ => bail!("{usage}"),
        }
    }
    let (Some(api), Some(machinery)) = (api, machinery) else {
        bail!("{usage}");
    };
    let text = generate(&api, &machinery)?;
    std::fs::write(&out, text).with_context(|| format!("writing {}", out.display()))?;
    let status = std::process::Command::new("rustfmt")
        .args(["--edition", "2024"])
        .arg(&out)
        .status()
        .context("running rustfmt")?;
    if !status.success() {
        bail!("rustfmt failed on {}", out.display());
    }
    eprintln!("xtask: wrote {}", out.display());
    Ok(())
}

/// A source tree's revision, for the generated file's header: `git rev-parse HEAD` when it is a
/// checkout, else the `REVISION` file a `git archive` extraction may carry, else "unknown".
fn revision(dir: &Path) -> String {
    std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["rev-parse", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .or_else(|| std::fs::read_to_string(dir.join("REVISION")).ok())
        .map_or_else(|| "unknown".to_owned(), |s| s.trim().to_owned())
}

/// The generated Rust source.
pub fn generate(api: &Path, machinery: &Path) -> Result<String> {
    let mut packages = HashMap::new();
    let mut kind_packages = Vec::new();
    for dir in package_dirs(api)? {
        let rel = dir
            .strip_prefix(api)
            .context("a package outside the tree")?
            .to_string_lossy()
            .replace('\\', "/");
        let import = format!("k8s.io/api/{rel}");
        let package = go::read_package(&dir, &import)?;
        if package.group.is_some() {
            kind_packages.push(import.clone());
        }
        packages.insert(import, package);
    }
    packages.insert(
        META.to_owned(),
        go::read_package(&machinery.join("pkg/apis/meta/v1"), META)?,
    );
    kind_packages.sort();
    let mut generator = Generator {
        packages: &packages,
        messages: BTreeMap::new(),
        order: Vec::new(),
    };
    let mut kinds = Vec::new();
    let mut left_out = Vec::new();
    for import in &kind_packages {
        let package = &packages[import];
        let version = import.rsplit('/').next().unwrap_or_default();
        let api_version = match package.group.as_deref() {
            Some("") | None => version.to_owned(),
            Some(group) => format!("{group}/{version}"),
        };
        for name in &package.order {
            if !is_kind(package, name) {
                continue;
            }
            match generator.message_at(import, name, TypeMetaAt::Envelope) {
                Ok(id) => kinds.push((api_version.clone(), name.clone(), id)),
                Err(reason) => left_out.push((api_version.clone(), name.clone(), reason)),
            }
        }
    }
    // A message that reached a failed one through a cycle was recorded as fine: fail it too.
    loop {
        let failed: HashSet<String> = generator
            .messages
            .iter()
            .filter(|(_, m)| m.result.is_err())
            .map(|(id, _)| id.clone())
            .collect();
        let mut changed = false;
        for message in generator.messages.values_mut() {
            if message.result.is_ok()
                && let Some(bad) = message.uses.iter().find(|u| failed.contains(*u))
            {
                message.result = Err(format!("uses {bad}"));
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    kinds.retain(
        |(api_version, kind, id)| match &generator.messages[id].result {
            Ok(_) => true,
            Err(reason) => {
                left_out.push((api_version.clone(), kind.clone(), reason.clone()));
                false
            }
        },
    );
    kinds.sort();
    left_out.sort();

    // The messages the kinds reach, in the order they were first met.
    let mut reached = HashSet::new();
    let mut stack: Vec<String> = kinds.iter().map(|(_, _, id)| id.clone()).collect();
    while let Some(id) = stack.pop() {
        // The hand-written messages (`OBJECT_META`, `LIST_META`) are not in the map.
        if let Some(message) = generator.messages.get(&id)
            && reached.insert(id.clone())
        {
            stack.extend(message.uses.iter().cloned());
        }
    }

    let mut out = String::new();
    writeln!(
        out,
        "//! @generated by `cargo xtask protobuf-schema` from k8s.io/api {} and \
         k8s.io/apimachinery {}: do not edit.\n//!\n\
         //! The messages of the built-in kinds: each field's protobuf number, its JSON name, how it \
         is\n//! encoded and when `encoding/json` writes it, in the Go struct's order.\n//!\n\
         //! Kinds left out (their types have no rendering here; they are read as JSON):{}",
        revision(api),
        revision(machinery),
        if left_out.is_empty() { " none." } else { "" }
    )?;
    for (api_version, kind, reason) in &left_out {
        writeln!(out, "//! - {api_version} {kind}: {reason}")?;
    }
    let mut body = String::new();
    for id in &generator.order {
        if !reached.contains(id) {
            continue;
        }
        let message = &generator.messages[id];
        let Ok(fields) = &message.result else {
            continue;
        };
        writeln!(
            body,
            "\nstatic {id}: Message = Message {{\n    name: \"{}\",\n    fields: &[",
            message.go_name
        )?;
        for field in fields {
            writeln!(
                body,
                "        f({}, \"{}\", {}, {}),",
                field.number, field.json, field.kind, field.presence
            )?;
        }
        body.push_str("    ],\n};\n");
    }
    // The hand-written messages the tables name.
    let mut imports = vec!["Message", "f"];
    for shared in ["OBJECT_META", "LIST_META"] {
        if body.contains(&format!("&{shared})")) {
            imports.push(shared);
        }
    }
    imports.sort_unstable();
    writeln!(
        out,
        "\nuse crate::schema::Kind::*;\nuse crate::schema::Presence::*;\nuse crate::schema::{{{}}};",
        imports.join(", ")
    )?;
    out.push_str(&body);
    out.push_str(
        "\n/// Every kind with a schema, `(apiVersion, kind, message)`, sorted for a binary search.\n\
         pub static KINDS: &[(&str, &str, &Message)] = &[\n",
    );
    for (api_version, kind, id) in &kinds {
        writeln!(out, "    (\"{api_version}\", \"{kind}\", &{id}),")?;
    }
    out.push_str("];\n");
    Ok(out)
}

/// The directories under `api` that hold a `register.go` (one API group version each).
fn package_dirs(api: &Path) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let mut stack = vec![api.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in
            std::fs::read_dir(&dir).with_context(|| format!("reading {}", dir.display()))?
        {
            let path = entry?.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.file_name().is_some_and(|n| n == "register.go") {
                out.push(dir.clone());
            }
        }
    }
    out.sort();
    Ok(out)
}

/// A top-level kind: a struct embedding `metav1.TypeMeta` with `metav1.ObjectMeta` as
/// `metadata`, and a `<Name>List` beside it.
fn is_kind(package: &Package, name: &str) -> bool {
    let Some(fields) = package.structs.get(name) else {
        return false;
    };
    let named = |f: &GoField, n: &str| {
        f.ty == GoType::Named {
            package: META.into(),
            name: n.into(),
        }
    };
    package.structs.contains_key(&format!("{name}List"))
        && fields
            .iter()
            .any(|f| f.name.is_none() && named(f, "TypeMeta"))
        && fields
            .iter()
            .any(|f| named(f, "ObjectMeta") && json_tag(f).0 == "metadata")
}

/// A field's JSON name (empty for none) and options.
fn json_tag(field: &GoField) -> (String, Vec<String>) {
    let tag = field.tag_value("json").unwrap_or("");
    let mut parts = tag.split(',');
    let name = parts.next().unwrap_or("").to_owned();
    (name, parts.map(str::to_owned).collect())
}

/// How a field renders, as the crate's `schema::Kind` spells it.
#[derive(Debug, Clone)]
enum K {
    Str,
    Int32,
    Int64,
    Bool,
    Bytes,
    Time,
    MicroTime,
    FieldsV1,
    Quantity,
    IntOrString,
    RawExtension,
    Msg(String),
    Strs,
    Bools,
    Quantities,
    Int32s,
    Int64s,
    Msgs(String),
    StrMap,
    BytesMap,
    QuantityMap,
    TimeMap,
    StrsMap,
    MsgMap(String),
    Inline(String),
}

impl K {
    fn repeated(&self) -> bool {
        matches!(
            self,
            K::Strs
                | K::Bools
                | K::Quantities
                | K::Int32s
                | K::Int64s
                | K::Msgs(_)
                | K::StrMap
                | K::BytesMap
                | K::QuantityMap
                | K::TimeMap
                | K::StrsMap
                | K::MsgMap(_)
        )
    }

    /// A Go struct (never dropped by `omitempty`).
    fn is_struct(&self) -> bool {
        matches!(
            self,
            K::Time
                | K::MicroTime
                | K::FieldsV1
                | K::Quantity
                | K::IntOrString
                | K::RawExtension
                | K::Msg(_)
                | K::Inline(_)
        )
    }

    fn message(&self) -> Option<&str> {
        match self {
            K::Msg(m) | K::Msgs(m) | K::MsgMap(m) | K::Inline(m) => Some(m),
            _ => None,
        }
    }

    fn rust(&self) -> String {
        match self {
            K::Msg(m) => format!("Msg(&{m})"),
            K::Msgs(m) => format!("Msgs(&{m})"),
            K::MsgMap(m) => format!("MsgMap(&{m})"),
            K::Inline(m) => format!("Inline(&{m})"),
            other => format!("{other:?}"),
        }
    }
}

struct FieldOut {
    number: u32,
    json: String,
    kind: String,
    presence: &'static str,
}

struct MessageOut {
    go_name: String,
    /// The generated messages its fields name.
    uses: Vec<String>,
    /// Its fields, or why it has no rendering.
    result: std::result::Result<Vec<FieldOut>, String>,
}

/// Where a struct's embedded `TypeMeta` is.
#[derive(Debug, Clone, Copy)]
enum TypeMetaAt {
    /// A kind's own struct: the envelope carries its `TypeMeta`.
    Envelope,
    /// Below the top level, set by the API server to `(apiVersion, kind)` in every answer.
    ServerSet(&'static str, &'static str),
    /// Below the top level, where it is whatever the client sent: no rendering.
    Unknown,
}

struct Generator<'a> {
    packages: &'a HashMap<String, Package>,
    messages: BTreeMap<String, MessageOut>,
    /// Message ids in the order first met.
    order: Vec<String>,
}

/// A Rust static's name for a Go struct: `k8s.io/api/core/v1` `PodSpec` → `CORE_V1_POD_SPEC`.
fn static_name(import: &str, name: &str) -> String {
    let prefix = import
        .strip_prefix("k8s.io/api/")
        .or_else(|| import.strip_prefix("k8s.io/apimachinery/pkg/apis/"))
        .unwrap_or(import);
    let mut out = prefix.replace(['/', '.', '-'], "_").to_uppercase();
    out.push('_');
    let chars: Vec<char> = name.chars().collect();
    for (i, &c) in chars.iter().enumerate() {
        let next_lower = chars.get(i + 1).is_some_and(|n| n.is_lowercase());
        let prev_lower = i > 0 && (chars[i - 1].is_lowercase() || chars[i - 1].is_ascii_digit());
        if i > 0 && c.is_uppercase() && (prev_lower || next_lower) {
            out.push('_');
        }
        out.extend(c.to_uppercase());
    }
    out
}

impl Generator<'_> {
    /// The static of struct `name` of package `import`, generated on first use.
    fn message(&mut self, import: &str, name: &str) -> std::result::Result<String, String> {
        self.message_at(import, name, TypeMetaAt::Unknown)
    }

    /// [`Self::message`] for a struct whose embedded `TypeMeta`, if it has one, is `type_meta`;
    /// one the API server sets is a static of its own (`<struct>_WITH_TYPE_META`).
    fn message_at(
        &mut self,
        import: &str,
        name: &str,
        type_meta: TypeMetaAt,
    ) -> std::result::Result<String, String> {
        let mut id = static_name(import, name);
        let type_meta_type = GoType::Named {
            package: META.into(),
            name: "TypeMeta".into(),
        };
        let embeds_type_meta = self
            .packages
            .get(import)
            .and_then(|p| p.structs.get(name))
            .is_some_and(|fields| {
                fields
                    .iter()
                    .any(|f| f.name.is_none() && f.ty == type_meta_type)
            });
        if embeds_type_meta {
            match type_meta {
                TypeMetaAt::Envelope => {}
                TypeMetaAt::ServerSet(..) => id.push_str("_WITH_TYPE_META"),
                // Not recorded: the same struct as a kind of its own is fine.
                TypeMetaAt::Unknown => {
                    return Err(format!(
                        "{name} embeds TypeMeta below the top level, which protobuf does not \
                         carry and the API server does not set (see SERVER_SET_TYPE_META)"
                    ));
                }
            }
        }
        if let Some(done) = self.messages.get(&id) {
            return done
                .result
                .as_ref()
                .map(|_| id.clone())
                .map_err(Clone::clone);
        }
        let package = self
            .packages
            .get(import)
            .ok_or_else(|| format!("{import} is not a package this generator read"))?;
        if let Some(why) = package.unreadable.get(name) {
            return Err(format!(
                "{name} has a field this generator cannot read: {why}"
            ));
        }
        let fields = package
            .structs
            .get(name)
            .ok_or_else(|| format!("{import}.{name} is not a struct this generator read"))?;
        // Recorded before the fields: a type that reaches itself refers to this static.
        self.messages.insert(
            id.clone(),
            MessageOut {
                go_name: name.to_owned(),
                uses: Vec::new(),
                result: Ok(Vec::new()),
            },
        );
        self.order.push(id.clone());
        let mut uses = Vec::new();
        let result = self.fields(import, name, fields, type_meta, &mut uses);
        let result = result.and_then(|fields| {
            let mut names = HashSet::new();
            for json in self.flattened(&fields) {
                if !names.insert(json.clone()) {
                    return Err(format!("{name} has two JSON members named {json}"));
                }
            }
            Ok(fields)
        });
        let out = self.messages.get_mut(&id).expect("recorded above");
        out.uses = uses;
        out.result = result;
        out.result
            .as_ref()
            .map(|_| id.clone())
            .map_err(Clone::clone)
    }

    /// The JSON member names of `fields`, inlined messages' members included.
    fn flattened(&self, fields: &[FieldOut]) -> Vec<String> {
        let mut out = Vec::new();
        for field in fields {
            match field.kind.strip_prefix("Inline(&") {
                Some(id) => {
                    let id = id.trim_end_matches(')');
                    if let Some(Ok(inner)) = self.messages.get(id).map(|m| &m.result) {
                        out.extend(self.flattened(inner));
                    }
                }
                None if field.kind.starts_with("TypeMeta(") => {
                    out.extend(["kind".to_owned(), "apiVersion".to_owned()]);
                }
                None => out.push(field.json.clone()),
            }
        }
        out
    }

    fn fields(
        &mut self,
        import: &str,
        name: &str,
        fields: &[GoField],
        type_meta_at: TypeMetaAt,
        uses: &mut Vec<String>,
    ) -> std::result::Result<Vec<FieldOut>, String> {
        let mut out = Vec::new();
        for field in fields {
            let go_name = field.name.clone().unwrap_or_else(|| match &field.ty {
                GoType::Named { name, .. } => name.clone(),
                other => format!("{other:?}"),
            });
            let at = |why: String| format!("{name}.{go_name}: {why}");
            let (json, options) = json_tag(field);
            let protobuf = field.tag_value("protobuf").filter(|p| *p != "-");
            if json == "-" {
                if protobuf.is_some() {
                    return Err(at("in protobuf but not in JSON".into()));
                }
                continue;
            }
            let type_meta = GoType::Named {
                package: META.into(),
                name: "TypeMeta".into(),
            };
            // Not in protobuf: the envelope carries the top level's; below it only one the
            // API server sets itself can be written.
            if field.name.is_none() && field.ty == type_meta {
                match type_meta_at {
                    TypeMetaAt::Envelope => continue,
                    TypeMetaAt::ServerSet(api_version, kind) => {
                        out.push(FieldOut {
                            number: 0,
                            json: String::new(),
                            kind: format!("TypeMeta({api_version:?}, {kind:?})"),
                            presence: "Always",
                        });
                        continue;
                    }
                    TypeMetaAt::Unknown => {
                        return Err(at("embeds TypeMeta below the top level".into()));
                    }
                }
            }
            let Some(protobuf) = protobuf else {
                return Err(at("in JSON but not in protobuf".into()));
            };
            // Only the number: k8s.io/api's wire types and labels in these tags are not always those
            // of its generated.proto (`*int32` tagged `bytes`, slices tagged `opt`); the decoder
            // checks each value's wire type against the Go type's.
            let number = protobuf_number(protobuf).map_err(&at)?;
            let inline = field.name.is_none() && json.is_empty();
            let json = if json.is_empty() {
                field.name.clone().unwrap_or_default()
            } else {
                json
            };
            let (kind, pointer) = if inline {
                match self.resolve_alias(&field.ty) {
                    GoType::Named {
                        package,
                        name: inner,
                    } if self.is_struct(&package, &inner) => (
                        K::Inline(self.message(&package, &inner).map_err(&at)?),
                        false,
                    ),
                    other => return Err(at(format!("an embedded {other:?}"))),
                }
            } else if let Some((api_version, kind)) = server_set_type_meta(import, name, &go_name) {
                // A slice of a struct whose `TypeMeta` the API server sets.
                match &field.ty {
                    GoType::Slice(inner) => match &**inner {
                        GoType::Named {
                            package,
                            name: inner,
                        } => (
                            K::Msgs(
                                self.message_at(
                                    package,
                                    inner,
                                    TypeMetaAt::ServerSet(api_version, kind),
                                )
                                .map_err(&at)?,
                            ),
                            false,
                        ),
                        other => return Err(at(format!("a slice of {other:?}"))),
                    },
                    other => return Err(at(format!("a {other:?}, not a slice"))),
                }
            } else {
                self.field_kind(&field.ty).map_err(&at)?
            };
            let omitempty = options.iter().any(|o| o == "omitempty");
            let omitzero = options.iter().any(|o| o == "omitzero");
            let presence = if omitzero {
                match kind {
                    K::Time | K::MicroTime if !pointer => "OmitEmpty",
                    _ if pointer => "Pointer",
                    _ if !kind.is_struct() => "OmitEmpty",
                    _ => return Err(at(format!("omitzero on {kind:?}"))),
                }
            } else if pointer {
                if omitempty { "Pointer" } else { "Nullable" }
            } else if kind.is_struct() || !omitempty {
                "Always"
            } else {
                "OmitEmpty"
            };
            if let Some(message) = kind.message() {
                uses.push(message.to_owned());
            }
            out.push(FieldOut {
                number,
                json,
                kind: kind.rust(),
                presence,
            });
        }
        Ok(out)
    }

    /// `ty` with named non-struct types replaced by what they name (`type A = other.B`).
    fn resolve_alias(&self, ty: &GoType) -> GoType {
        let mut ty = ty.clone();
        for _ in 0..8 {
            let GoType::Named { package, name } = &ty else {
                break;
            };
            match self.packages.get(package).and_then(|p| p.named.get(name)) {
                Some(next) => ty = next.clone(),
                None => break,
            }
        }
        ty
    }

    fn is_struct(&self, import: &str, name: &str) -> bool {
        self.packages
            .get(import)
            .is_some_and(|p| p.structs.contains_key(name))
    }

    /// How a field of Go type `ty` renders, and whether it is a pointer.
    fn field_kind(&mut self, ty: &GoType) -> std::result::Result<(K, bool), String> {
        match ty {
            GoType::Pointer(inner) => match self.field_kind(inner)? {
                (_, true) => Err("a pointer to a pointer".into()),
                (k, false) if k.repeated() || matches!(k, K::Bytes) => {
                    Err(format!("a pointer to {k:?}"))
                }
                (k, false) => Ok((k, true)),
            },
            GoType::Slice(inner) => {
                if matches!(&**inner, GoType::Builtin(b) if b == "byte" || b == "uint8") {
                    return Ok((K::Bytes, false));
                }
                let kind = match self.field_kind(inner)? {
                    (K::Str, false) => K::Strs,
                    (K::Bool, false) => K::Bools,
                    (K::Quantity, false) => K::Quantities,
                    (K::Int32, false) => K::Int32s,
                    (K::Int64, false) => K::Int64s,
                    (K::Msg(m), false) => K::Msgs(m),
                    (k, pointer) => {
                        return Err(format!("a slice of {k:?} (pointers: {pointer})"));
                    }
                };
                Ok((kind, false))
            }
            GoType::Map(key, value) => {
                if !matches!(self.field_kind(key)?, (K::Str, false)) {
                    return Err(format!("a map keyed by {key:?}"));
                }
                let kind = match self.field_kind(value)? {
                    (K::Str, false) => K::StrMap,
                    (K::Bytes, false) => K::BytesMap,
                    (K::Quantity, false) => K::QuantityMap,
                    (K::Time, false) => K::TimeMap,
                    (K::Strs, false) => K::StrsMap,
                    (K::Msg(m), false) => K::MsgMap(m),
                    (k, pointer) => {
                        return Err(format!("a map of {k:?} (pointers: {pointer})"));
                    }
                };
                Ok((kind, false))
            }
            GoType::Builtin(b) => match b.as_str() {
                "string" => Ok((K::Str, false)),
                "bool" => Ok((K::Bool, false)),
                "int32" => Ok((K::Int32, false)),
                "int64" => Ok((K::Int64, false)),
                other => Err(format!("Go type {other}")),
            },
            GoType::Named { package, name } => {
                let special = match (package.as_str(), name.as_str()) {
                    (META, "Time") => Some(K::Time),
                    (META, "MicroTime") => Some(K::MicroTime),
                    (META, "FieldsV1") => Some(K::FieldsV1),
                    (META, "ObjectMeta") => Some(K::Msg("OBJECT_META".into())),
                    (META, "ListMeta") => Some(K::Msg("LIST_META".into())),
                    (RESOURCE, "Quantity") => Some(K::Quantity),
                    (INTSTR, "IntOrString") => Some(K::IntOrString),
                    (RUNTIME, "RawExtension") => Some(K::RawExtension),
                    (TYPES, "UID" | "NodeName") => Some(K::Str),
                    _ => None,
                };
                if let Some(kind) = special {
                    return Ok((kind, false));
                }
                let package_types = self
                    .packages
                    .get(package)
                    .ok_or_else(|| format!("type {package}.{name}"))?;
                if package_types.structs.contains_key(name) {
                    return Ok((K::Msg(self.message(package, name)?), false));
                }
                let underlying = package_types
                    .named
                    .get(name)
                    .ok_or_else(|| format!("type {package}.{name}"))?
                    .clone();
                self.field_kind(&underlying)
            }
        }
    }
}

/// The `(apiVersion, kind)` the API server sets in field `field` of struct `name` of package
/// `import` ([`SERVER_SET_TYPE_META`]).
fn server_set_type_meta(
    import: &str,
    name: &str,
    field: &str,
) -> Option<(&'static str, &'static str)> {
    SERVER_SET_TYPE_META
        .iter()
        .find(|(prefix, s, f, _, _)| import.starts_with(prefix) && *s == name && *f == field)
        .map(|&(_, _, _, api_version, kind)| (api_version, kind))
}

/// `bytes,3,opt,name=x,...` → 3.
fn protobuf_number(tag: &str) -> std::result::Result<u32, String> {
    tag.split(',')
        .nth(1)
        .and_then(|n| n.parse().ok())
        .filter(|n| *n > 0)
        .ok_or_else(|| format!("protobuf tag `{tag}` without a number"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn static_names_split_words() {
        assert_eq!(
            static_name("k8s.io/api/core/v1", "PodSpec"),
            "CORE_V1_POD_SPEC"
        );
        assert_eq!(
            static_name("k8s.io/api/core/v1", "HTTPGetAction"),
            "CORE_V1_HTTP_GET_ACTION"
        );
        assert_eq!(static_name(META, "LabelSelector"), "META_V1_LABEL_SELECTOR");
    }

    #[test]
    fn tags_give_the_field_number() {
        assert_eq!(protobuf_number("bytes,3,rep,name=x,casttype=Y").unwrap(), 3);
        assert!(protobuf_number("bytes").is_err());
        assert!(protobuf_number("varint,0,opt").is_err());
    }
}

#[cfg(test)]
mod generate_tests {
    use super::*;

    /// Writes `text` to `path` under `root`, making its folders.
    pub(super) fn write(root: &Path, path: &str, text: &str) {
        let path = root.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    /// A small k8s.io/api: a kind with every shape the tables have, one the generator cannot
    /// render, and a struct that is not a kind.
    #[test]
    fn kinds_are_generated_and_the_others_listed_with_their_reason() {
        let dir = tempfile::tempdir().unwrap();
        let (api, machinery) = (dir.path().join("api"), dir.path().join("machinery"));
        write(
            &api,
            "widgets/v1/register.go",
            "package v1\n\nconst GroupName = \"example.com\"\n",
        );
        write(
            &api,
            "widgets/v1/types.go",
            r#"package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
)

type Mode string

type Widget struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty" protobuf:"bytes,1,opt,name=metadata"`
	Spec WidgetSpec `json:"spec,omitempty" protobuf:"bytes,2,opt,name=spec"`
}

type WidgetList struct {
	Items []Widget `json:"items" protobuf:"bytes,2,rep,name=items"`
}

type WidgetSpec struct {
	Source `json:",inline" protobuf:"bytes,9,opt,name=source"`
	Mode *Mode `json:"mode" protobuf:"bytes,1,opt,name=mode"`
	Port intstr.IntOrString `json:"port,omitempty" protobuf:"bytes,2,opt,name=port"`
	Limits map[string]resource.Quantity `json:"limits,omitempty" protobuf:"bytes,3,rep,name=limits"`
	Codes []int32 `json:"codes" protobuf:"varint,4,rep,name=codes"`
	Seen metav1.MicroTime `json:"seen,omitempty" protobuf:"bytes,5,opt,name=seen"`
	Blob []byte `json:"blob,omitempty" protobuf:"bytes,6,opt,name=blob"`
	Count *int64 `json:"count,omitempty" protobuf:"bytes,7,opt,name=count"`
	Ignored string `json:"-"`
}

type Source struct {
	Path string `json:"path" protobuf:"bytes,1,opt,name=path"`
}

type Gadget struct {
	metav1.TypeMeta `json:",inline"`
	metadata metav1.ObjectMeta `json:"metadata,omitempty" protobuf:"bytes,1,opt,name=metadata"`
	Ratio float64 `json:"ratio" protobuf:"fixed64,2,opt,name=ratio"`
}

type GadgetList struct {
	Items []Gadget `json:"items" protobuf:"bytes,2,rep,name=items"`
}
"#,
        );
        write(
            &machinery,
            "pkg/apis/meta/v1/types.go",
            "package v1\n\ntype TypeMeta struct {\n}\n",
        );
        let out = generate(&api, &machinery).unwrap();
        for line in [
            "//! - example.com/v1 Gadget: Gadget.Ratio: Go type float64",
            "static WIDGETS_V1_WIDGET_SPEC: Message = Message {",
            r#"f(9, "", Inline(&WIDGETS_V1_SOURCE), Always),"#,
            r#"f(1, "mode", Str, Nullable),"#,
            r#"f(2, "port", IntOrString, Always),"#,
            r#"f(3, "limits", QuantityMap, OmitEmpty),"#,
            r#"f(4, "codes", Int32s, Always),"#,
            r#"f(5, "seen", MicroTime, Always),"#,
            r#"f(6, "blob", Bytes, OmitEmpty),"#,
            r#"f(7, "count", Int64, Pointer),"#,
            r#"f(1, "metadata", Msg(&OBJECT_META), Always),"#,
            r#"("example.com/v1", "Widget", &WIDGETS_V1_WIDGET),"#,
        ] {
            assert!(out.contains(line), "{line} in\n{out}");
        }
        assert!(!out.contains("Ignored") && !out.contains("\"Gadget\", &"));
        assert!(!out.contains("static WIDGETS_V1_GADGET:"));
    }
}

#[cfg(test)]
mod type_meta_tests {
    use super::generate_tests::write;
    use super::*;

    /// A StatefulSetSpec's claim templates get their own message with the `TypeMeta` the API
    /// server sets; the same struct anywhere else below the top level keeps its kind out. Slices
    /// of bools and quantities and maps of structs have renderings.
    #[test]
    fn server_set_type_meta_and_the_newer_field_shapes() {
        let dir = tempfile::tempdir().unwrap();
        let (api, machinery) = (dir.path().join("api"), dir.path().join("machinery"));
        write(
            &api,
            "apps/v1/register.go",
            "package v1\n\nconst GroupName = \"apps\"\n",
        );
        write(
            &api,
            "apps/v1/types.go",
            r#"package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

type Claim struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty" protobuf:"bytes,1,opt,name=metadata"`
	Flags []bool `json:"flags,omitempty" protobuf:"varint,2,rep,name=flags"`
	Sizes []resource.Quantity `json:"sizes,omitempty" protobuf:"bytes,3,rep,name=sizes"`
	Parts map[string]Part `json:"parts,omitempty" protobuf:"bytes,4,rep,name=parts"`
}

type ClaimList struct {
	Items []Claim `json:"items" protobuf:"bytes,2,rep,name=items"`
}

type Part struct {
	Size string `json:"size" protobuf:"bytes,1,opt,name=size"`
}

type StatefulSet struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty" protobuf:"bytes,1,opt,name=metadata"`
	Spec StatefulSetSpec `json:"spec,omitempty" protobuf:"bytes,2,opt,name=spec"`
}

type StatefulSetList struct {
	Items []StatefulSet `json:"items" protobuf:"bytes,2,rep,name=items"`
}

type StatefulSetSpec struct {
	VolumeClaimTemplates []Claim `json:"volumeClaimTemplates,omitempty" protobuf:"bytes,4,rep,name=volumeClaimTemplates"`
}

type Holder struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty" protobuf:"bytes,1,opt,name=metadata"`
	Claims []Claim `json:"claims,omitempty" protobuf:"bytes,2,rep,name=claims"`
}

type HolderList struct {
	Items []Holder `json:"items" protobuf:"bytes,2,rep,name=items"`
}
"#,
        );
        write(
            &machinery,
            "pkg/apis/meta/v1/types.go",
            "package v1\n\ntype TypeMeta struct {\n}\n",
        );
        let out = generate(&api, &machinery).unwrap();
        for line in [
            "//! - apps/v1 Holder: Holder.Claims: Claim embeds TypeMeta below the top level",
            "static APPS_V1_CLAIM_WITH_TYPE_META: Message = Message {",
            r#"f(0, "", TypeMeta("v1", "PersistentVolumeClaim"), Always),"#,
            r#"f(4, "volumeClaimTemplates", Msgs(&APPS_V1_CLAIM_WITH_TYPE_META), OmitEmpty),"#,
            r#"f(2, "flags", Bools, OmitEmpty),"#,
            r#"f(3, "sizes", Quantities, OmitEmpty),"#,
            r#"f(4, "parts", MsgMap(&APPS_V1_PART), OmitEmpty),"#,
            r#"("apps/v1", "Claim", &APPS_V1_CLAIM),"#,
            r#"("apps/v1", "StatefulSet", &APPS_V1_STATEFUL_SET),"#,
        ] {
            assert!(out.contains(line), "{line} in\n{out}");
        }
        // The kind's own message has no TypeMeta field: the envelope carries it.
        let own = out
            .split("static APPS_V1_CLAIM: Message")
            .nth(1)
            .and_then(|rest| rest.split("};").next())
            .expect("the Claim kind's message");
        assert!(!own.contains("TypeMeta"), "{own}");
    }
}
