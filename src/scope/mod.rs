//! Where a request's scope comes from: a configured principal (a header a trusted gateway sets,
//! or a function over the request); else the caller's credential, hashed; each narrowed by the
//! session where there is one. A session value alone names only a caller with no credential.
//!
//! A scope is encoded as tagged, length-prefixed parts: the tag names the source (a header and
//! its name, a user function, an MCP session), so no header value can ever encode like a
//! principal, and a principal narrowed by a session can never encode like another pair.

use std::fmt;
use std::sync::Arc;

use http::request::Parts;
use http::HeaderName;
use smallvec::SmallVec;

use crate::key::ScopeHash;
use crate::user_code::{guarded, Panic};

/// The default scope header.
pub const DEFAULT_SCOPE_HEADER: &str = "x-session-id";

/// The header that carries a caller's credential by default.
pub(crate) const DEFAULT_CREDENTIAL_HEADER: HeaderName = http::header::AUTHORIZATION;

/// The headers whose values, hashed, name a caller that no principal names.
pub(crate) type Credentials = Arc<[HeaderName]>;

/// A user function that names the scope of a request.
pub(crate) type ScopeFn = Arc<dyn Fn(&Parts) -> Option<String> + Send + Sync>;

/// Tags of the scope's parts, one per source.
const HEADER: u8 = b'H';
const FUNCTION: u8 = b'F';
const NARROWED: u8 = b'N';
const CREDENTIAL: u8 = b'A';
const SHARED: u8 = b'S';

/// Finds the caller's scope: whose duplicates these are. Two scopes never share an outcome.
#[derive(Clone)]
pub(crate) enum ScopeSource {
    Header(HeaderName),
    Extract(ScopeFn),
    /// The configured principal (required, where there is one), narrowed by a header where
    /// the request has one: the session. A client-chosen header only ever narrows the
    /// principal, never replaces it. Without a principal, the request's credential (the
    /// `credentials` headers' values, hashed) takes its place; a caller that sends no
    /// credential is named by the session alone; one that sends neither shares one scope
    /// with every other such caller where `shared` is on, and has none otherwise.
    Narrowed {
        principal: Option<Box<ScopeSource>>,
        by: HeaderName,
        /// Whether the header narrows the principal; off, the principal alone is the scope.
        narrowed: bool,
        /// The headers that carry a caller's credential, where no principal is configured
        /// (none: a credential names no one).
        credentials: Credentials,
        /// Whether a caller that nothing names shares one scope with every other such caller.
        shared: bool,
    },
}

impl ScopeSource {
    /// The scope of a layer that names no principal: the caller's credential (the
    /// `Authorization` header by default) narrowed by the `session` header where there is one,
    /// else the session alone.
    pub(crate) fn unconfigured(session: HeaderName) -> Self {
        Self::Narrowed {
            principal: None,
            by: session,
            narrowed: true,
            credentials: Arc::new([DEFAULT_CREDENTIAL_HEADER]),
            shared: false,
        }
    }

    /// The scope, or `None` when the request has none (an empty value is none); `Err` when
    /// the user's scope function panicked.
    pub(crate) fn scope_of(&self, parts: &Parts) -> Result<Option<Scope>, ScopeFault> {
        self.scope_in(parts, Narrowing::AsSent)
    }

    /// The hash of the scope a caller is given who sends `value` in the header that names it
    /// (the principal's, where one is configured), with no narrowing: what an operator
    /// purges by. `None` where a function reads the scope, or the value is no header value.
    pub(crate) fn hash_of_value(&self, value: &str) -> Option<ScopeHash> {
        let name = match self {
            Self::Header(name) => name,
            Self::Narrowed {
                principal: Some(principal),
                ..
            } => match &**principal {
                Self::Header(name) => name,
                _ => return None,
            },
            Self::Narrowed {
                principal: None,
                by,
                ..
            } => by,
            Self::Extract(_) => return None,
        };
        let (mut parts, ()) = http::Request::new(()).into_parts();
        let value = http::HeaderValue::from_str(value).ok()?;
        parts.headers.insert(name.clone(), value);
        let scope = self.scope_of(&parts).ok()??;
        Some(ScopeHash::of(&scope))
    }

    /// The share of the caller that sends `value` as its credential (in the first credential
    /// header), whatever session narrows it: what an operator purges a credential by. `None`
    /// where a principal is configured or no credential header is, or the value is no header
    /// value.
    pub(crate) fn share_of_credential(&self, value: &str) -> Option<ScopeHash> {
        let Self::Narrowed {
            principal: None,
            credentials,
            ..
        } = self
        else {
            return None;
        };
        let name = credentials.first()?;
        let (mut parts, ()) = http::Request::new(()).into_parts();
        parts
            .headers
            .insert(name.clone(), http::HeaderValue::from_str(value).ok()?);
        let scope = self.scope_in(&parts, Narrowing::Ignored).ok()??;
        Some(scope.share(ScopeHash::of(&scope)))
    }

    /// The scope, where the narrowing header is read as `narrowing` says: an MCP request of
    /// protocol 2026-07-28 has no session, and a `Mcp-Session-Id` it sends anyway is no
    /// server's, so it names nothing.
    pub(crate) fn scope_in(
        &self,
        parts: &Parts,
        narrowing: Narrowing,
    ) -> Result<Option<Scope>, ScopeFault> {
        let mut bytes = ScopeBytes::new();
        let mut principal_end = None;
        let written = self.write(parts, narrowing, &mut bytes, &mut principal_end)?;
        Ok(written.map(|()| Scope {
            principal_end: principal_end.unwrap_or(bytes.len()),
            bytes,
        }))
    }

    fn write(
        &self,
        parts: &Parts,
        narrowing: Narrowing,
        out: &mut ScopeBytes,
        principal_end: &mut Option<usize>,
    ) -> Result<Option<()>, ScopeFault> {
        Ok(match self {
            Self::Header(name) => {
                let Some(value) = single(parts, name)? else {
                    return Ok(None);
                };
                put(out, HEADER, name.as_str().as_bytes());
                put_nonempty(out, value.as_bytes())
            }
            Self::Extract(extract) => {
                let extracted = guarded("scope_fn", || extract(parts));
                let Some(value) = extracted.map_err(ScopeFault::Panicked)? else {
                    return Ok(None);
                };
                out.push(FUNCTION);
                put_nonempty(out, value.as_bytes())
            }
            Self::Narrowed {
                principal,
                by,
                narrowed,
                credentials,
                shared,
            } => {
                let value = match narrowing {
                    Narrowing::AsSent => single(parts, by)?.map(|v| v.as_bytes()),
                    Narrowing::Ignored => None,
                };
                let value = value.filter(|v| !v.is_empty());
                match principal {
                    Some(principal) => {
                        if principal
                            .write(parts, narrowing, out, principal_end)?
                            .is_none()
                        {
                            return Ok(None);
                        }
                        principal_end.get_or_insert(out.len());
                        if let (Some(value), true) = (value, *narrowed) {
                            put(out, NARROWED, by.as_str().as_bytes());
                            put_nonempty(out, value);
                        }
                        Some(())
                    }
                    None => match (credential(parts, credentials)?, value) {
                        (Some(digest), session) => {
                            put(out, CREDENTIAL, &digest);
                            principal_end.get_or_insert(out.len());
                            if let (Some(value), true) = (session, *narrowed) {
                                put(out, NARROWED, by.as_str().as_bytes());
                                put_nonempty(out, value);
                            }
                            Some(())
                        }
                        (None, Some(value)) => {
                            put(out, NARROWED, by.as_str().as_bytes());
                            put_nonempty(out, value)
                        }
                        (None, None) if *shared => {
                            out.push(SHARED);
                            Some(())
                        }
                        (None, None) => None,
                    },
                }
            }
        })
    }

    /// Whether a caller that no principal names is named by its credential.
    #[cfg(feature = "mcp")]
    pub(crate) fn names_by_credential(&self) -> bool {
        matches!(
            self,
            Self::Narrowed {
                principal: None,
                credentials,
                ..
            } if !credentials.is_empty()
        )
    }

    /// What to tell a caller that sent no scope.
    pub(crate) fn describe(&self) -> String {
        match self {
            Self::Header(name) => format!("the `{name}` header"),
            Self::Extract(_) => "a session or caller identity".to_owned(),
            Self::Narrowed {
                principal: Some(principal),
                ..
            } => principal.describe(),
            Self::Narrowed {
                by, credentials, ..
            } => match &credentials[..] {
                [] => format!("the `{by}` header"),
                [one] => format!("a credential (the `{one}` header) or the `{by}` header"),
                several => {
                    let names: Vec<String> = several.iter().map(|n| format!("`{n}`")).collect();
                    format!(
                        "a credential (one of the {} headers) or the `{by}` header",
                        names.join(", ")
                    )
                }
            },
        }
    }
}

/// Why a request's scope could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ScopeFault {
    /// The user's scope function panicked.
    Panicked(Panic),
    /// A header that names the scope came more than once: no one caller is named (a gateway
    /// in front that appends its value would let the client's first one win).
    Repeated(HeaderName),
}

/// The one value of the header `name`, where the request has it; more than one is a fault.
fn single<'p>(
    parts: &'p Parts,
    name: &HeaderName,
) -> Result<Option<&'p http::HeaderValue>, ScopeFault> {
    let mut values = parts.headers.get_all(name).iter();
    let first = values.next();
    if values.next().is_some() {
        return Err(ScopeFault::Repeated(name.clone()));
    }
    Ok(first)
}

/// Whether a request's narrowing header counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Narrowing {
    /// As the request sends it.
    AsSent,
    /// Not at all.
    Ignored,
}

/// The caller's credential: the values of the `credentials` headers it sends, each with its
/// name, hashed (so that no token is ever kept). `None` where it sends none of them, or only
/// empty ones; a credential header sent twice names no one caller.
fn credential(parts: &Parts, credentials: &[HeaderName]) -> Result<Option<[u8; 32]>, ScopeFault> {
    use sha2::{Digest, Sha256};
    let mut hasher = None;
    for name in credentials {
        let Some(value) = single(parts, name)?.filter(|v| !v.is_empty()) else {
            continue;
        };
        let hasher = hasher.get_or_insert_with(Sha256::new);
        for part in [name.as_str().as_bytes(), value.as_bytes()] {
            hasher.update((part.len() as u64).to_be_bytes());
            hasher.update(part);
        }
    }
    Ok(hasher.map(|hasher| hasher.finalize().into()))
}

/// A scope's encoding, held inline up to a size that covers a header's name and a session id
/// of common length (a UUID's, and more), so that most requests' scopes need no allocation.
type ScopeBytes = SmallVec<[u8; 96]>;

/// A request's scope: its encoded parts, and where the configured principal's parts end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Scope {
    bytes: ScopeBytes,
    principal_end: usize,
}

impl Scope {
    /// Whose part of a bounded store this scope's records count against: the principal
    /// where one is configured (sessions are the client's to mint), else the whole scope,
    /// whose hash `whole` is then the answer, not hashed again.
    pub(crate) fn share(&self, whole: ScopeHash) -> ScopeHash {
        if self.principal_end == self.bytes.len() {
            return whole;
        }
        ScopeHash::of(&self.bytes[..self.principal_end])
    }
}

impl std::ops::Deref for Scope {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        &self.bytes
    }
}

/// Appends a tag and one length-prefixed part.
fn put(out: &mut ScopeBytes, tag: u8, part: &[u8]) {
    out.push(tag);
    out.extend_from_slice(&(part.len() as u64).to_be_bytes());
    out.extend_from_slice(part);
}

/// Appends one length-prefixed part; an empty one means the request has no scope.
fn put_nonempty(out: &mut ScopeBytes, part: &[u8]) -> Option<()> {
    if part.is_empty() {
        return None;
    }
    out.extend_from_slice(&(part.len() as u64).to_be_bytes());
    out.extend_from_slice(part);
    Some(())
}

impl fmt::Debug for ScopeSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Header(name) => f.debug_tuple("Header").field(name).finish(),
            Self::Extract(_) => f.write_str("Extract(..)"),
            Self::Narrowed {
                principal,
                by,
                narrowed,
                credentials,
                shared,
            } => f
                .debug_struct("Narrowed")
                .field("principal", principal)
                .field("by", by)
                .field("narrowed", narrowed)
                .field("credentials", credentials)
                .field("shared", shared)
                .finish(),
        }
    }
}

#[cfg(test)]
mod tests;
