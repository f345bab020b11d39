//! The hasher of an intent key once its leading parts (the tag, the scope and the operation)
//! are in, remembered per thread for the last request that hashed them.
//!
//! A session's calls to one tool share those parts, and with a short scope and path they fill
//! the first of the key's three SHA-256 blocks: a copy of the remembered state skips hashing
//! that block again. The state is a function of the parts alone, so a copy gives the very key
//! a fresh hasher would.

use std::cell::RefCell;

use http::{Method, Uri};
use sha2::{Digest, Sha256};

use super::operation::Operation;
use super::{put_framed, INTENT_TAG};

/// Longest scope, method, path and query remembered together: a longer request is hashed
/// from the start each time, so that no caller makes a thread keep much.
const MAX_REMEMBERED: usize = 512;

/// The last leading parts a thread hashed, and the state they left.
struct Last {
    /// The scope, the method, the path and the query, one after another.
    parts: Vec<u8>,
    /// Where the scope, the method and the path end in `parts`.
    ends: [usize; 3],
    /// "No query" and "an empty query" are other operations.
    has_query: bool,
    hasher: Option<Sha256>,
}

impl Last {
    /// The state these parts left, if they are the ones remembered.
    fn state_of(
        &self,
        scope: &[u8],
        method: &[u8],
        path: &[u8],
        query: Option<&str>,
    ) -> Option<&Sha256> {
        let [scope_end, method_end, path_end] = self.ends;
        let same = self.has_query == query.is_some()
            && &self.parts[..scope_end] == scope
            && &self.parts[scope_end..method_end] == method
            && &self.parts[method_end..path_end] == path
            && &self.parts[path_end..] == query.unwrap_or_default().as_bytes();
        self.hasher.as_ref().filter(|_| same)
    }

    fn remember(
        &mut self,
        scope: &[u8],
        method: &[u8],
        path: &[u8],
        query: Option<&str>,
        hasher: &Sha256,
    ) {
        self.parts.clear();
        self.parts.extend_from_slice(scope);
        let scope_end = self.parts.len();
        self.parts.extend_from_slice(method);
        let method_end = self.parts.len();
        self.parts.extend_from_slice(path);
        self.ends = [scope_end, method_end, self.parts.len()];
        self.parts
            .extend_from_slice(query.unwrap_or_default().as_bytes());
        self.has_query = query.is_some();
        self.hasher = Some(hasher.clone());
    }
}

/// A hasher with the key's tag, `scope` and the operation of `method` and `uri` in it.
pub(super) fn leading(scope: &[u8], method: &Method, uri: &Uri) -> Sha256 {
    thread_local! {
        static LAST: RefCell<Last> = const {
            RefCell::new(Last { parts: Vec::new(), ends: [0; 3], has_query: false, hasher: None })
        };
    }
    let (method_bytes, path, query) = (method.as_str().as_bytes(), uri.path(), uri.query());
    let length = scope.len() + method_bytes.len() + path.len() + query.map_or(0, str::len);
    if length > MAX_REMEMBERED {
        return hashed(scope, method, uri);
    }
    LAST.with_borrow_mut(|last| {
        if let Some(state) = last.state_of(scope, method_bytes, path.as_bytes(), query) {
            return state.clone();
        }
        let hasher = hashed(scope, method, uri);
        last.remember(scope, method_bytes, path.as_bytes(), query, &hasher);
        hasher
    })
}

/// The leading parts hashed from the start.
fn hashed(scope: &[u8], method: &Method, uri: &Uri) -> Sha256 {
    let mut hasher = Sha256::new();
    hasher.update(INTENT_TAG);
    put_framed(&mut hasher, scope);
    Operation::hash_request_into(&mut hasher, method, uri);
    hasher
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_remembered_state_is_the_state_hashing_from_the_start_gives() {
        let requests: [(&[u8], Method, &str); 9] = [
            (b"s1", Method::POST, "/tools/send_email"),
            (b"s1", Method::POST, "/tools/send_email"),
            (b"s2", Method::POST, "/tools/send_email"),
            (b"s2", Method::PUT, "/tools/send_email"),
            (b"s2", Method::PUT, "/tools/send_email?"),
            (b"s2", Method::PUT, "/tools/send_email?b=1&a=2"),
            (b"s2", Method::PUT, "/tools/send_email?a=2&b=1"),
            // The same bytes, split between the parts another way.
            (b"s2P", Method::GET, "/x"),
            (b"s2", Method::from_bytes(b"PGET").unwrap(), "/x"),
        ];
        for _ in 0..2 {
            for (scope, method, target) in &requests {
                let uri = target.parse::<Uri>().unwrap();
                let remembered = leading(scope, method, &uri).finalize();
                assert_eq!(
                    remembered,
                    hashed(scope, method, &uri).finalize(),
                    "{target}"
                );
            }
        }
        let long = vec![b'x'; MAX_REMEMBERED + 1];
        let uri = "/x".parse::<Uri>().unwrap();
        assert_eq!(
            leading(&long, &Method::POST, &uri).finalize(),
            hashed(&long, &Method::POST, &uri).finalize()
        );
    }
}
