//! Round latency as `consensus/PROTOCOL.md` ("Timing") defines it: the time from a node
//! learning `beta_{h-1}` to it learning `beta_h`, and the same for block
//! commits (from committing block `h - 1` to committing block `h`). The
//! replica's events carry no time stamps: each driver stamps them with its own
//! clock (virtual time in the simulator, the wall clock in the node) and
//! computes latency here, so both report the same quantities.

use crate::Height;
use beacon::Time;
use std::collections::BTreeMap;
use std::time::Duration;

/// Rounds remembered (catch-up can learn many at once).
const KEEP: usize = 16;

/// When one node learned its recent beacons and committed its recent blocks.
#[derive(Clone, Debug, Default)]
pub struct RoundClock {
    beacons: Laps,
    commits: Laps,
}

/// Times of recent rounds.
#[derive(Clone, Debug, Default)]
struct Laps(BTreeMap<Height, Time>);

impl Laps {
    /// Records round `round` at `at`; the time since round `round - 1`, if
    /// known here.
    fn lap(&mut self, round: Height, at: Time) -> Option<Duration> {
        let previous = round.checked_sub(1).and_then(|r| self.0.get(&r)).copied();
        self.0.insert(round, at);
        while self.0.len() > KEEP {
            self.0.pop_first();
        }
        Some(Duration::from_micros(at.micros_since(previous?)))
    }
}

impl RoundClock {
    /// Nothing learned yet.
    pub fn new() -> Self {
        RoundClock::default()
    }

    /// The node has keys and starts at `at` (after its DKG, or restored): the
    /// first round's latency counts from here.
    pub fn start(&mut self, at: Time) {
        self.beacons.0.entry(Height::ZERO).or_insert(at);
        self.commits.0.entry(Height::ZERO).or_insert(at);
    }

    /// `beta_round` learned at `at`: the round's beacon latency, when this node
    /// knows when it learned `beta_{round-1}` (not after a restart or a gap).
    pub fn beacon(&mut self, round: Height, at: Time) -> Option<Duration> {
        self.beacons.lap(round, at)
    }

    /// Block `height` committed at `at`: the round's commit latency, when this
    /// node knows when it committed block `height - 1`.
    pub fn commit(&mut self, height: Height, at: Time) -> Option<Duration> {
        self.commits.lap(height, at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latency_counts_from_the_previous_round() {
        let mut clock = RoundClock::new();
        assert_eq!(clock.beacon(Height::new(1), Time(500)), None, "not started");
        clock.start(Time(1_000));
        assert_eq!(
            clock.commit(Height::new(1), Time(1_400)),
            Some(Duration::from_micros(400))
        );
        assert_eq!(
            clock.beacon(Height::new(2), Time(1_500)),
            Some(Duration::from_micros(1_000))
        );
        assert_eq!(
            clock.commit(Height::new(2), Time(2_700)),
            Some(Duration::from_micros(1_300))
        );
        assert_eq!(
            clock.beacon(Height::new(4), Time(3_000)),
            None,
            "round 3 missed"
        );
        assert_eq!(
            clock.beacon(Height::new(5), Time(3_100)),
            Some(Duration::from_micros(100))
        );
        for r in 6..100 {
            clock.beacon(Height::new(r), Time(3_000 + r));
        }
        assert!(clock.beacons.0.len() <= KEEP);
    }
}
