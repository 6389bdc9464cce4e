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
//! - [`multisig`]: members' own keys with proofs of possession, and
//!   multi-signatures (sum of signatures, bitmap of signers) for consensus
//!   certificates;
//! - [`dkg`], [`reshare`]: distributed key generation, and resharing of a
//!   group key to a new member set and threshold (the key stays the same);
//! - [`chain`]: drand's beacon chain format;
//! - [`wire`]: the one codec (bincode 2, size-limited);
//! - [`effect`]: the one `Send/Broadcast/SetTimer` vocabulary of the state machines;
//! - [`schedule`]: the one time-ordered event queue of the drivers (simulator,
//!   node timers, test pump, DKG harness);
//! - [`time`]: [`Time`], the one place durations change units, and when a
//!   chain's rounds are due ([`time::RoundSchedule`]);
//! - [`mock`]: an INSECURE stand-in scheme for protocol-only simulations;
//! - [`memo`], [`parallel`], [`host_work`]: the simulator's host side: results
//!   shared between simulated members, large computations split over threads,
//!   and the measure of the host's work and path.
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

#![warn(unreachable_pub)]

pub mod chain;
pub mod cost;
pub mod curve;
pub mod dkg;
pub mod effect;
mod error;
pub mod field;
pub mod host_work;
pub mod lagrange;
pub mod memo;
pub mod mock;
pub mod multisig;
pub mod parallel;
pub mod poly;
pub mod reshare;
pub mod schedule;
pub mod scheme;
pub mod threshold;
pub mod time;
pub mod wire;

pub use chain::{Beacon, BeaconJson, ChainInfo, ChainInfoJson};
pub use curve::{Point, G1, G2};
pub use error::{
    ChainBreak, DkgError, Error, HexError, MemberSet, PeriodError, ReshareError, SignatureError,
    WireError,
};
pub use field::Scalar;
pub use lagrange::{InterpolationMethod, LagrangeCoefficients, SignerDomain};
pub use scheme::{MinPk, MinPkUnchained, MinSig, MinSigUnchained, Scheme, SchemeId};
pub use threshold::{deal, Recovery, SecretShare, ShareSet, SignatureShare, ThresholdPublicKey};
pub use time::{Period, Time};

use serde::{Deserialize, Serialize};
use std::fmt;

/// A signer's (and replica's) 0-based index among the `n` members.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
pub struct NodeIndex(pub u32);

impl fmt::Display for NodeIndex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}
