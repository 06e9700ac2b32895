//! The User-Agent of the requests the host makes for a plugin, which names the plugin's key, so
//! an API server's audit log attributes each write to the plugin that made it.

use http::header::HeaderValue;

/// The User-Agent of the host's own requests: `kubewasm/VERSION`.
pub const USER_AGENT_VALUE: &str = concat!("kubewasm/", env!("CARGO_PKG_VERSION"));

/// The User-Agent of the requests made for the plugin `name`: `kubewasm/VERSION plugin/NAME`.
/// Bytes of the name that may not stand in a header token (anything but visible ASCII, and
/// `%`) are percent-encoded, so every name gives a valid header that still tells it apart.
pub fn plugin_user_agent(name: &str) -> HeaderValue {
    let mut value = String::with_capacity(USER_AGENT_VALUE.len() + 8 + name.len());
    value.push_str(USER_AGENT_VALUE);
    value.push_str(" plugin/");
    for byte in name.bytes() {
        if byte.is_ascii_graphic() && byte != b'%' {
            value.push(char::from(byte));
        } else {
            value.push_str(&format!("%{byte:02X}"));
        }
    }
    HeaderValue::from_str(&value).unwrap_or_else(|_| HeaderValue::from_static(USER_AGENT_VALUE))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plugin_names_become_valid_user_agents_that_keep_them_apart() {
        let version = env!("CARGO_PKG_VERSION");
        assert_eq!(
            plugin_user_agent("sample-controller").to_str().unwrap(),
            format!("kubewasm/{version} plugin/sample-controller")
        );
        for (name, encoded) in [
            ("two words", "two%20words"),
            ("naïve", "na%C3%AFve"),
            ("50%", "50%25"),
            ("tab\there", "tab%09here"),
        ] {
            let value = plugin_user_agent(name);
            assert_eq!(
                value.to_str().unwrap(),
                format!("kubewasm/{version} plugin/{encoded}"),
                "{name:?}"
            );
        }
    }
}
