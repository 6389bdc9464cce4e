//! The kinds of Byzantine behaviour a simulation or test can give a member:
//! replica-side ones ([`crate::byzantine`]) and DKG-side ones
//! ([`crate::byzantine_dkg`]), named as configs write them.

use crate::ConsensusError;

/// Kinds of Byzantine behaviour.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Behaviour {
    /// As primary, sends one block to even-indexed replicas and another to odd ones.
    EquivocatingPrimary,
    /// Every signature share it sends (vote, commit, beacon) is invalid.
    BadShares,
    /// Never sends its signature shares (a silent voter).
    WithholdShares,
    /// As collector, never sends what it aggregates (proofs, prepares, beacons).
    SilentCollector,
    /// Its view changes claim a fast vote for a block nobody proposed.
    ConflictingViewChange,
    /// Sends nothing at all.
    Silent,
    /// As the primary of the next view, sends a NEW-VIEW built on view changes it
    /// wrote in the other members' names (claiming nothing was prepared or
    /// voted) with a fresh block of its own.
    ForgedViewChange,
    /// As a new primary, sends its NEW-VIEW with one block to even-indexed
    /// members and another to odd ones.
    SplitNewView,
    /// As collector, never sends the beacon: commit proofs go out without it,
    /// beacons, beacon shares and sync responses (which carry beacons) not at all.
    WithholdBeacon,
    /// Ignores the round's time on paced chains: votes on a proposal, and so
    /// releases its beacon share, as soon as it holds one (as primary, its own).
    EagerPrimary,
    /// Sends VIEW-CHANGE, NEW-VIEW and PRE-PREPARE for view `u64::MAX`.
    HugeView,
    /// Floods every replica with junk SIGN-SHAREs of later heights: as many as a
    /// replica's buffer of later heights holds, then a top-up at each height,
    /// so that the buffer stays full of its messages.
    FloodFutureHeights,
    /// DKG: signs three versions of its complaint (two harmless, one against an
    /// honest dealer) and sends each to a different member.
    ComplaintVersions,
    /// DKG: replays honest members' signed broadcasts of a failed attempt in the
    /// next attempt.
    ReplayOldSession,
    /// DKG, as a committee member: answers every relay summary it receives with
    /// the same summary marked settled, whatever it holds, so that members
    /// outside the committee count it as agreeing with them.
    FalseSettled,
    /// At each height, broadcasts a fast-path commit proof of a block nobody
    /// voted for, naming `3f + c + 1` signers, whose signature is made from
    /// its own key material alone: its beacon-key share (scaled by the
    /// signer count, which a verifier that summed beacon-share keys over a
    /// set of linearly related points would accept), and its own consensus
    /// key scaled likewise (a rogue sum); with the block itself.
    ShareSumCertificate,
    /// DKG: sends its result vote with a signature that is a point of the
    /// group but no signature (the group's generator), so that the sum of
    /// every quorum it is counted in fails.
    BadResultVote,
}

impl Behaviour {
    /// Every kind, for campaigns.
    pub const ALL: [Behaviour; 17] = [
        Behaviour::EquivocatingPrimary,
        Behaviour::BadShares,
        Behaviour::WithholdShares,
        Behaviour::SilentCollector,
        Behaviour::ConflictingViewChange,
        Behaviour::Silent,
        Behaviour::ForgedViewChange,
        Behaviour::SplitNewView,
        Behaviour::WithholdBeacon,
        Behaviour::EagerPrimary,
        Behaviour::HugeView,
        Behaviour::ComplaintVersions,
        Behaviour::ReplayOldSession,
        Behaviour::FalseSettled,
        Behaviour::FloodFutureHeights,
        Behaviour::ShareSumCertificate,
        Behaviour::BadResultVote,
    ];

    /// How many of [`Behaviour::ALL`] (the first) campaigns drew from before
    /// kinds were added; later kinds go at the end of `ALL` and are drawn
    /// apart, so that a campaign seed's draw of these stays as it was (seeds
    /// replayed as regression tests keep their faults).
    pub const FIRST_CAMPAIGN_KINDS: usize = 14;

    /// Name used in configs.
    pub fn as_str(&self) -> &'static str {
        match self {
            Behaviour::EquivocatingPrimary => "equivocating-primary",
            Behaviour::BadShares => "bad-shares",
            Behaviour::WithholdShares => "withhold-shares",
            Behaviour::SilentCollector => "silent-collector",
            Behaviour::ConflictingViewChange => "conflicting-view-change",
            Behaviour::Silent => "silent",
            Behaviour::ForgedViewChange => "forged-view-change",
            Behaviour::SplitNewView => "split-new-view",
            Behaviour::WithholdBeacon => "withhold-beacon",
            Behaviour::EagerPrimary => "eager-primary",
            Behaviour::HugeView => "huge-view",
            Behaviour::FloodFutureHeights => "flood-future-heights",
            Behaviour::ComplaintVersions => "complaint-versions",
            Behaviour::ReplayOldSession => "replay-old-session",
            Behaviour::FalseSettled => "false-settled",
            Behaviour::ShareSumCertificate => "share-sum-certificate",
            Behaviour::BadResultVote => "bad-result-vote",
        }
    }
}

/// Every kind's name, comma-separated ([`ConsensusError::UnknownBehaviour`]'s
/// list of the known ones).
pub(crate) fn known_names() -> String {
    Behaviour::ALL.map(|b| b.as_str()).join(", ")
}

impl std::str::FromStr for Behaviour {
    type Err = ConsensusError;
    fn from_str(s: &str) -> Result<Self, ConsensusError> {
        Behaviour::ALL
            .into_iter()
            .find(|b| b.as_str() == s)
            .ok_or_else(|| ConsensusError::UnknownBehaviour {
                name: s.to_string(),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_back_and_unknown_ones_list_the_known() {
        for b in Behaviour::ALL {
            assert_eq!(b.as_str().parse::<Behaviour>().ok(), Some(b));
        }
        let e = "loud".parse::<Behaviour>().unwrap_err();
        assert!(
            matches!(&e, ConsensusError::UnknownBehaviour { name } if name == "loud"),
            "{e:?}"
        );
        assert_eq!(
            e.to_string(),
            format!("unknown behaviour \"loud\"; known: {}", known_names())
        );
        assert!(e.to_string().contains("equivocating-primary, bad-shares,"));
    }
}
