//! What servers declare of their tools, as the `tools/list` answers passing back through the
//! layer told it: kept per server (the authority and path its calls are sent to) and per
//! revision of its listing. A revision ends when the server says its tools changed
//! (`notifications/tools/list_changed`): what it declared before is forgotten, and an answer
//! to a listing asked for before the change is not learnt from.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasher, Hasher};
use std::sync::{Arc, PoisonError, RwLock};

use http::request::Parts;
use http::{header, HeaderMap, Uri};
use serde_json::{Map, Value};

use super::param_headers::{self, ParamHeader};
use crate::key::KeyHasher;

/// Past this many servers, one is forgotten for each new one: a client cannot make the layer
/// hold listings without bound by naming hosts of its own.
const MOST_SERVERS: usize = 256;

/// A server, as the requests for it name it: their authority (or `Host`) and path, hashed
/// with the layer's own random seed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Server(u64);

#[cfg(test)]
impl Server {
    /// A server for tests that need one.
    pub(crate) const TEST: Self = Self(1);
}

/// One revision of a server's listing: the time an answer to a listing asked for in it may be
/// learnt from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Revision {
    server: Server,
    number: u64,
}

impl Revision {
    /// The server whose listing this is.
    pub(crate) fn server(self) -> Server {
        self.server
    }
}

/// One listed tool, as its last listing declared it.
#[derive(Debug, Clone)]
pub(crate) struct ListedTool {
    pub(crate) read_only: bool,
    /// Whether it declares an `outputSchema`, which a result that is not an error must match.
    pub(crate) output_schema: bool,
    pub(crate) param_headers: Arc<[ParamHeader]>,
    /// Its `inputSchema`, kept where the layer checks arguments.
    #[cfg(feature = "contract")]
    pub(crate) arguments: Option<Arc<super::input_schema::ArgumentSchema>>,
}

/// One server's listing, in its current revision.
#[derive(Debug, Clone, Default)]
struct Listing {
    revision: u64,
    tools: HashMap<String, ListedTool>,
    /// Tools the server's listing was read through without naming them.
    unlisted: HashSet<String>,
}

/// The listings of every server a layer serves.
#[derive(Debug, Default)]
pub(crate) struct Listings {
    hasher: KeyHasher,
    servers: RwLock<HashMap<Server, Listing>>,
}

impl Clone for Listings {
    fn clone(&self) -> Self {
        Self {
            hasher: self.hasher,
            servers: RwLock::new(self.read().clone()),
        }
    }
}

impl Listings {
    fn read(&self) -> std::sync::RwLockReadGuard<'_, HashMap<Server, Listing>> {
        self.servers.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, HashMap<Server, Listing>> {
        self.servers.write().unwrap_or_else(PoisonError::into_inner)
    }

    /// The server the request of `parts` is for.
    pub(crate) fn server(&self, parts: &Parts) -> Server {
        self.server_of(&parts.uri, &parts.headers)
    }

    /// The server a request for `uri` with `headers` is for.
    pub(crate) fn server_of(&self, uri: &Uri, headers: &HeaderMap) -> Server {
        let authority = match uri.authority() {
            Some(authority) => authority.as_str().as_bytes(),
            None => headers
                .get(header::HOST)
                .map_or(&[][..], |host| host.as_bytes()),
        };
        let mut hasher = self.hasher.build_hasher();
        // Host names are case-insensitive.
        for byte in authority {
            hasher.write_u8(byte.to_ascii_lowercase());
        }
        hasher.write_u8(0xff);
        hasher.write(uri.path().as_bytes());
        Server(hasher.finish())
    }

    /// What the last listing of `server`'s current revision declared of `tool`.
    pub(crate) fn tool<R>(
        &self,
        server: Server,
        tool: &str,
        read: impl FnOnce(&ListedTool) -> R,
    ) -> Option<R> {
        self.read().get(&server)?.tools.get(tool).map(read)
    }

    /// Whether `server`'s listing was read through without naming `tool`.
    pub(crate) fn is_unlisted(&self, server: Server, tool: &str) -> bool {
        self.read()
            .get(&server)
            .is_some_and(|listing| listing.unlisted.contains(tool))
    }

    /// The revision of `server`'s listing now: an answer to a listing asked for now is
    /// learnt from only while it lasts.
    pub(crate) fn revision(&self, server: Server) -> Revision {
        let number = self
            .read()
            .get(&server)
            .map_or(0, |listing| listing.revision);
        Revision { server, number }
    }

    /// `server` said its tools changed: what it declared is forgotten until it lists them
    /// again.
    pub(crate) fn changed(&self, server: Server) {
        let mut servers = self.write();
        let listing = entry(&mut servers, server);
        listing.revision += 1;
        listing.tools.clear();
        listing.unlisted.clear();
    }

    /// Notes that `server`'s listing does not name `tool`.
    pub(crate) fn learn_unlisted(&self, revision: Revision, tool: &str) {
        let mut servers = self.write();
        let listing = entry(&mut servers, revision.server);
        if listing.revision == revision.number && !listing.tools.contains_key(tool) {
            listing.unlisted.insert(tool.to_owned());
        }
    }

    /// Learns the tools of a `tools/list` result given in `revision`: each listed
    /// tool as it now declares itself, with its `inputSchema` where `arguments` are checked.
    /// A paginated listing only updates the tools it lists; one from an ended revision is
    /// not learnt from.
    pub(crate) fn learn(&self, revision: Revision, result: &Map<String, Value>, arguments: bool) {
        let Some(tools) = result.get("tools").and_then(Value::as_array) else {
            return;
        };
        let mut servers = self.write();
        let listing = entry(&mut servers, revision.server);
        if listing.revision != revision.number {
            return;
        }
        for tool in tools {
            let Some(name) = tool.get("name").and_then(Value::as_str) else {
                continue;
            };
            let schema = tool.get("inputSchema").unwrap_or(&Value::Null);
            #[cfg(feature = "contract")]
            let arguments = arguments
                .then(|| {
                    let known = listing.tools.get(name).and_then(|t| t.arguments.as_ref());
                    super::input_schema::ArgumentSchema::kept(known, schema)
                })
                .flatten();
            #[cfg(not(feature = "contract"))]
            let _ = arguments;
            let listed = ListedTool {
                read_only: tool
                    .pointer("/annotations/readOnlyHint")
                    .and_then(Value::as_bool)
                    == Some(true),
                output_schema: tool
                    .get("outputSchema")
                    .is_some_and(|schema| !schema.is_null()),
                param_headers: param_headers::declared(schema).into(),
                #[cfg(feature = "contract")]
                arguments,
            };
            listing.unlisted.remove(name);
            listing.tools.insert(name.to_owned(), listed);
        }
    }
}

/// `server`'s listing, made room for where it is new.
fn entry(servers: &mut HashMap<Server, Listing>, server: Server) -> &mut Listing {
    if servers.len() >= MOST_SERVERS && !servers.contains_key(&server) {
        if let Some(other) = servers.keys().next().copied() {
            servers.remove(&other);
        }
    }
    servers.entry(server).or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn request(uri: &str, host: Option<&str>) -> Parts {
        let mut request = http::Request::post(uri);
        if let Some(host) = host {
            request = request.header(header::HOST, host);
        }
        request.body(()).unwrap().into_parts().0
    }

    fn read_only(listings: &Listings, server: Server) -> Option<bool> {
        listings.tool(server, "search", |listed| listed.read_only)
    }

    fn listing(read_only: bool) -> Map<String, Value> {
        let tool = json!({"name": "search", "annotations": {"readOnlyHint": read_only}});
        json!({ "tools": [tool] }).as_object().unwrap().clone()
    }

    #[test]
    fn a_server_is_named_by_its_authority_and_path() {
        let listings = Listings::default();
        let one = listings.server(&request("/mcp", Some("tools.example:3000")));
        assert_eq!(
            one,
            listings.server(&request("/mcp", Some("TOOLS.example:3000"))),
            "host names are case-insensitive"
        );
        assert_eq!(
            one,
            listings.server(&request("http://tools.example:3000/mcp", None))
        );
        assert_ne!(
            one,
            listings.server(&request("/mcp", Some("other.example")))
        );
        assert_ne!(
            one,
            listings.server(&request("/other", Some("tools.example:3000")))
        );
    }

    #[test]
    fn each_server_keeps_its_own_listing() {
        let listings = Listings::default();
        let (one, two) = (Server(1), Server(2));
        listings.learn(listings.revision(one), &listing(true), false);
        listings.learn(listings.revision(two), &listing(false), false);
        assert_eq!(read_only(&listings, one), Some(true));
        assert_eq!(read_only(&listings, two), Some(false));
        assert_eq!(read_only(&listings, Server(3)), None);
    }

    #[test]
    fn a_change_forgets_the_listing_and_an_answer_asked_for_before_it_is_not_learnt() {
        let listings = Listings::default();
        let server = Server(1);
        listings.learn(listings.revision(server), &listing(true), false);
        let asked_at = listings.revision(server);
        listings.changed(server);
        assert_eq!(read_only(&listings, server), None, "forgotten");
        listings.learn(asked_at, &listing(true), false);
        assert_eq!(
            read_only(&listings, server),
            None,
            "asked for before the change"
        );
        listings.learn(listings.revision(server), &listing(false), false);
        assert_eq!(read_only(&listings, server), Some(false));
    }

    #[test]
    fn listings_are_kept_for_a_bounded_number_of_servers() {
        let listings = Listings::default();
        for n in 0..(MOST_SERVERS as u64 + 10) {
            listings.learn(listings.revision(Server(n)), &listing(true), false);
        }
        assert_eq!(listings.read().len(), MOST_SERVERS);
    }
}
