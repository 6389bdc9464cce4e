//! Byzantine dealers: an honest [`Dkg`] whose outputs are rewritten, one
//! named fault each (the honest code has no flags).

use super::Participant;
use crate::curve::Point;
use crate::dkg::*;
use crate::effect::Effect;

/// Ways a Byzantine dealer misbehaves (each wraps an honest [`Dkg`] and rewrites
/// its outputs; the honest code has no flags).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DealerFault {
    /// Wrong shares to `victims`, and no answer to their complaints.
    BadShares {
        /// Recipients of wrong shares.
        victims: Vec<NodeIndex>,
    },
    /// Wrong shares to `victims`, then the correct shares revealed: stays qualified.
    BadSharesThenJustified {
        /// Recipients of wrong shares.
        victims: Vec<NodeIndex>,
    },
    /// Wrong shares to `victims`, then wrong shares revealed.
    InvalidJustification {
        /// Recipients of wrong shares.
        victims: Vec<NodeIndex>,
    },
    /// Commitments one coefficient short.
    WrongDegree,
    /// Shares of a second polynomial to every odd member, and a justification
    /// revealing that polynomial's shares.
    Equivocate,
    /// Sends nothing at all.
    Silent,
    /// Correct shares to `victims`, but not the ones its deal's share root
    /// commits to (a wrong salt): they complain, and it reveals the shares.
    UncommittedShares {
        /// Recipients of the uncommitted shares.
        victims: Vec<NodeIndex>,
    },
    /// Commitments of its largest threshold carry a component of small order
    /// `l` (outside the prime-order subgroup), chosen so that it vanishes at
    /// every other member's point: every share check passes, and only a
    /// subgroup check sees it. Needs a threshold of at least `n`.
    OffGroupCommitments,
}

/// `coefficients * points` mod `l` for small `l`: the integer of a scalar
/// (its canonical representative) reduced mod `l`.
fn residue(x: &Scalar, l: u32) -> u32 {
    x.to_bytes_be()
        .iter()
        .fold(0, |acc, b| (acc * 256 + u32::from(*b)) % l)
}

/// A non-zero `c` with `rows * c = 0` over GF(`l`) (`l` prime), if one exists.
fn null_vector(mut rows: Vec<Vec<u32>>, width: usize, l: u32) -> Option<Vec<u32>> {
    let inverse = |a: u32| (1..l).find(|b| a * b % l == 1).unwrap_or(0);
    let mut pivots = Vec::new();
    let mut r = 0;
    for col in 0..width {
        let Some(p) = (r..rows.len()).find(|&i| rows[i][col] % l != 0) else {
            continue;
        };
        rows.swap(r, p);
        let inv = inverse(rows[r][col]);
        for v in rows[r].iter_mut() {
            *v = *v * inv % l;
        }
        let pivot = rows[r].clone();
        for (i, row) in rows.iter_mut().enumerate() {
            let factor = row[col];
            if i != r && factor != 0 {
                for (v, p) in row.iter_mut().zip(&pivot) {
                    *v = (*v + (l - factor) * p) % l;
                }
            }
        }
        pivots.push(col);
        r += 1;
    }
    let free = (0..width).find(|c| !pivots.contains(c))?;
    let mut x = vec![0; width];
    x[free] = 1;
    for (row, &col) in pivots.iter().enumerate() {
        x[col] = (l - rows[row][free]) % l;
    }
    Some(x)
}

impl<S: Scheme> ByzantineDealer<S> {
    /// `deal` with a small-order component added to the commitments of its
    /// largest threshold that every other member's share check misses.
    fn hide_small_order_component(&self, deal: &Deal<S>) -> Option<Deal<S>> {
        let (torsion, l) = S::PublicKey::small_order_point()?;
        let (k, t) = self
            .inner
            .config()
            .thresholds
            .iter()
            .enumerate()
            .max_by_key(|(_, t)| **t)?;
        let rows: Vec<Vec<u32>> = (0..self.inner.config().n)
            .filter(|j| *j != self.inner.me().0)
            .map(|j| {
                let x = self.inner.sharing().domain().point(NodeIndex(j)).ok()?;
                let mut power = Scalar::one();
                Some(
                    (0..*t)
                        .map(|_| {
                            let r = residue(&power, l);
                            power *= x;
                            r
                        })
                        .collect(),
                )
            })
            .collect::<Option<_>>()?;
        let c = null_vector(rows, *t as usize, l)?;
        let mut commitments = deal.commitments.to_rows();
        for (point, times) in commitments[k].iter_mut().zip(c) {
            for _ in 0..times {
                *point = point.add(&torsion);
            }
        }
        Some(Deal::new(
            deal.session,
            deal.dealer,
            Commitments::new(&commitments),
            deal.share_root,
        ))
    }
}

/// A Byzantine dealer: an honest [`Dkg`] whose outputs are rewritten.
pub struct ByzantineDealer<S: Scheme> {
    inner: Dkg<S>,
    fault: DealerFault,
}

impl<S: Scheme> ByzantineDealer<S> {
    /// Wraps `inner` with `fault`.
    pub fn new(inner: Dkg<S>, fault: DealerFault) -> Self {
        ByzantineDealer { inner, fault }
    }

    fn victims(&self) -> Option<&[NodeIndex]> {
        match &self.fault {
            DealerFault::BadShares { victims }
            | DealerFault::BadSharesThenJustified { victims }
            | DealerFault::InvalidJustification { victims }
            | DealerFault::UncommittedShares { victims } => Some(victims),
            _ => None,
        }
    }

    fn is_victim(&self, who: NodeIndex) -> bool {
        match &self.fault {
            DealerFault::Equivocate => who.0 % 2 == 1,
            _ => self.victims().is_some_and(|v| v.contains(&who)),
        }
    }

    fn corrupt(shares: &[Scalar]) -> Vec<Scalar> {
        shares.iter().map(|s| *s + Scalar::from_u64(1)).collect()
    }
}

impl<S: Scheme> Participant<S, DkgOutput<S>> for ByzantineDealer<S> {
    fn phase(&self) -> Option<DkgPhase> {
        Some(self.inner.phase())
    }

    fn handle(&mut self, now: Time, input: DkgInput<S>) -> Vec<DkgAction<S>> {
        let actions = self.inner.handle(now, input);
        let mut out = Vec::with_capacity(actions.len());
        for action in actions {
            let effect = match (&self.fault, action) {
                (DealerFault::Silent, a @ PhaseOutput::Effect(Effect::SetTimer { .. })) => {
                    out.push(a);
                    continue;
                }
                (DealerFault::Silent, _) => continue,
                (_, PhaseOutput::Effect(effect)) => effect,
                (_, a) => {
                    out.push(a);
                    continue;
                }
            };
            if let Some(effect) = self.rewrite(effect) {
                out.push(PhaseOutput::Effect(effect));
            }
        }
        out
    }
}

impl<S: Scheme> ByzantineDealer<S> {
    /// What this dealer sends instead of `effect` (`None`: nothing).
    fn rewrite(
        &self,
        effect: Effect<DkgMessage<S>, DkgTimer>,
    ) -> Option<Effect<DkgMessage<S>, DkgTimer>> {
        let deal = |bad: Deal<S>| Effect::Broadcast(DkgMessage::Deal(Arc::new(bad)));
        Some(match (&self.fault, effect) {
            (DealerFault::OffGroupCommitments, Effect::Broadcast(DkgMessage::Deal(d))) => {
                let bad = self
                    .hide_small_order_component(&d)
                    .expect("a group with small-order points and a threshold of n");
                deal(bad)
            }
            (DealerFault::WrongDegree, Effect::Broadcast(DkgMessage::Deal(d))) => {
                let mut commitments = d.commitments.to_rows();
                for c in &mut commitments {
                    c.pop();
                }
                let commitments = Commitments::new(&commitments);
                deal(Deal::new(d.session, d.dealer, commitments, d.share_root))
            }
            (
                DealerFault::UncommittedShares { .. },
                Effect::Send {
                    to,
                    message: DkgMessage::Shares(mut s),
                },
            ) if self.is_victim(to) => {
                s.salt[0] ^= 1;
                Effect::Send {
                    to,
                    message: DkgMessage::Shares(s),
                }
            }
            (
                _,
                Effect::Send {
                    to,
                    message: DkgMessage::Shares(mut s),
                },
            ) if self.is_victim(to) => {
                s.shares = Self::corrupt(&s.shares);
                Effect::Send {
                    to,
                    message: DkgMessage::Shares(s),
                }
            }
            (DealerFault::BadShares { .. }, Effect::Broadcast(DkgMessage::Justification(_))) => {
                return None
            }
            (
                DealerFault::InvalidJustification { .. } | DealerFault::Equivocate,
                Effect::Broadcast(DkgMessage::Justification(j)),
            ) => {
                let revealed = j
                    .revealed
                    .iter()
                    .map(|(r, s)| (*r, Self::corrupt(s)))
                    .collect();
                let bad = Justification {
                    session: j.session,
                    dealer: j.dealer,
                    revealed,
                };
                Effect::Broadcast(DkgMessage::Justification(Arc::new(bad)))
            }
            (_, e) => e,
        })
    }
}
