//! Setting values: each parsed once, from the file or a flag, with a message that says what
//! would be valid.

use std::net::SocketAddr;
use std::time::Duration;

use http::{HeaderName, Uri};
use serde::{Deserialize, Deserializer};

/// Parses a listening address.
pub fn socket_addr(text: &str) -> Result<SocketAddr, String> {
    text.parse().map_err(|_| {
        format!("`{text}` is not an address to listen on: expected IP:PORT, like 127.0.0.1:3000")
    })
}

/// Parses a duration written for people (`20s`, `1m 30s`, `500ms`).
pub fn duration(text: &str) -> Result<Duration, String> {
    humantime::parse_duration(text).map_err(|error| {
        format!(
            "`{text}` is not a duration ({error}): expected one like \"20s\", \"500ms\" or \"1h\""
        )
    })
}

/// Parses an upstream base URL: `http://HOST:PORT` or `https://HOST:PORT`, with an optional
/// path prefix.
pub fn upstream(text: &str) -> Result<Uri, String> {
    let uri: Uri = text
        .parse()
        .map_err(|_| format!("`{text}` is not a URL: expected one like http://127.0.0.1:8000"))?;
    match uri.scheme_str() {
        Some("http" | "https") => {}
        Some(other) => {
            return Err(format!(
                "`{text}`: the scheme `{other}` is not supported: expected http:// or https://"
            ))
        }
        None => return Err(format!("`{text}` has no scheme: expected http://HOST:PORT")),
    }
    if uri.authority().is_none() {
        return Err(format!("`{text}` has no host: expected http://HOST:PORT"));
    }
    if uri.query().is_some() {
        return Err(format!("`{text}`: an upstream URL takes no query"));
    }
    Ok(uri)
}

/// Parses a header name.
pub fn header_name(text: &str) -> Result<HeaderName, String> {
    HeaderName::from_bytes(text.as_bytes())
        .map_err(|_| format!("`{text}` is not a header name: expected one like x-session-id"))
}

/// Parses a JSON pointer (RFC 6901) into the body.
pub fn pointer(text: &str) -> Result<String, String> {
    text.parse::<tower_idempotency::canonical::JsonPointer>()
        .map(|_| text.to_owned())
        .map_err(|error| format!("{error}: expected a JSON pointer like \"/tool_call_id\""))
}

/// Parses a route prefix: a path that starts with `/`.
pub fn prefix(text: &str) -> Result<String, String> {
    if !text.starts_with('/') || text.contains(['?', '#', ' ']) {
        return Err(format!(
            "`{text}` is not a path prefix: expected one that starts with `/`, like \"/tools\""
        ));
    }
    Ok(text.trim_end_matches('/').to_owned())
}

/// A value read from text in the file, with the parser's message as the file's error (which
/// the TOML reader places at the value's line).
macro_rules! parsed {
    ($name:ident, $ty:ty, $parse:path) => {
        #[derive(Debug, Clone)]
        pub struct $name(pub $ty);

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let text = String::deserialize(deserializer)?;
                $parse(&text).map($name).map_err(serde::de::Error::custom)
            }
        }
    };
}

parsed!(Addr, SocketAddr, socket_addr);
parsed!(Dur, Duration, duration);
parsed!(UpstreamUrl, Uri, upstream);
parsed!(Header, HeaderName, header_name);
parsed!(Pointer, String, pointer);
parsed!(Prefix, String, prefix);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_values_say_what_would_be_valid() {
        assert!(duration("soon").unwrap_err().contains("\"20s\""));
        assert!(socket_addr("localhost").unwrap_err().contains("IP:PORT"));
        assert!(upstream("ftp://api.example.com")
            .unwrap_err()
            .contains("https://"));
        assert!(upstream("127.0.0.1:8000").is_err());
        assert!(header_name("x session")
            .unwrap_err()
            .contains("header name"));
        assert!(pointer("tool_call_id")
            .unwrap_err()
            .contains("JSON pointer"));
        assert!(prefix("tools").unwrap_err().contains("starts with `/`"));
    }

    #[test]
    fn good_values_parse() {
        assert_eq!(duration("1m 30s").unwrap(), Duration::from_secs(90));
        assert_eq!(prefix("/tools/").unwrap(), "/tools");
        assert_eq!(prefix("/").unwrap(), "");
        assert_eq!(
            upstream("http://127.0.0.1:8000/api").unwrap().path(),
            "/api"
        );
        assert!(upstream("https://tools.internal:8443").is_ok());
    }
}
