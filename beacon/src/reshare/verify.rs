//! The resharing's checks and combinations over the commitments: the old
//! verification keys, the weighted check of a new member's sub-shares, and the
//! Lagrange combination of the dealers' commitment vectors.

use super::{Deal, ReshareEpoch};
use crate::curve::Point;
use crate::dkg::evaluate_in_exponent;
use crate::field::Scalar;
use crate::lagrange::SignerDomain;
use crate::memo::Memo;
use crate::scheme::Scheme;
use crate::{Error, NodeIndex};
use rand_core::RngCore;
use sha2::{Digest, Sha256};
use std::sync::Arc;

/// Every old member's verification key `F(w_old^i)`, from the old public
/// polynomial by one FFT in the exponent.
pub(super) struct OldKeys<S: Scheme> {
    domain: Arc<SignerDomain>,
    keys: Arc<Vec<S::PublicKey>>,
}

impl<S: Scheme> OldKeys<S> {
    /// The old keys of a valid `epoch` with session `session`.
    pub(super) fn new(
        epoch: &ReshareEpoch<S>,
        session: &[u8; 32],
        memo: Arc<Memo>,
    ) -> Result<Self, Error> {
        let domain = SignerDomain::shared(epoch.old_members.len() as u32)?;
        let mut h = Sha256::new();
        h.update(b"reshare-old-verification-keys");
        h.update(session);
        let keys = memo.get_or_compute(h.finalize().into(), || {
            evaluate_in_exponent(&epoch.old_public_polynomial, &domain)
        });
        Ok(OldKeys { domain, keys })
    }

    /// The old members' evaluation domain.
    pub(super) fn domain(&self) -> &SignerDomain {
        &self.domain
    }

    /// The verification key of old member `i` (the identity, which no dealer
    /// can match with a decoded commitment, when out of range).
    pub(super) fn key(&self, i: NodeIndex) -> S::PublicKey {
        self.keys
            .get(i.0 as usize)
            .copied()
            .unwrap_or_else(S::PublicKey::identity)
    }
}

/// Whether every `(deal, sub-share)` pair matches its dealer's commitments at the
/// new point `x`, all at once: with secret random 128-bit weights `r_i`,
/// `g^{sum_i r_i s_i} == sum_{i,k} r_i x^k G_{i,k}` (one MSM). A mismatch in any
/// pair makes it fail except with probability 2^-128. Deals must be well formed
/// (one commitment vector).
pub(super) fn sub_shares_match<S: Scheme, R: RngCore + ?Sized>(
    received: &[(&Deal<S>, Scalar)],
    x: Scalar,
    rng: &mut R,
) -> bool {
    let size: usize = received
        .iter()
        .map(|(d, _)| d.commitments.row_lens().sum::<usize>())
        .sum();
    let mut points = Vec::with_capacity(size);
    let mut scalars = Vec::with_capacity(size);
    let mut weighted = Scalar::ZERO;
    for (deal, value) in received {
        let r = Scalar::random_u128(rng);
        weighted += r * *value;
        let mut power = r;
        for c in deal.commitments.row(0).unwrap_or_default() {
            points.push(*c);
            scalars.push(power);
            power *= x;
        }
    }
    S::PublicKey::msm_affine(&points, &scalars) == S::PublicKey::generator().mul(&weighted)
}

/// `H_k = sum_i lambda_i G_{i,k}` for `k < t`: the Lagrange combination of the
/// dealers' commitment vectors (one MSM per coefficient). Deals must be well
/// formed with `t` commitments.
pub(super) fn combine_commitments<S: Scheme>(
    deals: &[&Deal<S>],
    lambdas: &[Scalar],
    t: usize,
) -> Vec<S::PublicKey> {
    (0..t)
        .map(|k| {
            let column: Option<Vec<_>> = deals
                .iter()
                .map(|d| d.commitments.row(0)?.get(k).copied())
                .collect();
            column.map_or(S::PublicKey::identity(), |c| {
                S::PublicKey::msm_affine(&c, lambdas)
            })
        })
        .collect()
}

/// A memo key for a computation `what` over the deals of `dealers` in one session.
pub(super) fn memo_key<S: Scheme>(what: &str, session: &[u8; 32], deals: &[&Deal<S>]) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(what.as_bytes());
    h.update(session);
    for d in deals {
        h.update(d.digest());
    }
    h.finalize().into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::poly::evaluate;
    use crate::scheme::MinPk;
    use rand_chacha::ChaCha20Rng;
    use rand_core::SeedableRng;

    #[test]
    fn one_wrong_sub_share_among_many_fails_the_weighted_check() {
        let mut rng = ChaCha20Rng::seed_from_u64(1);
        let g = <MinPk as Scheme>::PublicKey::generator();
        let x = Scalar::from_u64(7);
        let polys: Vec<Vec<Scalar>> = (0..5)
            .map(|_| (0..4).map(|_| Scalar::random(&mut rng)).collect())
            .collect();
        let deals: Vec<Deal<MinPk>> = polys
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let c = p.iter().map(|a| g.mul(a)).collect();
                Deal::new(
                    [0; 32],
                    NodeIndex(i as u32),
                    crate::dkg::Commitments::new(&[c]),
                    [0; 32],
                )
            })
            .collect();
        let mut received: Vec<(&Deal<MinPk>, Scalar)> = deals
            .iter()
            .zip(&polys)
            .map(|(d, p)| (d, evaluate(p, x)))
            .collect();
        assert!(sub_shares_match(&received, x, &mut rng));
        assert!(sub_shares_match::<MinPk, _>(&[], x, &mut rng));
        received[3].1 += Scalar::one();
        assert!(!sub_shares_match(&received, x, &mut rng));
        // Two errors that cancel in a plain sum do not cancel under random weights.
        received[1].1 -= Scalar::one();
        assert!(!sub_shares_match(&received, x, &mut rng));
    }
}
