//! Time, in one place: the protocol's clock value ([`Time`], microseconds),
//! the conversions between units, and when the rounds of a chain are due
//! ([`RoundSchedule`], after drand's `common/time.go`: time of round, current
//! round, next round).
//!
//! - A duration is converted here and nowhere else: milliseconds and seconds
//!   to microseconds ([`ms_to_us`], [`US_PER_MS`], [`US_PER_S`],
//!   [`MS_PER_S`]) and a [`Duration`] to microseconds ([`duration_us`]).
//! - A round's time is computed here for every user: the replica's pacing
//!   (microseconds of its clock, `consensus::ReplicaConfig`), chain info
//!   ([`crate::ChainInfo`], Unix seconds), the node's drand API (the round due
//!   now) and `tle` (the first round due at or after a time). The arithmetic
//!   is exact (128 bits); a result outside the caller's integer type is
//!   clamped to it.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::time::Duration;

/// Microseconds in a millisecond.
pub const US_PER_MS: u64 = 1_000;

/// Microseconds in a second.
pub const US_PER_S: u64 = 1_000_000;

/// Milliseconds in a second.
pub const MS_PER_S: u64 = 1_000;

/// `ms` milliseconds in microseconds; `None` past `u64`.
pub fn ms_to_us(ms: u64) -> Option<u64> {
    ms.checked_mul(US_PER_MS)
}

/// `d` in whole microseconds, at most `u64::MAX`.
pub fn duration_us(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// A point in (virtual or real) time, in microseconds since an arbitrary origin.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
pub struct Time(pub u64);

impl Time {
    /// Zero.
    pub const ZERO: Time = Time(0);

    /// `ms` milliseconds.
    pub fn from_millis(ms: u64) -> Time {
        Time(ms.saturating_mul(US_PER_MS))
    }

    /// This time plus `micros` microseconds (saturating).
    pub fn plus_micros(self, micros: u64) -> Time {
        Time(self.0.saturating_add(micros))
    }

    /// This time plus `ms` milliseconds (saturating).
    pub fn plus_millis(self, ms: u64) -> Time {
        self.plus_micros(ms.saturating_mul(US_PER_MS))
    }

    /// This time plus `d` (saturating, whole microseconds).
    pub fn plus(self, d: Duration) -> Time {
        self.plus_micros(duration_us(d))
    }

    /// Microseconds since `earlier` (zero if `earlier` is later).
    pub fn micros_since(self, earlier: Time) -> u64 {
        self.0.saturating_sub(earlier.0)
    }

    /// As fractional milliseconds.
    pub fn as_millis_f64(self) -> f64 {
        self.0 as f64 / US_PER_MS as f64
    }

    /// As fractional seconds.
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / US_PER_S as f64
    }
}

impl fmt::Display for Time {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.3}ms", self.as_millis_f64())
    }
}

/// When the rounds of a chain are due: round 1 at `genesis`, then one round
/// every `period`, both in the caller's unit (Unix seconds for chain info,
/// microseconds of its clock for a replica). A period of zero is a
/// back-to-back chain: its rounds follow each other as fast as they can, and
/// none is due by the clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RoundSchedule {
    /// The time of round 1.
    pub genesis: i128,
    /// Time between two rounds (0: back to back).
    pub period: u64,
}

impl RoundSchedule {
    /// The time at which `round` is due: `genesis + (round - 1) * period`
    /// (`genesis` for rounds 0 and 1).
    pub fn time_of_round(&self, round: u64) -> i128 {
        let since = i128::from(round.saturating_sub(1)).saturating_mul(i128::from(self.period));
        self.genesis.saturating_add(since)
    }

    /// The rounds due by `now` (drand's current round): the last round whose
    /// time is at or before `now`; 0 before genesis and on back-to-back
    /// chains.
    pub fn rounds_due(&self, now: i128) -> u64 {
        if self.period == 0 || now < self.genesis {
            return 0;
        }
        let steps = now.saturating_sub(self.genesis) / i128::from(self.period);
        clamp_u64(steps.saturating_add(1))
    }

    /// The first round not due yet at `now` (drand's next round).
    pub fn next_round(&self, now: i128) -> u64 {
        self.rounds_due(now).saturating_add(1)
    }

    /// The first round due at or after `t` (round 1 for any `t` up to
    /// genesis); `None` on a back-to-back chain, or past `u64::MAX` rounds.
    pub fn round_at_or_after(&self, t: i128) -> Option<u64> {
        if self.period == 0 {
            return None;
        }
        if t <= self.genesis {
            return Some(1);
        }
        let period = i128::from(self.period);
        let steps = t.saturating_sub(self.genesis).saturating_add(period - 1) / period;
        u64::try_from(steps.checked_add(1)?).ok()
    }
}

/// `x` clamped to `u64`.
pub fn clamp_u64(x: i128) -> u64 {
    u64::try_from(x.max(0)).unwrap_or(u64::MAX)
}

/// `x` clamped to `i64`.
pub fn clamp_i64(x: i128) -> i64 {
    i64::try_from(x).unwrap_or(if x < 0 { i64::MIN } else { i64::MAX })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_are_due_one_period_apart_from_genesis() {
        let s = RoundSchedule {
            genesis: 100,
            period: 30,
        };
        assert_eq!(s.time_of_round(0), 100);
        assert_eq!(s.time_of_round(1), 100);
        assert_eq!(s.time_of_round(3), 160);
        assert_eq!(s.rounds_due(99), 0);
        assert_eq!(s.rounds_due(100), 1);
        assert_eq!(s.rounds_due(159), 2);
        assert_eq!(s.rounds_due(160), 3);
        assert_eq!(s.next_round(160), 4);
        assert_eq!(s.round_at_or_after(-5), Some(1));
        assert_eq!(s.round_at_or_after(101), Some(2));
        assert_eq!(s.round_at_or_after(130), Some(2));
        assert_eq!(s.round_at_or_after(131), Some(3));
        for t in 90..400 {
            let r = s.round_at_or_after(t).unwrap();
            assert!(s.time_of_round(r) >= t);
            assert!(r == 1 || s.time_of_round(r - 1) < t, "{t}");
        }
    }

    #[test]
    fn back_to_back_chains_have_no_due_rounds() {
        let s = RoundSchedule {
            genesis: 7,
            period: 0,
        };
        assert_eq!(s.time_of_round(1_000), 7);
        assert_eq!(s.rounds_due(1_000), 0);
        assert_eq!(s.next_round(1_000), 1);
        assert_eq!(s.round_at_or_after(1_000), None);
    }

    #[test]
    fn extremes_clamp_instead_of_overflowing() {
        let s = RoundSchedule {
            genesis: i128::from(u64::MAX),
            period: u64::MAX,
        };
        assert_eq!(clamp_u64(s.time_of_round(u64::MAX)), u64::MAX);
        assert_eq!(clamp_i64(s.time_of_round(u64::MAX)), i64::MAX);
        assert_eq!(clamp_i64(-s.time_of_round(u64::MAX)), i64::MIN);
        assert_eq!(clamp_u64(-1), 0);
        let one = RoundSchedule {
            genesis: i128::from(i64::MIN),
            period: 1,
        };
        assert_eq!(one.rounds_due(i128::from(i64::MAX)), u64::MAX);
        assert_eq!(
            one.round_at_or_after(i128::from(i64::MAX) - 1),
            Some(u64::MAX)
        );
        assert_eq!(one.round_at_or_after(i128::from(i64::MAX)), None);
        assert_eq!(
            RoundSchedule {
                genesis: 0,
                period: 1
            }
            .round_at_or_after(i128::from(u64::MAX)),
            None
        );
        assert_eq!(ms_to_us(u64::MAX), None);
        assert_eq!(duration_us(Duration::MAX), u64::MAX);
        assert_eq!(Time::ZERO.plus(Duration::from_millis(3)), Time(3_000));
    }
}
