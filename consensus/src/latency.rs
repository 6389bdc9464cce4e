//! Round latency as DESIGN.md section 3 defines it: the time from a node
//! learning `beta_{h-1}` to it learning `beta_h`, and the same for committing
//! block `h`. The replica's events carry no time stamps: each driver stamps
//! them with its own clock (virtual time in the simulator, the wall clock in the
//! node) and computes latency here, so both report the same quantity.

use crate::Height;
use beacon::Time;
use std::collections::BTreeMap;
use std::time::Duration;

/// Beacon rounds remembered (catch-up can learn many at once).
const KEEP: usize = 16;

/// When one node learned its recent beacons.
#[derive(Clone, Debug, Default)]
pub struct RoundClock {
    learned: BTreeMap<Height, Time>,
}

impl RoundClock {
    /// Nothing learned yet.
    pub fn new() -> Self {
        RoundClock::default()
    }

    /// The node has keys and starts at `at` (after its DKG): the first round's
    /// latency counts from here, as if `beta_0` were learned then.
    pub fn start(&mut self, at: Time) {
        self.learned.entry(0).or_insert(at);
    }

    /// `beta_round` learned at `at`: the round's latency, when this node knows
    /// when it learned `beta_{round-1}` (not after a restart or a catch-up gap).
    pub fn beacon(&mut self, round: Height, at: Time) -> Option<Duration> {
        let latency = self.since(round, at);
        self.learned.insert(round, at);
        while self.learned.len() > KEEP {
            self.learned.pop_first();
        }
        latency
    }

    /// Block `height` committed at `at`: the time since `beta_{height-1}` was
    /// learned here, when known.
    pub fn commit(&self, height: Height, at: Time) -> Option<Duration> {
        self.since(height, at)
    }

    fn since(&self, height: Height, at: Time) -> Option<Duration> {
        let previous = self.learned.get(&height.checked_sub(1)?)?;
        Some(Duration::from_micros(at.micros_since(*previous)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latency_counts_from_the_previous_beacon() {
        let mut clock = RoundClock::new();
        assert_eq!(clock.beacon(1, Time(500)), None, "not started");
        clock.start(Time(1_000));
        assert_eq!(clock.commit(1, Time(1_400)), Some(Duration::from_micros(400)));
        assert_eq!(clock.beacon(1, Time(1_500)), Some(Duration::from_micros(500)));
        assert_eq!(clock.beacon(2, Time(2_700)), Some(Duration::from_micros(1_200)));
        assert_eq!(clock.beacon(4, Time(3_000)), None, "round 3 missed");
        assert_eq!(clock.commit(5, Time(3_100)), Some(Duration::from_micros(100)));
        for r in 5..100 {
            clock.beacon(r, Time(3_000 + r));
        }
        assert!(clock.learned.len() <= KEEP);
    }
}
