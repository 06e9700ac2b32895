//! mimalloc's option numbers, read from the header the static build compiles.
//!
//! `mi_option_t` is a C enum whose members are numbered by position, and mimalloc renumbers
//! them between versions (v3 retired several options in place); the Rust crate names only
//! some, several with v2's numbers. Setting an option by a number written by hand would
//! silently set another option after an upgrade.

/// The number of each member of `typedef enum mi_option_e { ... }` in `header`, in order,
/// up to `_mi_option_last` (the legacy aliases after it are left out).
pub fn parse(header: &str) -> Result<Vec<String>, String> {
    let start = header
        .find("typedef enum mi_option_e")
        .ok_or("no `typedef enum mi_option_e` in the header")?;
    let body = &header[start..];
    let open = body.find('{').ok_or("`mi_option_e` has no `{`")?;
    let close = body.find('}').ok_or("`mi_option_e` has no `}`")?;
    let mut names = Vec::new();
    for line in body[open + 1..close].lines() {
        let code = line.split("//").next().unwrap_or_default();
        for member in code.split(',').map(str::trim).filter(|m| !m.is_empty()) {
            if member == "_mi_option_last" {
                return Ok(names);
            }
            if !member
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_')
            {
                return Err(format!(
                    "`{member}` in `mi_option_e`: only members numbered by position are read"
                ));
            }
            names.push(member.to_owned());
        }
    }
    Err("`mi_option_e` has no `_mi_option_last`".into())
}

/// The number of the option called `name`.
pub fn number(options: &[String], name: &str) -> Result<usize, String> {
    options
        .iter()
        .position(|o| o == name)
        .ok_or_else(|| format!("mimalloc has no option `{name}`"))
}
