//! Field selectors: `field=value`, `field==value`, `field!=value`, separated by commas.

use std::fmt;

use crate::ParseError;

/// A parsed field selector; every term must hold. The empty selector matches everything.
///
/// As in the API server, a field the object does not have counts as the empty string, and
/// values may escape `\`, `,` and `=` with a backslash.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct FieldSelector {
    terms: Vec<Term>,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct Term {
    field: String,
    negated: bool,
    value: String,
}

impl FieldSelector {
    /// Parses a selector such as `metadata.name=web,metadata.namespace!=kube-system`.
    pub fn parse(input: &str) -> Result<FieldSelector, ParseError> {
        let mut terms = Vec::new();
        for (start, raw) in split_unescaped_commas(input) {
            if raw.is_empty() {
                continue;
            }
            terms.push(parse_term(input, start, raw)?);
        }
        terms.sort();
        terms.dedup();
        Ok(FieldSelector { terms })
    }

    /// The selector that matches every object.
    pub fn everything() -> FieldSelector {
        FieldSelector::default()
    }

    /// True for the empty selector, which matches every object.
    pub fn is_everything(&self) -> bool {
        self.terms.is_empty()
    }

    /// Whether an object's fields satisfy every term; `lookup(field)` returns the field's value,
    /// `None` meaning the object lacks it (compared as "").
    pub fn matches<'a>(&self, lookup: impl Fn(&str) -> Option<&'a str>) -> bool {
        self.terms.iter().all(|t| {
            let equal = lookup(&t.field).unwrap_or("") == t.value;
            equal != t.negated
        })
    }

    /// The value this selector requires for `field` with `=`, if it has such a term; lets a
    /// server answer `metadata.name=x` with a direct lookup instead of a scan.
    pub fn required_value(&self, field: &str) -> Option<&str> {
        self.terms
            .iter()
            .find(|t| t.field == field && !t.negated)
            .map(|t| t.value.as_str())
    }

    /// The fields this selector mentions, so a server can reject fields it does not support.
    pub fn fields(&self) -> impl Iterator<Item = &str> {
        self.terms.iter().map(|t| t.field.as_str())
    }
}

/// Terms of `input` split at commas not preceded by a backslash, with their byte offsets.
fn split_unescaped_commas(input: &str) -> Vec<(usize, &str)> {
    let mut parts = Vec::new();
    let mut start = 0;
    let mut escaped = false;
    for (i, c) in input.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            ',' => {
                parts.push((start, &input[start..i]));
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push((start, &input[start..]));
    parts
}

fn parse_term(input: &str, start: usize, raw: &str) -> Result<Term, ParseError> {
    let mut escaped = false;
    for (i, c) in raw.char_indices() {
        if escaped {
            escaped = false;
            continue;
        }
        let (negated, op_len) = match c {
            '\\' => {
                escaped = true;
                continue;
            }
            '!' if raw[i..].starts_with("!=") => (true, 2),
            '=' if raw[i..].starts_with("==") => (false, 2),
            '=' => (false, 1),
            _ => continue,
        };
        let field = &raw[..i];
        if field.is_empty() {
            return Err(ParseError::new(input, start, "expected a field name"));
        }
        let value_start = i + op_len;
        let value = unescape(&raw[value_start..]).map_err(|offset| {
            ParseError::new(
                input,
                start + value_start + offset,
                "invalid escape: only \\\\, \\, and \\= are allowed",
            )
        })?;
        return Ok(Term {
            field: field.to_owned(),
            negated,
            value,
        });
    }
    Err(ParseError::new(
        input,
        start,
        format!("{raw:?} has no operator (=, ==, !=)"),
    ))
}

/// Removes backslash escapes; on an invalid escape returns its byte offset.
fn unescape(raw: &str) -> Result<String, usize> {
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.char_indices();
    while let Some((i, c)) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some((_, e @ ('\\' | ',' | '='))) => out.push(e),
            _ => return Err(i),
        }
    }
    Ok(out)
}

fn escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        if matches!(c, '\\' | ',' | '=') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

impl fmt::Display for FieldSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, t) in self.terms.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            let op = if t.negated { "!=" } else { "=" };
            write!(f, "{}{op}{}", t.field, escape(&t.value))?;
        }
        Ok(())
    }
}

impl std::str::FromStr for FieldSelector {
    type Err = ParseError;

    fn from_str(s: &str) -> Result<FieldSelector, ParseError> {
        FieldSelector::parse(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(selector: &str, fields: &[(&str, &str)]) -> bool {
        FieldSelector::parse(selector)
            .unwrap()
            .matches(|f| fields.iter().find(|(k, _)| *k == f).map(|(_, v)| *v))
    }

    #[test]
    fn empty_selector_matches_everything() {
        let s = FieldSelector::parse("").unwrap();
        assert!(s.is_everything());
        assert_eq!(s, FieldSelector::everything());
        assert!(check("", &[]));
    }

    #[test]
    fn equality_and_inequality() {
        let obj = [("metadata.name", "web"), ("metadata.namespace", "default")];
        assert!(check("metadata.name=web", &obj));
        assert!(check("metadata.name==web", &obj));
        assert!(!check("metadata.name=db", &obj));
        assert!(check("metadata.name!=db", &obj));
        assert!(!check("metadata.name!=web", &obj));
        assert!(check("metadata.name=web,metadata.namespace=default", &obj));
        assert!(!check(
            "metadata.name=web,metadata.namespace!=default",
            &obj
        ));
    }

    #[test]
    fn missing_fields_compare_as_empty() {
        assert!(check("spec.nodeName=", &[]));
        assert!(check("spec.nodeName!=node-1", &[]));
        assert!(!check("spec.nodeName=node-1", &[]));
    }

    #[test]
    fn escaped_separators_belong_to_the_value() {
        let s = FieldSelector::parse(r"a=x\,y\=z\\,b!=q").unwrap();
        assert_eq!(s.required_value("a"), Some(r"x,y=z\"));
        assert_eq!(s.to_string(), r"a=x\,y\=z\\,b!=q");
        assert_eq!(FieldSelector::parse(&s.to_string()).unwrap(), s);
    }

    #[test]
    fn required_value_ignores_negated_terms() {
        let s = FieldSelector::parse("metadata.name!=a").unwrap();
        assert_eq!(s.required_value("metadata.name"), None);
        assert_eq!(s.fields().collect::<Vec<_>>(), vec!["metadata.name"]);
    }

    #[test]
    fn malformed_selectors_report_where() {
        for (input, position) in [("name", 0), ("a=b,=c", 4), (r"a=b\x", 3), ("a=b,c", 4)] {
            let err = FieldSelector::parse(input).unwrap_err();
            assert_eq!(err.position, position, "{input}: {err}");
        }
    }
}
