//! The two BLS12-381 source groups G1 and G2 and the pairing, on blst.
//!
//! This module owns every `unsafe` call into blst's point functions. [`G1`] and
//! [`G2`] share one interface, [`Point`], so that the signature group can be a type
//! parameter (see [`crate::scheme`]). Decoding is strict: canonical compressed
//! encodings only, on the curve, in the prime-order subgroup, never the identity.
//!
//! - `point.rs`: the [`Point`] interface and [`FixedBase`], a point with a
//!   table of its multiples;
//! - `group.rs`: [`G1`] and [`G2`], one `group!` macro implementing [`Point`]
//!   on blst for both;
//! - `comb.rs`: the fixed-base comb's windows;
//! - `msm_pool.rs`: whether this thread's MSMs use blst's shared thread pool;
//! - `pairing.rs`: the pairing product check.

mod comb;
mod group;
mod msm_pool;
mod pairing;
mod point;

pub use group::{G1, G2};
pub use msm_pool::{msm_pool_enabled, set_msm_pool};
pub use pairing::{miller_product, miller_products_are_one, pairing_product_is_one, MillerProduct};
pub use point::{FixedBase, Point};

#[cfg(test)]
mod tests;
