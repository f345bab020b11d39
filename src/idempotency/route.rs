//! Where a service sends a request, whatever its protocol: the status path, passed on as it
//! is, observed, or protected.

use http::{Method, Request};

use crate::settings::Settings;

/// Where a request goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Route {
    /// A question about an intent, which the layer answers itself.
    Status,
    /// Not the layer's: passed on as it came.
    Pass,
    /// Counted and keyed in observe mode, then passed on.
    Observe,
    /// Run once per intent.
    Protect,
}

/// The route of `request`, where `protects` says which methods the protocol protects at
/// all.
pub(crate) fn route<B>(
    settings: &Settings,
    request: &Request<B>,
    protects: impl FnOnce(&Method) -> bool,
) -> Route {
    // In observe mode the status path is the service's, as every other path is.
    if !settings.observe && super::status::asks_status(settings, request) {
        return Route::Status;
    }
    if !protects(request.method()) || !settings.paths.is_protected(request.uri().path()) {
        return Route::Pass;
    }
    match settings.observe {
        true => Route::Observe,
        false => Route::Protect,
    }
}
