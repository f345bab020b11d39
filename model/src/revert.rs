//! The revert switches: known bugs the crate compiles in under `--cfg tower_idempotency_revert`,
//! one picked by `TOWER_IDEMPOTENCY_REVERT`, each with the property the checker must find
//! broken when it bites.

use crate::properties::{Broken, ALWAYS};

/// Each switch, and the `always` property (its bit) the bug it brings back breaks.
pub const SWITCHES: [(&str, u16); 2] = [
    // A completion that takes whoever's lease: a stale owner's write lands.
    ("fencing", Broken::STALE_OWNER_WROTE),
    // An operator's removal that takes a running lease: a second execution starts beside it.
    ("operator-over-lease", Broken::TWO_LEASES),
];

/// The switch this process runs with and the name of the property it must break; none in a
/// build without the switches, or where none is picked.
pub fn chosen() -> Option<(String, &'static str)> {
    if !cfg!(tower_idempotency_revert) {
        return None;
    }
    let name = std::env::var("TOWER_IDEMPOTENCY_REVERT").ok()?;
    let (_, bit) = SWITCHES
        .iter()
        .find(|(switch, _)| *switch == name)
        .unwrap_or_else(|| panic!("TOWER_IDEMPOTENCY_REVERT={name} names no switch"));
    let (property, _) = ALWAYS
        .iter()
        .find(|(_, broken)| broken == bit)
        .expect("each switch breaks an `always` property");
    Some((name, property))
}
