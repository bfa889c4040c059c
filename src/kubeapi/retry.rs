//! How long the API server work waits after a failed pass (the mirror pods'
//! and the admission's): 1 s doubling up to [`RESYNC_PERIOD`], the period
//! at which that work runs anyway.
//!
//! Invariant: pure.

use std::time::Duration;

/// How often every mirror pod is checked again (and its status written
/// when it differs). The Node and its Lease have their own periods
/// (`node_sync`).
pub const RESYNC_PERIOD: Duration = Duration::from_secs(10);

/// After a failed pass: 1 s doubling up to the resync period.
pub fn retry_delay(failures: u32) -> Duration {
    Duration::from_secs(1u64 << failures.saturating_sub(1).min(4)).min(RESYNC_PERIOD)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_delay_doubles_up_to_the_resync_period() {
        let d: Vec<u64> = (1..=6).map(|f| retry_delay(f).as_secs()).collect();
        assert_eq!(d, [1, 2, 4, 8, 10, 10]);
    }
}
