//! User code the layer calls (a scope function, a route label, a normalisation hook, a
//! classification rule) may panic. A panic must neither take the request down without an
//! answer nor leave a claim behind: it is caught where the code is called and turned into a
//! value the caller decides on.

use std::panic::{catch_unwind, AssertUnwindSafe};

/// User code panicked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Panic {
    /// What panicked, as the logs and answers name it: `scope_fn`, `route_label`...
    pub(crate) what: &'static str,
}

/// Runs `code`, catching a panic. The panic's message goes wherever the process's panic hook
/// sends it; the layer logs which hook panicked.
pub(crate) fn guarded<T>(what: &'static str, code: impl FnOnce() -> T) -> Result<T, Panic> {
    catch_unwind(AssertUnwindSafe(code)).map_err(|_| {
        tracing::error!(hook = what, "user code panicked; the layer answers for it");
        Panic { what }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_becomes_a_value_that_names_the_hook() {
        assert_eq!(guarded("route_label", || 7), Ok(7));
        let caught = guarded("scope_fn", || -> u8 { panic!("a bug") });
        assert_eq!(caught, Err(Panic { what: "scope_fn" }));
    }
}
