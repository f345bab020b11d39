//! The contract layer and its builder.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use http::Method;
use tower_layer::Layer;

use super::schemas::{Contracts, OperationContract};
use super::service::Contract;
use crate::settings::DEFAULT_BODY_LIMIT;

/// Validates the JSON arguments of configured operations against versioned JSON Schemas.
///
/// See the [module docs](crate::contract) for an example.
#[derive(Clone)]
#[must_use = "a layer does nothing until it wraps a service"]
pub struct ContractLayer {
    contracts: Arc<Contracts>,
}

/// The schema of an operation does not compile.
#[derive(Debug)]
pub struct InvalidSchema(String);

impl fmt::Display for InvalidSchema {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid JSON Schema: {}", self.0)
    }
}

impl std::error::Error for InvalidSchema {}

impl Default for ContractLayer {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for ContractLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ContractLayer")
            .field("operations", &self.contracts.len())
            .finish_non_exhaustive()
    }
}

impl ContractLayer {
    /// A layer with no contract yet: every request passes.
    pub fn new() -> Self {
        Self {
            contracts: Arc::new(Contracts {
                operations: HashMap::new(),
                body_limit: DEFAULT_BODY_LIMIT,
            }),
        }
    }

    fn contracts_mut(&mut self) -> &mut Contracts {
        Arc::get_mut(&mut self.contracts).expect("a layer is configured before it is cloned")
    }

    /// Requires the JSON body of `method path` to match `schema` (formats such as `email`
    /// are checked). `version` is reported with every refusal.
    ///
    /// # Panics
    ///
    /// If the layer was cloned before it was configured.
    pub fn operation(
        mut self,
        method: Method,
        path: &str,
        version: &str,
        schema: &serde_json::Value,
    ) -> Result<Self, InvalidSchema> {
        let validator = jsonschema::options()
            .should_validate_formats(true)
            .build(schema)
            .map_err(|error| InvalidSchema(error.to_string()))?;
        let contract = OperationContract {
            version: version.to_owned(),
            label: format!("{method} {path}"),
            validator,
        };
        crate::telemetry::schema_series(&contract.label);
        self.contracts_mut()
            .operations
            .entry(method)
            .or_default()
            .insert(path.to_owned(), Arc::new(contract));
        Ok(self)
    }

    /// Largest body validated (default 1 MiB); larger ones get 413, nothing executed.
    ///
    /// # Panics
    ///
    /// If the layer was cloned before it was configured.
    pub fn body_limit(mut self, bytes: usize) -> Self {
        self.contracts_mut().body_limit = bytes;
        self
    }
}

impl<S> Layer<S> for ContractLayer {
    type Service = Contract<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Contract::new(inner, Arc::clone(&self.contracts))
    }
}
