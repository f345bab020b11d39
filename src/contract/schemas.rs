//! The compiled schemas of every operation with a contract, looked up per request.

use std::collections::HashMap;
use std::sync::Arc;

use http::Method;

/// One operation's schema, compiled, and its version.
pub(crate) struct OperationContract {
    pub(crate) version: String,
    pub(crate) label: String,
    pub(crate) validator: jsonschema::Validator,
}

/// The contracts of every operation, by method and exact path: two levels, so that a request
/// is looked up by its borrowed path, with no key built for it.
pub(crate) struct Contracts {
    pub(crate) operations: HashMap<Method, HashMap<String, Arc<OperationContract>>>,
    pub(crate) body_limit: usize,
}

impl Contracts {
    /// The contract of `method` on `path`, if one is configured.
    pub(crate) fn of(&self, method: &Method, path: &str) -> Option<&Arc<OperationContract>> {
        self.operations.get(method)?.get(path)
    }

    /// How many operations have a contract.
    pub(crate) fn len(&self) -> usize {
        self.operations.values().map(HashMap::len).sum()
    }
}
