//! Where a request's scope comes from: a session header, or a function over the request.

use std::fmt;
use std::sync::Arc;

use http::request::Parts;
use http::HeaderName;

/// The default scope header.
pub const DEFAULT_SCOPE_HEADER: &str = "x-session-id";

/// A user function that names the scope of a request.
pub(crate) type ScopeFn = Arc<dyn Fn(&Parts) -> Option<String> + Send + Sync>;

/// Finds the caller's scope: whose duplicates these are. Two scopes never share an outcome.
#[derive(Clone)]
pub(crate) enum ScopeSource {
    Header(HeaderName),
    Extract(ScopeFn),
    /// This header where the request has it, else the other source.
    #[cfg(feature = "mcp")]
    Preferred(HeaderName, Box<ScopeSource>),
}

impl ScopeSource {
    /// The scope's bytes, or `None` when the request has none (an empty header has none).
    pub(crate) fn scope_of(&self, parts: &Parts) -> Option<Vec<u8>> {
        let scope = match self {
            Self::Header(name) => parts.headers.get(name).map(|v| v.as_bytes().to_vec()),
            Self::Extract(extract) => extract(parts).map(String::into_bytes),
            #[cfg(feature = "mcp")]
            Self::Preferred(name, otherwise) => {
                match parts.headers.get(name).filter(|v| !v.is_empty()) {
                    Some(value) => Some(value.as_bytes().to_vec()),
                    None => return otherwise.scope_of(parts),
                }
            }
        };
        scope.filter(|s| !s.is_empty())
    }

    /// What to tell a caller that sent no scope.
    pub(crate) fn describe(&self) -> String {
        match self {
            Self::Header(name) => format!("the `{name}` header"),
            Self::Extract(_) => "a session or caller identity".to_owned(),
            #[cfg(feature = "mcp")]
            Self::Preferred(name, otherwise) => {
                format!("the `{name}` header or {}", otherwise.describe())
            }
        }
    }
}

impl fmt::Debug for ScopeSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Header(name) => f.debug_tuple("Header").field(name).finish(),
            Self::Extract(_) => f.write_str("Extract(..)"),
            #[cfg(feature = "mcp")]
            Self::Preferred(name, otherwise) => f
                .debug_tuple("Preferred")
                .field(name)
                .field(otherwise)
                .finish(),
        }
    }
}
