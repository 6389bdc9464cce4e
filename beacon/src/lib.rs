//! Threshold BLS over BLS12-381 for a random beacon.
//!
//! - [`field`], [`curve`]: the scalar field and the groups, on blst (the only
//!   modules with `unsafe`);
//! - [`poly`]: FFT, polynomial products, product and remainder trees;
//! - [`lagrange`]: Lagrange coefficients at zero — naive, fast (any points) and
//!   roots of unity (signer `i` evaluates at `w^i`);
//! - [`scheme`]: the signature group as a type parameter ([`MinPk`], [`MinSig`]);
//! - [`threshold`]: shares, recovery by one multi-scalar multiplication, batch
//!   verification with bisection;
//! - [`chain`]: drand's beacon chain format;
//! - [`wire`]: the one codec (bincode 2, size-limited).
//!
//! ```
//! use beacon::{deal, InterpolationMethod, MinSig, Scheme};
//! use rand_core::SeedableRng;
//! let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(7);
//! let (public, shares) = deal::<MinSig, _>(3, 5, &mut rng).unwrap();
//! let partials: Vec<_> = shares[1..4].iter().map(|s| s.sign::<MinSig>(b"round 1")).collect();
//! let sig = public.aggregate(&partials, InterpolationMethod::RootsOfUnity).unwrap();
//! assert!(public.verify(b"round 1", &sig));
//! ```

pub mod chain;
pub mod curve;
mod error;
pub mod field;
pub mod lagrange;
pub mod poly;
pub mod scheme;
pub mod threshold;
pub mod wire;

pub use chain::{Beacon, BeaconJson, ChainInfo, ChainInfoJson};
pub use curve::{Point, G1, G2};
pub use error::Error;
pub use field::Scalar;
pub use lagrange::{InterpolationMethod, LagrangeCoefficients, SignerDomain};
pub use scheme::{MinPk, MinSig, Scheme, SchemeId};
pub use threshold::{deal, Recovery, SecretShare, ShareSet, SignatureShare, ThresholdPublicKey};

use serde::{Deserialize, Serialize};
use std::fmt;

/// A signer's (and replica's) 0-based index among the `n` members.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
pub struct NodeIndex(pub u32);

impl fmt::Display for NodeIndex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}
