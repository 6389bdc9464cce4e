//! Checking every dealing a member received at once.
//!
//! Member `j` holds, from each dealer `D` and for each threshold `k`, a share
//! `s_{D,k}` that must satisfy the Feldman equation
//! `g^{s_{D,k}} = C_{D,k}(x_j) = sum_i x_j^i C_{D,k,i}`. Instead of one
//! multi-scalar multiplication per dealing, it checks one random linear
//! combination of all of them:
//!
//! `g^{sum_{D,k} r_{D,k} s_{D,k}} = V(x_j)`, with `V = sum_{D,k} r_{D,k} C_{D,k}`,
//!
//! and looks at single dealings ([`super::share_matches`]) only when that fails.
//!
//! # Weights
//! The 128-bit weights `r_{D,k}` come from a ChaCha20 stream seeded with
//! SHA-256 of the session and of every deal (Fiat–Shamir): every member with
//! the same deals uses the same weights, so `V` — one multi-scalar
//! multiplication per coefficient over every dealer — and its value at every
//! member's point — one FFT in the exponent — are public computations that
//! simulated members share ([`Memo`]), each charged what the shared computation
//! cost. A node alone (no memo) evaluates `V` at its own point only: one MSM
//! instead of the FFT.
//!
//! Public weights are sound only if a dealer cannot choose its shares after
//! learning them: otherwise two colluding dealers could send a member errors
//! that cancel under the weights, pass its check, and make its final share wrong
//! once one of them is disqualified. So each deal commits to the shares it deals:
//! a Merkle root ([`ShareTree`]) over one leaf per member,
//! `SHA-256(domain, session, dealer, member, salt, shares)`, with a random salt per
//! member; the dealer sends member `j` its salt and authentication path with its
//! shares, and the deal's digest — hence the weights — covers the root. A share
//! that is not in its dealer's tree counts as a bad share (a complaint follows).
//! A bad batch then passes with probability about `2^-128` per try.

use super::{evaluate_in_exponent, Deal};
use crate::curve::Point;
use crate::field::Scalar;
use crate::lagrange::SignerDomain;
use crate::memo::Memo;
use crate::scheme::Scheme;
use crate::NodeIndex;
use rand_chacha::ChaCha20Rng;
use rand_core::{RngCore as _, SeedableRng as _};
use sha2::{Digest as _, Sha256};

/// Domain separation of the batch check's Fiat–Shamir weights.
const WEIGHTS_DOMAIN: &[u8] = b"sbft-beacon/dkg-batch-weights/1";
/// Domain separation of the shared evaluation of the weighted polynomial.
const EVALS_DOMAIN: &[u8] = b"sbft-beacon/dkg-batch-evaluations/1";
/// Coefficients of the weighted polynomial per job where it is split over
/// threads (jobs that do not depend on the threads: 128 at 1,024 members,
/// each 8 MSMs over every dealer's commitments).
const COEFFICIENTS_PER_JOB: usize = 8;
/// Domain separation of share leaves (inner nodes start with byte 1).
const LEAF_DOMAIN: &[u8] = b"sbft-beacon/dkg-share-leaf/1";

/// The leaf of member `j`'s shares in dealer `dealer`'s share tree.
pub fn share_leaf(
    session: &[u8; 32],
    dealer: NodeIndex,
    j: NodeIndex,
    salt: &[u8; 32],
    shares: &[Scalar],
) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(LEAF_DOMAIN);
    h.update(session);
    h.update(dealer.0.to_be_bytes());
    h.update(j.0.to_be_bytes());
    h.update(salt);
    h.update((shares.len() as u64).to_be_bytes());
    for s in shares {
        h.update(s.to_bytes_le());
    }
    h.finalize().into()
}

fn inner(left: &[u8; 32], right: &[u8; 32]) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update([1u8]);
    h.update(left);
    h.update(right);
    h.finalize().into()
}

/// A dealer's commitment to the shares it deals to members `0..n`: a fresh salt
/// per member from `rng` (all drawn first), and the share tree over their
/// leaves (`shares_of(j)` are member `j`'s shares, one per threshold).
pub fn commit_shares(
    session: &[u8; 32],
    dealer: NodeIndex,
    n: u32,
    rng: &mut impl rand_core::RngCore,
    shares_of: impl Fn(u32) -> Vec<Scalar>,
) -> (ShareTree, Vec<[u8; 32]>) {
    let salts: Vec<[u8; 32]> = (0..n)
        .map(|_| {
            let mut salt = [0u8; 32];
            rng.fill_bytes(&mut salt);
            salt
        })
        .collect();
    let leaves = (0..n)
        .map(|j| {
            share_leaf(
                session,
                dealer,
                NodeIndex(j),
                &salts[j as usize],
                &shares_of(j),
            )
        })
        .collect();
    (ShareTree::new(leaves), salts)
}

/// A dealer's Merkle tree over its members' share leaves (padded with zero
/// leaves to a power of two).
pub struct ShareTree {
    /// `levels[0]` are the leaves, the last level the root alone.
    levels: Vec<Vec<[u8; 32]>>,
}

impl ShareTree {
    /// The tree over `leaves`.
    pub fn new(mut leaves: Vec<[u8; 32]>) -> Self {
        let size = leaves.len().max(1).next_power_of_two();
        leaves.resize(size, [0; 32]);
        let mut levels = vec![leaves];
        while levels.last().is_some_and(|l| l.len() > 1) {
            let next = levels
                .last()
                .map(|l| l.chunks(2).map(|p| inner(&p[0], &p[1])).collect())
                .unwrap_or_default();
            levels.push(next);
        }
        ShareTree { levels }
    }

    /// The root.
    pub fn root(&self) -> [u8; 32] {
        self.levels
            .last()
            .and_then(|l| l.first())
            .copied()
            .unwrap_or_default()
    }

    /// The authentication path of leaf `j` (siblings from the bottom up).
    pub fn path(&self, j: NodeIndex) -> Vec<[u8; 32]> {
        let mut index = j.0 as usize;
        let mut path = Vec::with_capacity(self.levels.len().saturating_sub(1));
        for level in &self.levels[..self.levels.len().saturating_sub(1)] {
            path.push(level.get(index ^ 1).copied().unwrap_or_default());
            index /= 2;
        }
        path
    }
}

/// A leaf's authentication path in its dealer's [`ShareTree`] (the sibling
/// hashes from the bottom up). In memory, the messages one dealer sends share
/// its whole tree (one copy for thousands of recipients, where a path each was
/// the largest part of the shares in flight at 4,096 members); on the wire it
/// is the path alone, and a decoded path owns its hashes.
#[derive(Clone)]
pub struct SharePath(PathRepr);

#[derive(Clone)]
enum PathRepr {
    Owned(Vec<[u8; 32]>),
    Shared(std::sync::Arc<ShareTree>, NodeIndex),
}

impl SharePath {
    /// Leaf `j`'s path in `tree`, sharing the tree.
    pub fn shared(tree: &std::sync::Arc<ShareTree>, j: NodeIndex) -> Self {
        SharePath(PathRepr::Shared(tree.clone(), j))
    }

    /// The sibling hashes, from the bottom up.
    pub fn hashes(&self) -> std::borrow::Cow<'_, [[u8; 32]]> {
        match &self.0 {
            PathRepr::Owned(p) => std::borrow::Cow::Borrowed(p),
            PathRepr::Shared(tree, j) => std::borrow::Cow::Owned(tree.path(*j)),
        }
    }
}

impl From<Vec<[u8; 32]>> for SharePath {
    fn from(hashes: Vec<[u8; 32]>) -> Self {
        SharePath(PathRepr::Owned(hashes))
    }
}

impl PartialEq for SharePath {
    fn eq(&self, other: &Self) -> bool {
        self.hashes() == other.hashes()
    }
}

impl Eq for SharePath {}

impl std::fmt::Debug for SharePath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.hashes().iter().map(hex::encode))
            .finish()
    }
}

impl serde::Serialize for SharePath {
    fn serialize<Ser: serde::Serializer>(&self, serializer: Ser) -> Result<Ser::Ok, Ser::Error> {
        self.hashes().as_ref().serialize(serializer)
    }
}

impl<'de> serde::Deserialize<'de> for SharePath {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Vec::<[u8; 32]>::deserialize(deserializer).map(SharePath::from)
    }
}

/// Whether `leaf` is leaf `j` of the tree with `root` over `size` leaves (a
/// power of two), by its authentication `path`.
pub fn in_share_tree(
    root: &[u8; 32],
    leaf: [u8; 32],
    j: NodeIndex,
    path: &[[u8; 32]],
    size: usize,
) -> bool {
    if path.len() != size.max(1).trailing_zeros() as usize || j.0 as usize >= size {
        return false;
    }
    let mut index = j.0 as usize;
    let mut acc = leaf;
    for sibling in path {
        acc = if index % 2 == 0 {
            inner(&acc, sibling)
        } else {
            inner(sibling, &acc)
        };
        index /= 2;
    }
    &acc == root
}

/// Whether every dealing in `dealings` (a deal and member `j`'s shares from it,
/// one per threshold) passes its Feldman check, tested at once as described in
/// the module documentation. `true` means every dealing is good (but for a
/// probability of about `2^-128`), `false` that at least one is bad (then check
/// them one by one). Malformed input (a share vector of another length than
/// the deal's commitments, `j` outside the domain) is `false`. `memo` shares
/// the weighted polynomial's evaluations between simulated members.
pub fn batch_check<S: Scheme>(
    domain: &SignerDomain,
    memo: &Memo,
    session: &[u8; 32],
    j: NodeIndex,
    dealings: &[(&Deal<S>, &[Scalar])],
) -> bool {
    if j.0 >= domain.n() || dealings.iter().any(|(d, s)| d.commitments.len() != s.len()) {
        return false;
    }
    if dealings.is_empty() {
        return true;
    }
    let mut h = Sha256::new();
    h.update(WEIGHTS_DOMAIN);
    h.update(session);
    h.update((dealings.len() as u64).to_be_bytes());
    for (deal, _) in dealings {
        h.update(deal.digest());
    }
    let seed: [u8; 32] = h.finalize().into();
    let mut rng = ChaCha20Rng::from_seed(seed);
    let weights: Vec<Vec<u128>> = dealings
        .iter()
        .map(|(deal, _)| {
            deal.commitments
                .rows()
                .map(|_| u128::from(rng.next_u64()) << 64 | u128::from(rng.next_u64()))
                .collect()
        })
        .collect();
    let expected = if memo.is_enabled() {
        // Simulated members share `V` at every member's point.
        let mut key = Sha256::new();
        key.update(EVALS_DOMAIN);
        key.update(S::ID.as_str());
        key.update(domain.n().to_be_bytes());
        key.update(seed);
        let evaluations = memo.get_or_compute(key.finalize().into(), || {
            evaluate_in_exponent(&weighted_polynomial::<S>(dealings, &weights), domain)
        });
        evaluations.get(j.0 as usize).copied()
    } else {
        // A node alone needs `V` at its own point: one MSM, not an FFT.
        let Ok(x) = domain.point(j) else {
            return false;
        };
        Some(evaluate_at(
            &weighted_polynomial::<S>(dealings, &weights),
            x,
        ))
    };
    let mut sum = Scalar::ZERO;
    for ((_, shares), w) in dealings.iter().zip(&weights) {
        for (s, r) in shares.iter().zip(w) {
            sum += Scalar::from_u128(*r) * *s;
        }
    }
    expected.is_some_and(|v| S::PublicKey::generator().mul(&sum) == v)
}

/// `sum_i x^i coefficients[i]`: one MSM.
fn evaluate_at<P: Point>(coefficients: &[P], x: Scalar) -> P {
    P::msm(
        coefficients,
        &super::exponent::powers(x, coefficients.len()),
    )
}

/// `V = sum_{D,k} r_{D,k} C_{D,k}`: one multi-scalar multiplication (128-bit
/// weights) per coefficient, over the commitments as they are held (affine).
/// Where this thread's MSMs do not use blst's pool (the simulator's workers),
/// the coefficients are split over [`crate::parallel::threads`] threads; every
/// MSM is charged to the caller either way.
fn weighted_polynomial<S: Scheme>(
    dealings: &[(&Deal<S>, &[Scalar])],
    weights: &[Vec<u128>],
) -> Vec<S::PublicKey> {
    let degree = dealings
        .iter()
        .flat_map(|(d, _)| d.commitments.row_lens())
        .max()
        .unwrap_or(0);
    let coefficients = |range: std::ops::Range<usize>| -> Vec<S::PublicKey> {
        let mut points = Vec::new();
        let mut scalars = Vec::new();
        range
            .map(|i| {
                points.clear();
                scalars.clear();
                for ((deal, _), w) in dealings.iter().zip(weights) {
                    for (c, r) in deal.commitments.rows().zip(w) {
                        if let Some(p) = c.get(i) {
                            points.push(*p);
                            scalars.push(*r);
                        }
                    }
                }
                S::PublicKey::msm_affine_u128(&points, &scalars)
            })
            .collect()
    };
    if crate::curve::msm_pool_enabled() || degree <= COEFFICIENTS_PER_JOB {
        return coefficients(0..degree);
    }
    let ranges: Vec<std::ops::Range<usize>> = (0..degree)
        .step_by(COEFFICIENTS_PER_JOB)
        .map(|i| i..(i + COEFFICIENTS_PER_JOB).min(degree))
        .collect();
    let mut out = Vec::with_capacity(degree);
    for (part, counts) in crate::parallel::map(ranges, coefficients) {
        crate::cost::charge(&counts);
        out.extend(part);
    }
    out
}
