//! Time, in one place: the protocol's clock value ([`Time`], microseconds),
//! the conversions between units, and when the rounds of a chain are due
//! ([`RoundSchedule`], after drand's `common/time.go`: time of round, current
//! round, next round).
//!
//! - A duration is converted here and nowhere else: milliseconds and seconds
//!   to microseconds ([`ms_to_us`], [`secs_to_us`], [`US_PER_MS`],
//!   [`US_PER_S`], [`MS_PER_S`]) and a [`Duration`] to microseconds
//!   ([`duration_us`]).
//! - The beacon period is one typed value, [`Period`] (microseconds), from
//!   the milliseconds of a `[protocol]` table ([`Period::from_millis`], and
//!   [`period_ms`] for the key itself) or the seconds of chain info
//!   ([`Period::from_secs`]), back to whole seconds where the wire wants them
//!   ([`Period::as_secs`], checked).
//! - A round's time is computed here for every user: the replica's pacing
//!   (microseconds of its clock, `consensus::ReplicaConfig`), chain info
//!   ([`crate::ChainInfo`], Unix seconds), the node's drand API (the round due
//!   now) and `tle` (the first round due at or after a time). The arithmetic
//!   is exact (128 bits); a result outside the caller's integer type is
//!   clamped to it.

pub use crate::error::PeriodError;
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

/// `s` seconds in microseconds; `None` past `u64`.
pub fn secs_to_us(s: u64) -> Option<u64> {
    s.checked_mul(US_PER_S)
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

    /// Fractional milliseconds from `earlier` to this time, negative if
    /// `earlier` is later (how late a beacon came after its round's time).
    pub fn millis_after_f64(self, earlier: Time) -> f64 {
        (self.0 as f64 - earlier.0 as f64) / US_PER_MS as f64
    }
}

impl fmt::Display for Time {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.3}ms", self.as_millis_f64())
    }
}

/// The time between two rounds of a chain, in microseconds (zero: a
/// back-to-back chain, whose rounds follow each other as fast as they can).
///
/// Its one home: a `[protocol]` table writes it in milliseconds
/// (`period_ms`, read through [`period_ms`]), chain info in whole seconds
/// (drand's `period`, [`Period::from_secs`] and [`Period::as_secs`]), the
/// replica keeps microseconds. It serializes as its microseconds.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct Period(u64);

impl Period {
    /// No period: back-to-back rounds.
    pub const ZERO: Period = Period(0);

    /// `us` microseconds.
    pub const fn from_micros(us: u64) -> Period {
        Period(us)
    }

    /// `ms` milliseconds; an error past `u64` microseconds.
    pub fn from_millis(ms: u64) -> Result<Period, PeriodError> {
        ms_to_us(ms).map(Period).ok_or(PeriodError::TooLong { ms })
    }

    /// `s` seconds, as chain info counts them (every `u32` fits).
    pub const fn from_secs(s: u32) -> Period {
        Period(s as u64 * US_PER_S)
    }

    /// Whether this is no period (back-to-back rounds).
    pub const fn is_zero(self) -> bool {
        self.0 == 0
    }

    /// Its microseconds.
    pub const fn as_micros(self) -> u64 {
        self.0
    }

    /// Its whole milliseconds; an error if it is not whole milliseconds.
    pub fn as_millis(self) -> Result<u64, PeriodError> {
        if self.0 % US_PER_MS != 0 {
            return Err(PeriodError::NotWholeMillis { period: self });
        }
        Ok(self.0 / US_PER_MS)
    }

    /// Its whole seconds, as chain info publishes them (drand's `period`);
    /// an error if it is not whole seconds or has more than a `u32` holds.
    pub fn as_secs(self) -> Result<u32, PeriodError> {
        if self.0 % US_PER_S != 0 {
            return Err(PeriodError::NotWholeSeconds { period: self });
        }
        u32::try_from(self.0 / US_PER_S).map_err(|_| PeriodError::TooManySeconds { period: self })
    }

    /// As a [`Duration`].
    pub const fn as_duration(self) -> Duration {
        Duration::from_micros(self.0)
    }
}

impl fmt::Display for Period {
    /// In the largest unit that holds it whole: `3s`, `1500ms`, `250us`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0 % US_PER_S == 0 {
            write!(f, "{}s", self.0 / US_PER_S)
        } else if self.0 % US_PER_MS == 0 {
            write!(f, "{}ms", self.0 / US_PER_MS)
        } else {
            write!(f, "{}us", self.0)
        }
    }
}

/// Serde for a [`Period`] written in milliseconds (a `[protocol]` table's
/// `period_ms`): `#[serde(rename = "period_ms", with = "beacon::time::period_ms")]`.
/// A value too large for microseconds is refused when read; one that is not
/// whole milliseconds is refused when written.
pub mod period_ms {
    use super::Period;
    use serde::{de, ser, Deserialize, Deserializer, Serializer};

    /// Writes `period` as whole milliseconds.
    pub fn serialize<S: Serializer>(period: &Period, serializer: S) -> Result<S::Ok, S::Error> {
        let ms = period.as_millis().map_err(ser::Error::custom)?;
        serializer.serialize_u64(ms)
    }

    /// Reads milliseconds as a period.
    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Period, D::Error> {
        let ms = u64::deserialize(deserializer)?;
        Period::from_millis(ms).map_err(de::Error::custom)
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
        assert_eq!(secs_to_us(u64::MAX), None);
    }

    #[test]
    fn a_period_converts_between_its_units() {
        let p = Period::from_secs(3);
        assert_eq!(p.as_micros(), 3 * US_PER_S);
        assert_eq!(Period::from_millis(3_000), Ok(p));
        assert_eq!((p.as_secs(), p.as_millis()), (Ok(3), Ok(3_000)));
        assert_eq!(p.as_duration(), Duration::from_secs(3));
        assert_eq!(p.to_string(), "3s");
        assert!(Period::ZERO.is_zero() && !p.is_zero());
        assert_eq!(Period::ZERO.as_secs(), Ok(0));
        assert_eq!(Period::from_secs(u32::MAX).as_secs(), Ok(u32::MAX));
        let half = Period::from_millis(1_500).unwrap();
        assert_eq!(half.to_string(), "1500ms");
        assert_eq!(
            half.as_secs(),
            Err(PeriodError::NotWholeSeconds { period: half })
        );
        let e = half.as_secs().unwrap_err().to_string();
        assert!(
            e.starts_with("1500ms: ") && e.contains("whole seconds"),
            "{e}"
        );
        let odd = Period::from_micros(2_500);
        assert_eq!(odd.to_string(), "2500us");
        assert!(odd.as_millis().is_err());
        let long = Period::from_micros((u64::from(u32::MAX) + 1) * US_PER_S);
        assert!(matches!(
            long.as_secs(),
            Err(PeriodError::TooManySeconds { .. })
        ));
        let e = Period::from_millis(u64::MAX).unwrap_err();
        assert_eq!(e, PeriodError::TooLong { ms: u64::MAX });
        assert!(e.to_string().contains("overflow"), "{e}");
    }

    #[test]
    fn a_period_reads_and_writes_milliseconds() {
        #[derive(Debug, PartialEq, Serialize, Deserialize)]
        struct Table {
            #[serde(rename = "period_ms", with = "period_ms")]
            period: Period,
        }
        let t: Table = serde_json::from_str(r#"{"period_ms":2000}"#).unwrap();
        assert_eq!(t.period, Period::from_secs(2));
        assert_eq!(serde_json::to_string(&t).unwrap(), r#"{"period_ms":2000}"#);
        let e = serde_json::from_str::<Table>(&format!(r#"{{"period_ms":{}}}"#, u64::MAX))
            .unwrap_err()
            .to_string();
        assert!(e.contains("overflow"), "{e}");
        let odd = Table {
            period: Period::from_micros(1),
        };
        assert!(serde_json::to_string(&odd).is_err());
        // On its own (a replica's settings), its microseconds.
        assert_eq!(
            serde_json::to_string(&Period::from_secs(1)).unwrap(),
            "1000000"
        );
    }
}
