//! Where a request's scope comes from: a session header, or a function over the request.
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
use crate::user_code::{guarded, Panicked};

/// The default scope header.
pub const DEFAULT_SCOPE_HEADER: &str = "x-session-id";

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
    /// the request has one: in MCP mode the session. A client-chosen header only ever
    /// narrows the principal, never replaces it. Without a principal (MCP mode with no
    /// configured scope), the header alone is the scope; without it either, the request's
    /// credential, hashed, where `credential` is on; else one scope shared by every such
    /// caller, where `shared` is on.
    Narrowed {
        principal: Option<Box<ScopeSource>>,
        by: HeaderName,
        /// Whether the header narrows the principal; off, the principal alone is the scope.
        narrowed: bool,
        /// Whether the `Authorization` header names the caller when nothing else does.
        credential: bool,
        /// Whether a caller that nothing names shares one scope with every other such caller.
        shared: bool,
    },
}

impl ScopeSource {
    /// The scope, or `None` when the request has none (an empty value is none); `Err` when
    /// the user's scope function panicked.
    pub(crate) fn scope_of(&self, parts: &Parts) -> Result<Option<Scope>, ScopeFault> {
        self.scope_in(parts, Narrowing::AsSent)
    }

    /// The scope, where the narrowing header is read as `narrowing` says: an MCP request of
    /// protocol 2026-07-28 has no session, and a `Mcp-Session-Id` it sends anyway is no
    /// server's, so it names nothing.
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
                credential,
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
                    None => match value {
                        Some(value) => {
                            put(out, NARROWED, by.as_str().as_bytes());
                            put_nonempty(out, value)
                        }
                        None => unnamed_caller(parts, out, *credential, *shared)?,
                    },
                }
            }
        })
    }

    /// Whether a caller that neither a principal nor a session names is named by its
    /// `Authorization` credential.
    #[cfg(feature = "mcp")]
    pub(crate) fn names_by_credential(&self) -> bool {
        matches!(
            self,
            Self::Narrowed {
                credential: true,
                ..
            }
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
            Self::Narrowed { by, .. } => format!("the `{by}` header"),
        }
    }
}

/// Why a request's scope could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ScopeFault {
    /// The user's scope function panicked.
    Panicked(Panicked),
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
    #[cfg_attr(not(feature = "mcp"), allow(dead_code, reason = "the MCP mode's"))]
    Ignored,
}

/// The scope of an MCP caller that neither a principal nor a session names: its
/// `Authorization` credential, hashed (so that the token is never kept), where `credential`
/// is on; else the one shared scope, where `shared` is on.
fn unnamed_caller(
    parts: &Parts,
    out: &mut ScopeBytes,
    credential: bool,
    shared: bool,
) -> Result<Option<()>, ScopeFault> {
    use sha2::{Digest, Sha256};
    let token = if credential {
        single(parts, &http::header::AUTHORIZATION)?
    } else {
        None
    };
    let token = token.map(|v| v.as_bytes()).filter(|v| !v.is_empty());
    Ok(match token {
        Some(token) => {
            put(out, CREDENTIAL, &Sha256::digest(token));
            Some(())
        }
        None if shared => {
            out.push(SHARED);
            Some(())
        }
        None => None,
    })
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
                credential,
                shared,
            } => f
                .debug_struct("Narrowed")
                .field("principal", principal)
                .field("by", by)
                .field("narrowed", narrowed)
                .field("credential", credential)
                .field("shared", shared)
                .finish(),
        }
    }
}

#[cfg(test)]
mod tests;
