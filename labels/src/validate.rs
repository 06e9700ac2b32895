//! Syntax rules for label keys and values (Kubernetes qualified names).

/// Checks a label key: an optional DNS-subdomain prefix and `/`, then a name of at most 63
/// characters. Returns why it is invalid.
pub(crate) fn label_key(key: &str) -> Result<(), String> {
    let (prefix, name) = match key.split_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    if let Some(prefix) = prefix {
        if prefix.is_empty() || prefix.len() > 253 {
            return Err(format!("key prefix {prefix:?} must be 1-253 characters"));
        }
        let valid_label = |part: &str| {
            !part.is_empty()
                && part.len() <= 63
                && part
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !part.starts_with('-')
                && !part.ends_with('-')
        };
        if !prefix.split('.').all(valid_label) {
            return Err(format!("key prefix {prefix:?} must be a DNS subdomain"));
        }
    }
    if name.is_empty() {
        return Err(format!("key {key:?} has an empty name"));
    }
    name_part(name).map_err(|why| format!("key {key:?}: {why}"))
}

/// Checks a label value: empty, or at most 63 alphanumerics, `-`, `_`, `.`, starting and ending
/// with an alphanumeric.
pub(crate) fn label_value(value: &str) -> Result<(), String> {
    if value.is_empty() {
        return Ok(());
    }
    name_part(value).map_err(|why| format!("value {value:?}: {why}"))
}

fn name_part(s: &str) -> Result<(), String> {
    if s.len() > 63 {
        return Err("must be at most 63 characters".to_owned());
    }
    let bytes = s.as_bytes();
    let inner_ok = bytes
        .iter()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    let ends_ok = bytes.first().is_some_and(u8::is_ascii_alphanumeric)
        && bytes.last().is_some_and(u8::is_ascii_alphanumeric);
    if inner_ok && ends_ok {
        Ok(())
    } else {
        Err("must consist of alphanumerics, '-', '_' or '.', and start and end with an alphanumeric"
            .to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_with_dns_prefix_are_valid() {
        assert!(label_key("app.kubernetes.io/name").is_ok());
        assert!(label_key("app").is_ok());
        assert!(label_key("A_b.c-D").is_ok());
    }

    #[test]
    fn malformed_keys_are_rejected() {
        assert!(label_key("").is_err());
        assert!(label_key("/name").is_err());
        assert!(label_key("Example.com/name").is_err());
        assert!(label_key("example.com/").is_err());
        assert!(label_key("-app").is_err());
        assert!(label_key(&"a".repeat(64)).is_err());
    }

    #[test]
    fn values_may_be_empty_but_not_malformed() {
        assert!(label_value("").is_ok());
        assert!(label_value("v1.2_3-x").is_ok());
        assert!(label_value("-x").is_err());
        assert!(label_value("a b").is_err());
    }
}
