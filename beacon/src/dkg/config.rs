//! The parameters every member of one DKG run agrees on, and their checks.
//!
//! [`DkgConfig`] is valid by construction: it is built only from
//! [`DkgSettings`] that pass [`DkgSettings::validate`] (deserializing one
//! checks it too), and read through them.

use super::{DkgTiming, MAX_ATTEMPTS};
use crate::{DkgError, Error, NodeIndex};
use serde::{Deserialize, Serialize};

/// Parameters every member of one DKG run agrees on, validated: a DKG runs
/// only with one of these. Read its fields through [`DkgSettings`]
/// (`config.n`); change them with [`DkgConfig::with`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "DkgSettings", into = "DkgSettings")]
pub struct DkgConfig(DkgSettings);

impl std::ops::Deref for DkgConfig {
    type Target = DkgSettings;
    fn deref(&self) -> &DkgSettings {
        &self.0
    }
}

impl TryFrom<DkgSettings> for DkgConfig {
    type Error = Error;
    /// Checks `settings` ([`DkgSettings::validate`]).
    fn try_from(settings: DkgSettings) -> Result<Self, Error> {
        settings.validate()?;
        Ok(DkgConfig(settings))
    }
}

impl From<DkgConfig> for DkgSettings {
    fn from(config: DkgConfig) -> Self {
        config.0
    }
}

impl DkgConfig {
    /// A copy of the settings, to edit and [`DkgSettings::build`] again.
    pub fn settings(&self) -> DkgSettings {
        self.0.clone()
    }

    /// A copy with `edit` applied to its settings, checked again.
    pub fn with(&self, edit: impl FnOnce(&mut DkgSettings)) -> Result<Self, Error> {
        let mut settings = self.0.clone();
        edit(&mut settings);
        settings.build()
    }
}

/// The fields of a [`DkgConfig`], unchecked: they become a config only
/// through [`DkgSettings::build`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DkgSettings {
    /// Unique identifier of this run (replays from other runs are ignored).
    pub session: [u8; 32],
    /// Number of members.
    pub n: u32,
    /// The thresholds to generate one key for each (e.g. beacon, slow path, fast path).
    pub thresholds: Vec<u32>,
    /// The dealers (sorted, distinct); empty means every member deals.
    pub dealers: Vec<NodeIndex>,
    /// How long its phases wait, and how often the session tries
    /// ([`DkgTiming`]: each attempt's phases twice as long as the last one's).
    pub timing: DkgTiming,
    /// Fewest qualified dealers for success (at least one must be honest for the
    /// secret to be unknown: f + 1 when every member deals; see
    /// [`committee::Committee`] for a drawn committee).
    pub min_qualified: u32,
    /// Fault bound `f`: the agreement step of [`session::DkgSession`] needs
    /// `n - f` members signing the same result.
    pub max_faulty: u32,
}

impl DkgSettings {
    /// These settings as a config, if they are valid ([`Self::validate`]).
    pub fn build(self) -> Result<DkgConfig, Error> {
        DkgConfig::try_from(self)
    }

    /// Checks the parameters.
    pub fn validate(&self) -> Result<(), Error> {
        if self.n == 0 {
            return Err(Error::Dkg(DkgError::NoMembers));
        }
        if self.thresholds.is_empty() {
            return Err(Error::Dkg(DkgError::NoThresholds));
        }
        for &t in &self.thresholds {
            if t == 0 || t > self.n {
                return Err(Error::InvalidThreshold { t, n: self.n });
            }
        }
        for pair in self.dealers.windows(2) {
            if pair[0] >= pair[1] {
                return Err(Error::Dkg(DkgError::DealersUnsorted));
            }
        }
        if let Some(last) = self.dealers.last() {
            if last.0 >= self.n {
                return Err(Error::SignerOutOfRange {
                    signer: *last,
                    n: self.n,
                });
            }
        }
        if 3 * u64::from(self.max_faulty) >= u64::from(self.n) {
            return Err(Error::Dkg(DkgError::TooManyFaulty {
                max_faulty: self.max_faulty,
                n: self.n,
            }));
        }
        let max_attempts = self.timing.max_attempts;
        if max_attempts == 0 || max_attempts > MAX_ATTEMPTS {
            return Err(Error::Dkg(DkgError::MaxAttempts { max_attempts }));
        }
        let k = self.dealer_count();
        if self.min_qualified == 0 || self.min_qualified > k {
            return Err(Error::Dkg(DkgError::MinQualified {
                min_qualified: self.min_qualified,
                dealers: k,
            }));
        }
        Ok(())
    }

    /// The dealers (every member when none are configured).
    pub fn dealer_list(&self) -> Vec<NodeIndex> {
        if self.dealers.is_empty() {
            (0..self.n).map(NodeIndex).collect()
        } else {
            self.dealers.clone()
        }
    }

    /// How many dealers there are.
    pub fn dealer_count(&self) -> u32 {
        if self.dealers.is_empty() {
            self.n
        } else {
            self.dealers.len() as u32
        }
    }

    /// Whether `who` deals.
    pub fn is_dealer(&self, who: NodeIndex) -> bool {
        if self.dealers.is_empty() {
            who.0 < self.n
        } else {
            self.dealers.binary_search(&who).is_ok()
        }
    }
}
