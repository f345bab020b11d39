//! The two eras of MCP over Streamable HTTP, told apart per request as servers tell them
//! apart, and the rules each puts on what the layer writes.
//!
//! - **Handshake era** (2024-11-05 to 2025-11-25): `initialize`, then `Mcp-Session-Id` and
//!   `MCP-Protocol-Version` on every request. Results have no `resultType`, and a
//!   `structuredContent` is an object.
//! - **Stateless era** (2026-07-28): no handshake and no session; each request carries its
//!   version in `MCP-Protocol-Version` and in `params._meta`, and routing headers
//!   (`Mcp-Method`, `Mcp-Name`) that a server checks against the body. Every result carries
//!   `resultType`.
//!
//! A request's version is its `MCP-Protocol-Version` header, else its `_meta` version, else
//! none: a client of 2025-03-26 or before, which sends no header, is of the handshake era.
//! A version this layer does not know is refused with the protocol's own answer (HTTP 400,
//! `-32022`, the versions it knows), nothing executed, wherever the layer would answer for
//! the server: the SDKs then pick a version from that list by themselves.

use http::HeaderMap;
use serde_json::Value;

/// The header that names a request's protocol version.
pub(crate) const VERSION_HEADER: &str = "mcp-protocol-version";
/// The header that repeats a stateless-era request's method.
pub(crate) const METHOD_HEADER: &str = "mcp-method";
/// The header that repeats a stateless-era request's tool name (or task id).
pub(crate) const NAME_HEADER: &str = "mcp-name";

/// The `_meta` member of a stateless-era request that names its version.
pub(crate) const META_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
/// The `_meta` member of a stateless-era request that names the client's capabilities.
pub(crate) const META_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";

/// The versions of the handshake era, oldest first.
pub(crate) const HANDSHAKE: [&str; 4] = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];
/// The versions of the stateless era.
pub(crate) const STATELESS: [&str; 1] = ["2026-07-28"];

/// JSON-RPC code of a routing header that does not match the body.
pub(crate) const HEADER_MISMATCH: i64 = -32020;
/// JSON-RPC code of a protocol version the receiver does not serve.
pub(crate) const UNSUPPORTED_VERSION: i64 = -32022;

/// The era a request speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Era {
    /// `initialize` and sessions: 2025-11-25 and before.
    Handshake,
    /// Self-contained requests: 2026-07-28.
    Stateless,
}

/// Why the layer will not answer a request for the server: what the server itself would
/// refuse. Nothing is executed; the refusal goes out as HTTP 400 with a JSON-RPC error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Unservable {
    /// A protocol version this layer does not know.
    Version(String),
    /// A routing header missing, sent twice, or not what the body says: which.
    Mismatch(&'static str),
    /// An `Mcp-Param-*` header the tool declares that does not say what its argument says
    /// (missing, sent twice, unreadable, or another value): its name.
    Param(String),
    /// A stateless-era request without the `_meta` members the protocol requires.
    MissingMeta(&'static str),
}

impl Era {
    /// The era of a request with `headers`, whose `_meta` names the version `meta`.
    pub(crate) fn of(headers: &HeaderMap, meta: Option<&str>) -> Result<Self, Unservable> {
        let header = headers
            .get(VERSION_HEADER)
            .map(|v| String::from_utf8_lossy(v.as_bytes()));
        match header.as_deref().or(meta) {
            None => Ok(Self::Handshake),
            Some(version) if HANDSHAKE.contains(&version) => Ok(Self::Handshake),
            Some(version) if STATELESS.contains(&version) => Ok(Self::Stateless),
            Some(version) => Err(Unservable::Version(version.to_owned())),
        }
    }

    /// How a request of this era reads its `Mcp-Session-Id`: as the session it names in the
    /// handshake era; not at all in 2026-07-28, where no server mints or checks one.
    pub(crate) fn narrowing(self) -> crate::scope::Narrowing {
        match self {
            Self::Handshake => crate::scope::Narrowing::AsSent,
            Self::Stateless => crate::scope::Narrowing::Ignored,
        }
    }

    /// Fits a JSON-RPC message the layer writes (its own words, or a kept answer replayed)
    /// to this era: a stateless-era result carries `resultType` (`complete` where it names
    /// none), and a handshake-era result carries nothing its schema rejects (no
    /// `resultType: complete`, no `structuredContent` that is not an object).
    pub(crate) fn fit(self, message: &mut Value) {
        let Some(Value::Object(result)) = message.get_mut("result") else {
            return;
        };
        match self {
            Self::Stateless => {
                result
                    .entry("resultType")
                    .or_insert_with(|| Value::from("complete"));
            }
            Self::Handshake => {
                if result.get("resultType").and_then(Value::as_str) == Some("complete") {
                    result.remove("resultType");
                }
                if result
                    .get("structuredContent")
                    .is_some_and(|content| !content.is_object())
                {
                    result.remove("structuredContent");
                }
            }
        }
    }
}

/// Whether a request's `MCP-Protocol-Version` header and `_meta` version, where it has both,
/// disagree: a server of either era refuses such a request.
pub(crate) fn versions_disagree(headers: &HeaderMap, meta: &RequestMeta) -> bool {
    match (headers.get(VERSION_HEADER), &meta.version) {
        (Some(header), Some(version)) => header.as_bytes() != version.as_bytes(),
        _ => false,
    }
}

/// Checks the routing headers of a stateless-era request the layer answers for the server:
/// `MCP-Protocol-Version` as `_meta` says, `Mcp-Method` as the body's method, and `Mcp-Name`
/// (where `name` is given) as the body's tool name or task id, in the protocol's encoding.
pub(crate) fn check_routing(
    headers: &HeaderMap,
    method: &str,
    name: Option<&str>,
    meta: &RequestMeta,
) -> Result<(), Unservable> {
    for routing in [VERSION_HEADER, METHOD_HEADER, NAME_HEADER] {
        if headers.get_all(routing).iter().nth(1).is_some() {
            return Err(Unservable::Mismatch(routing));
        }
    }
    if meta.version.is_none() {
        return Err(Unservable::MissingMeta(META_VERSION));
    }
    if !meta.has_capabilities {
        return Err(Unservable::MissingMeta(META_CAPABILITIES));
    }
    let header = |name| headers.get(name).and_then(|v| v.to_str().ok());
    if header(VERSION_HEADER) != meta.version.as_deref() {
        return Err(Unservable::Mismatch(VERSION_HEADER));
    }
    if header(METHOD_HEADER) != Some(method) {
        return Err(Unservable::Mismatch(METHOD_HEADER));
    }
    if let Some(name) = name {
        let sent = header(NAME_HEADER)
            .map(str::trim)
            .and_then(decode_header_value);
        if sent.as_deref() != Some(name) {
            return Err(Unservable::Mismatch(NAME_HEADER));
        }
    }
    Ok(())
}

/// A routing header's value: as it is, or, written `=?base64?…?=`, the UTF-8 it encodes
/// (canonical base64 only: padded, nothing outside its alphabet, no stray bits).
pub(crate) fn decode_header_value(value: &str) -> Option<String> {
    let Some(encoded) = value
        .strip_prefix("=?base64?")
        .and_then(|rest| rest.strip_suffix("?="))
    else {
        return Some(value.to_owned());
    };
    use base64::Engine;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .ok()?;
    String::from_utf8(bytes).ok()
}

/// What a request's `params._meta` says of the request itself.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct RequestMeta {
    /// `io.modelcontextprotocol/protocolVersion`.
    pub(crate) version: Option<String>,
    /// Whether `io.modelcontextprotocol/clientCapabilities` is there.
    pub(crate) has_capabilities: bool,
    /// Whether those capabilities name the tasks extension.
    pub(crate) tasks_extension: bool,
    /// `progressToken`: where the caller wants progress, if it does.
    pub(crate) progress_token: Option<Value>,
}

/// The tasks extension's name, in capabilities.
pub(crate) const TASKS_EXTENSION: &str = "io.modelcontextprotocol/tasks";

impl RequestMeta {
    /// Reads a request's `params`.
    pub(crate) fn of(params: Option<&Value>) -> Self {
        let Some(meta) = params.and_then(|p| p.get("_meta")) else {
            return Self::default();
        };
        let capabilities = meta.get(META_CAPABILITIES);
        Self {
            version: meta
                .get(META_VERSION)
                .and_then(Value::as_str)
                .map(str::to_owned),
            has_capabilities: capabilities.is_some_and(Value::is_object),
            tasks_extension: capabilities
                .and_then(|c| c.get("extensions"))
                .and_then(|e| e.get(TASKS_EXTENSION))
                .is_some(),
            progress_token: meta
                .get("progressToken")
                .filter(|token| token.is_string() || token.is_number())
                .cloned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;
    use serde_json::json;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.insert(*name, HeaderValue::from_static(value));
        }
        headers
    }

    #[test]
    fn the_era_is_told_by_the_header_then_by_meta() {
        let none = HeaderMap::new();
        assert_eq!(Era::of(&none, None), Ok(Era::Handshake));
        assert_eq!(Era::of(&none, Some("2026-07-28")), Ok(Era::Stateless));
        let old = headers(&[(VERSION_HEADER, "2025-06-18")]);
        assert_eq!(Era::of(&old, Some("2026-07-28")), Ok(Era::Handshake));
        let new = headers(&[(VERSION_HEADER, "2026-07-28")]);
        assert_eq!(Era::of(&new, None), Ok(Era::Stateless));
        let mut mixed = old.clone();
        mixed.insert(
            VERSION_HEADER,
            HeaderValue::from_bytes(b"2025-\xff").unwrap(),
        );
        assert_eq!(
            Era::of(&mixed, None),
            Err(Unservable::Version("2025-\u{fffd}".to_owned()))
        );
        let meta = RequestMeta {
            version: Some("2026-07-28".to_owned()),
            ..RequestMeta::default()
        };
        assert!(versions_disagree(&old, &meta));
        assert!(!versions_disagree(&new, &meta));
        let unknown = headers(&[(VERSION_HEADER, "2099-01-01")]);
        assert_eq!(
            Era::of(&unknown, None),
            Err(Unservable::Version("2099-01-01".to_owned()))
        );
    }

    #[test]
    fn a_result_is_fitted_to_the_era_it_goes_to() {
        let kept = json!({"id": 1, "result": {"content": [], "structuredContent": [1, 2]}});
        let mut stateless = kept.clone();
        Era::Stateless.fit(&mut stateless);
        assert_eq!(stateless["result"]["resultType"], "complete");
        assert_eq!(stateless["result"]["structuredContent"], json!([1, 2]));
        let mut handshake = stateless.clone();
        Era::Handshake.fit(&mut handshake);
        assert_eq!(handshake, json!({"id": 1, "result": {"content": []}}));
        let mut task = json!({"result": {"resultType": "task"}});
        Era::Stateless.fit(&mut task);
        assert_eq!(task["result"]["resultType"], "task");
        let mut error = json!({"error": {"code": 1}});
        Era::Stateless.fit(&mut error);
        assert!(error.get("result").is_none());
    }

    fn meta() -> RequestMeta {
        RequestMeta {
            version: Some("2026-07-28".to_owned()),
            has_capabilities: true,
            tasks_extension: false,
            progress_token: None,
        }
    }

    #[test]
    fn routing_headers_must_say_what_the_body_says() {
        let good = headers(&[
            (VERSION_HEADER, "2026-07-28"),
            (METHOD_HEADER, "tools/call"),
            (NAME_HEADER, "send_email"),
        ]);
        assert_eq!(
            check_routing(&good, "tools/call", Some("send_email"), &meta()),
            Ok(())
        );
        assert_eq!(
            check_routing(&good, "tools/call", Some("pay"), &meta()),
            Err(Unservable::Mismatch(NAME_HEADER))
        );
        let no_method = headers(&[(VERSION_HEADER, "2026-07-28"), (NAME_HEADER, "x")]);
        assert_eq!(
            check_routing(&no_method, "tools/call", Some("x"), &meta()),
            Err(Unservable::Mismatch(METHOD_HEADER))
        );
        let bare = RequestMeta {
            has_capabilities: false,
            ..meta()
        };
        assert_eq!(
            check_routing(&good, "tools/call", Some("send_email"), &bare),
            Err(Unservable::MissingMeta(META_CAPABILITIES))
        );
    }

    #[test]
    fn a_name_sent_in_base64_is_compared_decoded() {
        let encoded = headers(&[
            (VERSION_HEADER, "2026-07-28"),
            (METHOD_HEADER, "tools/call"),
            (NAME_HEADER, "=?base64?aMOpbGxv?="),
        ]);
        assert_eq!(
            check_routing(&encoded, "tools/call", Some("héllo"), &meta()),
            Ok(())
        );
        assert_eq!(
            decode_header_value("=?base64?YWJj?="),
            Some("abc".to_owned())
        );
        assert_eq!(decode_header_value("=?base64?Y?="), None);
        assert_eq!(decode_header_value("plain"), Some("plain".to_owned()));
    }

    #[test]
    fn meta_names_the_version_and_the_tasks_extension() {
        let params = json!({"_meta": {
            META_VERSION: "2026-07-28",
            META_CAPABILITIES: {"extensions": {TASKS_EXTENSION: {}}},
        }});
        let meta = RequestMeta::of(Some(&params));
        assert_eq!(meta.version.as_deref(), Some("2026-07-28"));
        assert!(meta.has_capabilities && meta.tasks_extension);
        assert_eq!(RequestMeta::of(None), RequestMeta::default());
    }
}
