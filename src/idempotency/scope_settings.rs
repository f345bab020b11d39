//! The layer's setters of whose records a request reaches: its scope.

use std::sync::Arc;

use http::request::Parts;
use http::HeaderName;

use super::IdempotencyLayer;
use crate::scope::ScopeSource;

impl<St> IdempotencyLayer<St> {
    /// Takes the scope from this header (default `x-session-id`). A header that a client
    /// chooses is no authentication: behind an authenticating proxy, name the header the
    /// proxy sets (`x-user`), or take the principal with [`scope_fn`](Self::scope_fn).
    pub fn scope_header(self, name: HeaderName) -> Self {
        self.set(|s| {
            s.scope = ScopeSource::Header(name);
            s.scope_configured = true;
        })
    }

    /// Takes the scope from the request parts: an authenticated principal from the
    /// extensions, a tenant header. `None` means the request has no scope.
    pub fn scope_fn<F>(self, extract: F) -> Self
    where
        F: Fn(&Parts) -> Option<String> + Send + Sync + 'static,
    {
        self.set(|s| {
            s.scope = ScopeSource::Extract(Arc::new(extract));
            s.scope_configured = true;
        })
    }

    /// Narrows the configured scope by this header where a request has one: the
    /// conversation within an authenticated principal, so that two parallel conversations
    /// never share a result. The header only narrows: a request without it is scoped by the
    /// principal alone, and no value of it can reach another principal's records.
    ///
    /// ```
    /// use http::HeaderName;
    /// use tower_idempotency::IdempotencyLayer;
    ///
    /// let layer = IdempotencyLayer::new()
    ///     .scope_header(HeaderName::from_static("x-user")) // set by the authenticating proxy
    ///     .narrow_scope_by(HeaderName::from_static("x-conversation-id"));
    /// ```
    ///
    /// Without a principal, this names the session header instead of `x-session-id`: it
    /// narrows the caller's credential, and names alone a caller that sends none.
    pub fn narrow_scope_by(self, name: HeaderName) -> Self {
        self.set(|s| {
            if let ScopeSource::Narrowed {
                principal: None,
                by,
                ..
            } = &mut s.scope
            {
                *by = name;
                return;
            }
            let principal = std::mem::replace(&mut s.scope, ScopeSource::Header(name.clone()));
            s.scope = ScopeSource::Narrowed {
                principal: Some(Box::new(principal)),
                by: name,
                narrowed: true,
                credentials: Arc::new([]),
                shared: false,
            };
            s.scope_configured = true;
        })
    }

    /// The headers whose values name a caller where no principal is configured (default
    /// `authorization`): hashed, never kept, and narrowed by the session header where the
    /// request has one. Two callers whose credentials differ never share a record, whatever
    /// session value they send; a caller that sends none of these headers is named by its
    /// session alone. A principal ([`scope_header`](Self::scope_header),
    /// [`scope_fn`](Self::scope_fn)) takes the credential's place.
    ///
    /// ```
    /// use tower_idempotency::IdempotencyLayer;
    ///
    /// let layer = IdempotencyLayer::new().credential_headers(["authorization", "x-api-key"]);
    /// # let _ = layer;
    /// ```
    ///
    /// # Panics
    ///
    /// If a name is not a valid header name.
    pub fn credential_headers<I>(self, names: I) -> Self
    where
        I: IntoIterator,
        I::Item: TryInto<HeaderName>,
    {
        let names: Vec<HeaderName> = names
            .into_iter()
            .map(|name| {
                name.try_into().unwrap_or_else(|_| {
                    panic!("IdempotencyLayer::credential_headers: not a valid header name")
                })
            })
            .collect();
        self.set(|s| {
            if let ScopeSource::Narrowed {
                principal: None,
                credentials,
                ..
            } = &mut s.scope
            {
                *credentials = names.into();
            }
        })
    }

    /// Passes requests without a scope through unprotected, instead of refusing them with 400.
    pub fn pass_through_without_scope(self) -> Self {
        self.set(|s| s.refuse_without_scope = false)
    }
}
