//! Step 4's judgement of complaints, one rule for the DKG and the resharing:
//! every complaint against a dealer must be answered by a revealed share that
//! matches the dealer's commitments, or the dealer is disqualified.

use super::{Deal, Disqualification, Justification};
use crate::field::Scalar;
use crate::scheme::Scheme;
use crate::NodeIndex;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// What the judgement decided.
pub(crate) struct Judgement {
    /// Dealers to disqualify, with the reason.
    pub disqualified: Vec<(NodeIndex, Disqualification)>,
    /// Shares revealed to this member (it had complained), by dealer.
    pub revealed_to_me: Vec<(NodeIndex, Vec<Scalar>)>,
}

/// Judges the `complaints` (dealer -> complainers) against the dealers'
/// `justifications`; dealers already `excluded` or without a deal are skipped.
/// `valid(deal, complainer, revealed)` checks one revealed share.
pub(crate) fn judge<S: Scheme>(
    complaints: &BTreeMap<NodeIndex, BTreeSet<NodeIndex>>,
    justifications: &BTreeMap<NodeIndex, Arc<Justification>>,
    deals: &BTreeMap<NodeIndex, Arc<Deal<S>>>,
    excluded: impl Fn(NodeIndex) -> bool,
    me: NodeIndex,
    valid: impl Fn(&Deal<S>, NodeIndex, &[Scalar]) -> bool,
) -> Judgement {
    let mut judgement = Judgement {
        disqualified: Vec::new(),
        revealed_to_me: Vec::new(),
    };
    for (dealer, complainers) in complaints {
        let Some(deal) = deals.get(dealer).filter(|_| !excluded(*dealer)) else {
            continue;
        };
        let Some(j) = justifications.get(dealer) else {
            judgement
                .disqualified
                .push((*dealer, Disqualification::UnansweredComplaints));
            continue;
        };
        for c in complainers {
            match j.revealed.iter().find(|(r, _)| r == c) {
                Some((_, shares)) if valid(deal, *c, shares) => {
                    if *c == me {
                        judgement.revealed_to_me.push((*dealer, shares.clone()));
                    }
                }
                _ => {
                    judgement
                        .disqualified
                        .push((*dealer, Disqualification::InvalidJustification));
                    break;
                }
            }
        }
    }
    judgement
}
