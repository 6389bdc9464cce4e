//! Why a dealer was excluded from a DKG or a resharing: one value per rule of
//! the phase machine ([`super::phases`]) and the complaint judgement
//! ([`super::complaints`]).
//!
//! A [`DkgOutput`](super::DkgOutput) lists its disqualified dealers with
//! their reason, and nodes persist that output. Outputs written before the
//! reason had a type stored it as its text, so a reason is serialized as the
//! same text ([`Disqualification::as_str`]): stored outputs, DKG snapshots and
//! JSON reports are byte for byte what they were. A text that names no reason
//! is a decode error naming the text ([`DkgError::UnknownDisqualification`]).

use crate::{wire, DkgError, Error};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;

/// Why a dealer was disqualified (the first reason found wins).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Disqualification {
    /// The dealer's deal did not arrive before the end of the deal phase.
    NoDeal,
    /// The dealer's commitments do not have one point per coefficient of
    /// each threshold's polynomial.
    WrongDegree,
    /// A commitment of the dealer is outside the prime-order subgroup.
    CommitmentsOutsideGroup,
    /// Resharing: the dealer's constant-term commitment is not its old
    /// verification key (it does not reshare its own old share).
    InconsistentWithOldKey,
    /// The dealer signed two versions of one broadcast.
    Equivocation,
    /// Complaints against the dealer and no justification from it.
    UnansweredComplaints,
    /// The dealer's justification does not reveal, for some complainer, a
    /// share that matches its commitments.
    InvalidJustification,
}

impl Disqualification {
    /// Every reason.
    pub const ALL: [Disqualification; 7] = [
        Disqualification::NoDeal,
        Disqualification::WrongDegree,
        Disqualification::CommitmentsOutsideGroup,
        Disqualification::InconsistentWithOldKey,
        Disqualification::Equivocation,
        Disqualification::UnansweredComplaints,
        Disqualification::InvalidJustification,
    ];

    /// The reason in words: its `Display` and its serialized form (the text
    /// outputs stored before the reason had a type).
    pub fn as_str(&self) -> &'static str {
        match self {
            Disqualification::NoDeal => "no deal before the deadline",
            Disqualification::WrongDegree => "commitments of the wrong degree",
            Disqualification::CommitmentsOutsideGroup => {
                "commitments outside the prime-order group"
            }
            Disqualification::InconsistentWithOldKey => {
                "commitment inconsistent with the old verification key"
            }
            Disqualification::Equivocation => "equivocating broadcasts",
            Disqualification::UnansweredComplaints => "complaints left unanswered",
            Disqualification::InvalidJustification => "invalid or missing justification",
        }
    }

    /// The reason whose words are `text` ([`Disqualification::as_str`]).
    pub fn from_words(text: &str) -> Option<Disqualification> {
        Disqualification::ALL
            .into_iter()
            .find(|d| d.as_str() == text)
    }
}

impl fmt::Display for Disqualification {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for Disqualification {
    fn serialize<Z: Serializer>(&self, serializer: Z) -> Result<Z::Ok, Z::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Disqualification {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Disqualification::from_words(&text)
            .ok_or_else(|| wire::refuse(Error::Dkg(DkgError::UnknownDisqualification { text })))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{NodeIndex, WireError};

    #[test]
    fn every_reason_reads_back_from_its_words() {
        for d in Disqualification::ALL {
            assert_eq!(Disqualification::from_words(d.as_str()), Some(d));
            assert_eq!(d.to_string(), d.as_str());
        }
        assert_eq!(Disqualification::from_words("late"), None);
    }

    /// The serialized form is the text written before the reason had a type:
    /// a `(NodeIndex, String)` list decodes as a list of reasons, and a
    /// list of reasons encodes to the same bytes.
    #[test]
    fn stored_text_reasons_decode() {
        let old: Vec<(NodeIndex, String)> = Disqualification::ALL
            .iter()
            .enumerate()
            .map(|(i, d)| (NodeIndex(i as u32), d.as_str().to_string()))
            .collect();
        let bytes = wire::encode(&old).unwrap();
        let new: Vec<(NodeIndex, Disqualification)> = wire::decode(&bytes).unwrap();
        let expected: Vec<(NodeIndex, Disqualification)> = Disqualification::ALL
            .iter()
            .enumerate()
            .map(|(i, d)| (NodeIndex(i as u32), *d))
            .collect();
        assert_eq!(new, expected);
        assert_eq!(wire::encode(&new).unwrap(), bytes);
        assert_eq!(
            serde_json::to_string(&Disqualification::NoDeal).unwrap(),
            "\"no deal before the deadline\""
        );
    }

    #[test]
    fn an_unknown_stored_reason_is_a_decode_error_naming_it() {
        let old = vec![(NodeIndex(3), "a reason of another version".to_string())];
        let bytes = wire::encode(&old).unwrap();
        let e = wire::decode::<Vec<(NodeIndex, Disqualification)>>(&bytes).unwrap_err();
        let unknown = Error::Dkg(DkgError::UnknownDisqualification {
            text: "a reason of another version".into(),
        });
        assert_eq!(e, Error::Wire(WireError::InvalidValue(Box::new(unknown))));
        assert_eq!(
            e.to_string(),
            "wire: dkg: unknown reason for a dealer's disqualification \"a reason of another version\""
        );
    }
}
