//! The engine's tests: on its own, through a dialect of the tests' own (`path`), and through
//! the HTTP layer (`layer`), all on Tokio's paused clock.

mod layer;
mod path;
