//! The little of Go the API types are written in: a package's imports, its struct types (each
//! field's name, type and tags) and its named types (`type Protocol string`).

use std::collections::HashMap;
use std::path::Path;

use anyhow::{Context, Result, anyhow, bail};

/// A Go type expression, with package-qualified names resolved to import paths.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GoType {
    /// A predeclared type: `string`, `int32`, `bool`, `byte`...
    Builtin(String),
    /// A named type: its package's import path and its name.
    Named {
        package: String,
        name: String,
    },
    Pointer(Box<GoType>),
    Slice(Box<GoType>),
    Map(Box<GoType>, Box<GoType>),
}

/// One field of a struct.
#[derive(Debug, Clone)]
pub struct GoField {
    /// `None` for an embedded field.
    pub name: Option<String>,
    pub ty: GoType,
    /// The raw struct tag (between the backquotes).
    pub tag: String,
}

impl GoField {
    /// The value of `key` in the struct tag.
    pub fn tag_value(&self, key: &str) -> Option<&str> {
        let needle = format!("{key}:\"");
        let start = self.tag.find(&needle)? + needle.len();
        let end = self.tag[start..].find('"')?;
        Some(&self.tag[start..start + end])
    }
}

/// The types of one Go package.
#[derive(Debug, Default)]
pub struct Package {
    pub structs: HashMap<String, Vec<GoField>>,
    /// Struct names in source order (files sorted by name), for a stable output.
    pub order: Vec<String>,
    /// `type Name Underlying` declarations that are not structs.
    pub named: HashMap<String, GoType>,
    /// Structs with a field this parser does not read (generics, function types), and why.
    pub unreadable: HashMap<String, String>,
    /// The `GroupName` constant of `register.go`, if any.
    pub group: Option<String>,
}

/// Reads the Go files of `dir` (not tests, not generated code) as package `import_path`.
pub fn read_package(dir: &Path, import_path: &str) -> Result<Package> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            name.ends_with(".go")
                && !name.ends_with("_test.go")
                && !name.starts_with("zz_generated")
                && !name.contains("generated")
        })
        .collect();
    files.sort();
    let mut package = Package::default();
    for path in files {
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        parse_file(&strip_comments(&text), import_path, &mut package)
            .with_context(|| format!("parsing {}", path.display()))?;
    }
    Ok(package)
}

/// The source without comments; strings and struct tags are kept as they are.
fn strip_comments(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < bytes.len() {
        let rest = &text[i..];
        if rest.starts_with("//") {
            i += rest.find('\n').unwrap_or(rest.len());
        } else if let Some(body) = rest.strip_prefix("/*") {
            let end = body.find("*/").map_or(rest.len(), |e| e + 4);
            i += end;
            out.push(' ');
        } else if let Some(quote @ (b'"' | b'`' | b'\'')) = bytes.get(i).copied() {
            let mut j = i + 1;
            while j < bytes.len() && bytes[j] != quote {
                if quote != b'`' && bytes[j] == b'\\' {
                    j += 1;
                }
                j += 1;
            }
            let end = (j + 1).min(bytes.len());
            out.push_str(&text[i..end]);
            i = end;
        } else {
            let c = rest.chars().next().unwrap_or(' ');
            out.push(c);
            i += c.len_utf8();
        }
    }
    out
}

fn parse_file(text: &str, import_path: &str, package: &mut Package) -> Result<()> {
    let imports = imports(text);
    let lines: Vec<&str> = text.lines().collect();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i].trim();
        i += 1;
        if let Some(value) = line
            .strip_prefix("GroupName = ")
            .or_else(|| line.strip_prefix("const GroupName = "))
        {
            package.group = Some(value.trim().trim_matches('"').to_owned());
            continue;
        }
        let Some(decl) = line.strip_prefix("type ") else {
            continue;
        };
        let mut words = decl.splitn(2, char::is_whitespace);
        let name = words.next().unwrap_or_default().to_owned();
        let rest = words.next().unwrap_or_default().trim();
        if name.contains('[') || name == "(" {
            continue;
        }
        if rest == "struct {" {
            let mut fields = Vec::new();
            let mut unreadable = None;
            loop {
                let Some(field) = lines.get(i) else {
                    bail!("struct {name} does not end");
                };
                i += 1;
                let field = field.trim();
                if field == "}" {
                    break;
                }
                if field.is_empty() {
                    continue;
                }
                match parse_field(field, import_path, &imports) {
                    Ok(field) => fields.push(field),
                    Err(e) => unreadable = Some(format!("`{field}`: {e}")),
                }
            }
            if let Some(why) = unreadable {
                package.unreadable.insert(name.clone(), why);
            }
            package.order.push(name.clone());
            package.structs.insert(name, fields);
        } else if rest == "struct{}" {
            package.order.push(name.clone());
            package.structs.insert(name, Vec::new());
        } else if !rest.starts_with("interface") && !rest.starts_with("func") && !rest.is_empty() {
            let rest = rest.trim_start_matches("= ");
            if let Ok((ty, "")) = parse_type(rest, import_path, &imports) {
                package.named.insert(name, ty);
            }
        }
    }
    Ok(())
}

/// `alias → import path` of a file's imports.
fn imports(text: &str) -> HashMap<String, String> {
    let mut out = HashMap::new();
    let mut add = |spec: &str| {
        let spec = spec.trim();
        let (alias, path) = match spec.rsplit_once(char::is_whitespace) {
            Some((alias, path)) => (Some(alias.trim()), path),
            None => (None, spec),
        };
        let path = path.trim_matches('"');
        if path.is_empty() {
            return;
        }
        let alias = alias.map_or_else(
            || path.rsplit('/').next().unwrap_or(path).to_owned(),
            str::to_owned,
        );
        out.insert(alias, path.to_owned());
    };
    let mut in_block = false;
    for line in text.lines() {
        let line = line.trim();
        if in_block {
            if line == ")" {
                in_block = false;
            } else if !line.is_empty() {
                add(line);
            }
        } else if line == "import (" {
            in_block = true;
        } else if let Some(spec) = line.strip_prefix("import ") {
            add(spec);
        }
    }
    out
}

fn parse_field(
    line: &str,
    import_path: &str,
    imports: &HashMap<String, String>,
) -> Result<GoField> {
    let (decl, tag) = match line.find('`') {
        Some(start) => {
            let end = line[start + 1..]
                .find('`')
                .ok_or_else(|| anyhow!("a tag without its end"))?;
            (&line[..start], line[start + 1..start + 1 + end].to_owned())
        }
        None => (line, String::new()),
    };
    let decl = decl.trim();
    // An embedded field is a type alone: `metav1.TypeMeta`, `*Foo`, `VolumeSource`.
    if let Ok((ty, "")) = parse_type(decl, import_path, imports)
        && !decl.contains(char::is_whitespace)
    {
        return Ok(GoField {
            name: None,
            ty,
            tag,
        });
    }
    let (name, ty) = decl
        .split_once(char::is_whitespace)
        .ok_or_else(|| anyhow!("a field without a type"))?;
    if name.contains(',') {
        bail!("several names in one field");
    }
    let (ty, rest) = parse_type(ty.trim(), import_path, imports)?;
    if !rest.trim().is_empty() {
        bail!("text after the type: `{rest}`");
    }
    Ok(GoField {
        name: Some(name.to_owned()),
        ty,
        tag,
    })
}

const BUILTINS: &[&str] = &[
    "string", "bool", "byte", "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16",
    "uint32", "uint64", "float32", "float64", "rune",
];

/// Parses a type at the start of `text`: the type and the text after it.
fn parse_type<'a>(
    text: &'a str,
    import_path: &str,
    imports: &HashMap<String, String>,
) -> Result<(GoType, &'a str)> {
    if let Some(rest) = text.strip_prefix('*') {
        let (inner, rest) = parse_type(rest, import_path, imports)?;
        return Ok((GoType::Pointer(Box::new(inner)), rest));
    }
    if let Some(rest) = text.strip_prefix("[]") {
        let (inner, rest) = parse_type(rest, import_path, imports)?;
        return Ok((GoType::Slice(Box::new(inner)), rest));
    }
    if let Some(rest) = text.strip_prefix("map[") {
        let (key, rest) = parse_type(rest, import_path, imports)?;
        let rest = rest
            .strip_prefix(']')
            .ok_or_else(|| anyhow!("a map key without `]`"))?;
        let (value, rest) = parse_type(rest, import_path, imports)?;
        return Ok((GoType::Map(Box::new(key), Box::new(value)), rest));
    }
    let end = text
        .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == '.'))
        .unwrap_or(text.len());
    let (word, rest) = text.split_at(end);
    if word.is_empty() {
        bail!("no type at `{text}`");
    }
    let ty = match word.split_once('.') {
        Some((alias, name)) => GoType::Named {
            package: imports
                .get(alias)
                .ok_or_else(|| anyhow!("no import named {alias}"))?
                .clone(),
            name: name.to_owned(),
        },
        None if BUILTINS.contains(&word) => GoType::Builtin(word.to_owned()),
        None => GoType::Named {
            package: import_path.to_owned(),
            name: word.to_owned(),
        },
    };
    Ok((ty, rest))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn structs_fields_and_named_types_are_read() {
        let source = r#"
package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// A comment with `backquotes` and a "string".
type Protocol string

/* a block comment
type Hidden struct {
} */
type Port struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	Name *string `json:"name,omitempty" protobuf:"bytes,1,opt,name=name"`
	Target intstr.IntOrString `json:"target" protobuf:"bytes,2,opt,name=target"`
	Labels map[string][]Protocol `json:"labels" protobuf:"bytes,3,rep,name=labels"`
}
"#;
        let mut package = Package::default();
        parse_file(&strip_comments(source), "k8s.io/api/x/v1", &mut package).unwrap();
        assert_eq!(package.order, ["Port"]);
        assert_eq!(package.named["Protocol"], GoType::Builtin("string".into()));
        let fields = &package.structs["Port"];
        assert_eq!(fields.len(), 4);
        assert_eq!(fields[0].name, None);
        assert_eq!(
            fields[0].ty,
            GoType::Named {
                package: "k8s.io/apimachinery/pkg/apis/meta/v1".into(),
                name: "TypeMeta".into()
            }
        );
        assert_eq!(
            fields[1].tag_value("protobuf"),
            Some("bytes,1,opt,name=name")
        );
        assert!(matches!(fields[1].ty, GoType::Pointer(_)));
        assert_eq!(
            fields[2].ty,
            GoType::Named {
                package: "k8s.io/apimachinery/pkg/util/intstr".into(),
                name: "IntOrString".into()
            }
        );
        let GoType::Map(key, value) = &fields[3].ty else {
            panic!("a map: {:?}", fields[3].ty);
        };
        assert_eq!(**key, GoType::Builtin("string".into()));
        assert!(matches!(**value, GoType::Slice(_)));
    }
}
