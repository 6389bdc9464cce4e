//! The DKG's timing, built once from a config and read by everyone who needs
//! it: the session (each attempt's phases and its end), the member's
//! resharings (the same phase length), and the simulator's campaign (the
//! DKG's last deadline).

use crate::time::duration_us;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Phases of one attempt before the session gives it up: dealing,
/// complaints, justifications and agreement.
pub const ATTEMPT_PHASES: u64 = 4;

/// Most attempts of a session (each doubles the phase length).
pub const MAX_ATTEMPTS: u32 = 16;

/// How long the DKG's phases wait, and how often it is tried: the first
/// attempt's phases last `phase`, each later attempt's twice as long as the
/// one before, for `max_attempts` attempts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DkgTiming {
    /// Longest wait of each phase for silent members (a phase ends as soon
    /// as everything it waits for is in): the first attempt's in the
    /// session's config, the attempt's own in an attempt's
    /// ([`DkgTiming::for_attempt`]).
    pub phase: Duration,
    /// Attempts before the DKG fails (1 to [`MAX_ATTEMPTS`]; checked with the
    /// config, [`crate::dkg::DkgSettings::validate`]).
    pub max_attempts: u32,
}

impl DkgTiming {
    /// Phases of `phase`, `max_attempts` attempts.
    pub const fn new(phase: Duration, max_attempts: u32) -> Self {
        DkgTiming {
            phase,
            max_attempts,
        }
    }

    /// The phase length of attempt `attempt` (0-based): this one doubled per
    /// attempt (saturating).
    pub fn attempt_phase(&self, attempt: u32) -> Duration {
        self.phase.saturating_mul(1 << attempt.min(MAX_ATTEMPTS))
    }

    /// The timing of attempt `attempt`: its phase length, the same attempts.
    pub fn for_attempt(&self, attempt: u32) -> DkgTiming {
        DkgTiming {
            phase: self.attempt_phase(attempt),
            ..*self
        }
    }

    /// The phase length in microseconds (a resharing's phases are as long
    /// as the genesis DKG's first ones).
    pub fn phase_us(&self) -> u64 {
        duration_us(self.phase)
    }

    /// How long attempt `attempt` may run before the session gives it up, in
    /// microseconds: [`ATTEMPT_PHASES`] of its phases.
    pub fn attempt_us(&self, attempt: u32) -> u64 {
        duration_us(self.attempt_phase(attempt)).saturating_mul(ATTEMPT_PHASES)
    }

    /// The DKG's last deadline after its start, in microseconds: every
    /// attempt given up in turn.
    pub fn bound_us(&self) -> u64 {
        (0..self.max_attempts.min(MAX_ATTEMPTS))
            .map(|a| self.attempt_us(a))
            .fold(0, u64::saturating_add)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phases_double_per_attempt_and_the_bound_sums_the_attempts() {
        let t = DkgTiming::new(Duration::from_millis(5), 3);
        assert_eq!(t.phase_us(), 5_000);
        assert_eq!(
            [0, 1, 2].map(|a| t.for_attempt(a).phase_us()),
            [5_000, 10_000, 20_000]
        );
        assert_eq!(t.attempt_us(1), 40_000);
        assert_eq!(t.bound_us(), 4 * 5_000 * (1 + 2 + 4));
        let huge = DkgTiming::new(Duration::MAX, MAX_ATTEMPTS);
        assert_eq!(huge.for_attempt(40).phase_us(), u64::MAX);
        assert_eq!(huge.for_attempt(3).max_attempts, MAX_ATTEMPTS);
        assert_eq!(huge.bound_us(), u64::MAX);
    }
}
