//! The verdict a run reached on its dealers: `QUAL`, and the dealers it
//! excluded with the reason ([`Disqualification`]). The DKG's and the
//! resharing's outputs both hold one ([`DkgOutput::verdicts`],
//! [`ReshareOutput::verdicts`](crate::reshare::ReshareOutput::verdicts)).
//!
//! It stands where the outputs held its two fields before, in the same order,
//! and bincode writes a struct as its fields one after the other with nothing
//! around them: stored outputs and DKG snapshots are byte for byte what they
//! were (`dkg::tests::inputs` and `reshare::tests::protocol` decode and
//! re-encode the flat form).
//!
//! [`DkgOutput::verdicts`]: super::DkgOutput::verdicts

use super::Disqualification;
use crate::NodeIndex;
use serde::{Deserialize, Serialize};

/// Which dealers a run qualified, and which it excluded and why.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verdicts {
    /// Qualified dealers (`QUAL`).
    pub qual: Vec<NodeIndex>,
    /// Dealers excluded, with the reason (serialized as its words, as
    /// outputs stored before the reason had a type hold it).
    pub disqualified: Vec<(NodeIndex, Disqualification)>,
}

impl Verdicts {
    /// Whether `dealer` is in `QUAL`.
    pub fn is_qualified(&self, dealer: NodeIndex) -> bool {
        self.qual.contains(&dealer)
    }

    /// Why `dealer` was excluded; `None` if it was not.
    pub fn reason(&self, dealer: NodeIndex) -> Option<Disqualification> {
        self.disqualified
            .iter()
            .find(|(d, _)| *d == dealer)
            .map(|(_, why)| *why)
    }
}
