//! What every service of this crate writes alike: the accessors of its inner service, as
//! tower-http's services give them, and `Clone` and `Debug` that ask nothing of the store.

/// `get_ref`, `get_mut` and `into_inner` of a service whose inner service `S` is its `inner`
/// field, in an `impl` block of it.
macro_rules! inner_service_accessors {
    () => {
        /// The inner service.
        pub fn get_ref(&self) -> &S {
            &self.inner
        }

        /// The inner service, mutably.
        pub fn get_mut(&mut self) -> &mut S {
            &mut self.inner
        }

        /// Unwraps the inner service.
        pub fn into_inner(self) -> S {
            self.inner
        }
    };
}

/// The accessors of `$service<S, St>`, whose fields are `inner` and `$shared` (an `Arc`), with
/// `Clone` that asks `Clone` of the inner service alone (a derive would ask it of the store
/// too), and `Debug`.
macro_rules! service_parts {
    ($service:ident, $shared:ident) => {
        impl<S, St> $service<S, St> {
            $crate::service_parts::inner_service_accessors!();
        }

        impl<S: Clone, St> Clone for $service<S, St> {
            fn clone(&self) -> Self {
                Self {
                    inner: self.inner.clone(),
                    $shared: std::sync::Arc::clone(&self.$shared),
                }
            }
        }

        impl<S: std::fmt::Debug, St> std::fmt::Debug for $service<S, St> {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct(stringify!($service))
                    .field("inner", &self.inner)
                    .field(stringify!($shared), &self.$shared)
                    .finish()
            }
        }
    };
}

pub(crate) use {inner_service_accessors, service_parts};
