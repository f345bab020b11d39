//! The operation part of an intent key: method, path and query.

use std::fmt;

use http::{Method, Uri};
use sha2::Sha256;
use smallvec::SmallVec;

use super::{put_framed, put_framed_joined};

/// Method, path and query of a request, the query's parameters in a stable order.
///
/// Parameters are ordered by name only, so that `?b=1&a=2` and `?a=2&b=1` are one operation
/// while repeated names keep their relative order (`?t=x&t=y` is a list an upstream may read
/// in order).
///
/// ```
/// use http::{Method, Uri};
/// use tower_idempotency::key::Operation;
///
/// let a = Operation::new(&Method::POST, &"/pay?b=1&a=2".parse::<Uri>().unwrap());
/// let b = Operation::new(&Method::POST, &"/pay?a=2&b=1".parse::<Uri>().unwrap());
/// assert_eq!(a, b);
/// assert_eq!(a.to_string(), "POST /pay?a=2&b=1");
/// ```
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Operation {
    method: Method,
    path: String,
    query: Option<String>,
}

impl Operation {
    /// Describes a request's operation.
    pub fn new(method: &Method, uri: &Uri) -> Self {
        let query = uri.query().map(sorted_query);
        Self {
            method: method.clone(),
            path: uri.path().to_owned(),
            query,
        }
    }

    /// The request path.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The request method.
    pub fn method(&self) -> &Method {
        &self.method
    }

    /// Hashes a request's operation (its method, path and ordered query) without copying any
    /// of it: a query's parameters are put in order in place.
    pub(crate) fn hash_request_into(hasher: &mut Sha256, method: &Method, uri: &Uri) {
        put_framed(hasher, method.as_str().as_bytes());
        put_framed(hasher, uri.path().as_bytes());
        let Some(query) = uri.query() else {
            // "no query" and "empty query" are told apart, as an upstream could.
            return put_framed(hasher, b"-");
        };
        // One part: `?`, then the parameters in order, joined by `&`.
        let params = ordered_params(query);
        let mut pieces: SmallVec<[&[u8]; 16]> = SmallVec::with_capacity(params.len() * 2);
        pieces.push(b"?");
        for (n, param) in params.iter().enumerate() {
            if n > 0 {
                pieces.push(b"&");
            }
            pieces.push(param.as_bytes());
        }
        put_framed_joined(hasher, &pieces);
    }
}

/// A query's non-empty parameters ordered by name, repeated names in their order; most
/// queries have a few, kept in place.
fn ordered_params(query: &str) -> SmallVec<[&str; 8]> {
    let mut params: SmallVec<[&str; 8]> = query.split('&').filter(|p| !p.is_empty()).collect();
    params.sort_by_key(|param| param.split('=').next().unwrap_or(param));
    params
}

/// A query's parameters ordered by name, repeated names in their order.
fn sorted_query(query: &str) -> String {
    ordered_params(query).join("&")
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.method, self.path)?;
        if let Some(query) = &self.query {
            write!(f, "?{query}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(uri: &str) -> Operation {
        Operation::new(&Method::POST, &uri.parse::<Uri>().unwrap())
    }

    #[test]
    fn repeated_parameters_keep_their_order() {
        assert_ne!(op("/x?t=1&t=2"), op("/x?t=2&t=1"));
        assert_eq!(op("/x?t=1&a=0&t=2"), op("/x?a=0&t=1&t=2"));
    }

    #[test]
    fn methods_and_paths_are_distinct_operations() {
        assert_ne!(op("/x"), op("/y"));
        assert_ne!(
            Operation::new(&Method::PUT, &"/x".parse::<Uri>().unwrap()),
            op("/x")
        );
    }
}
