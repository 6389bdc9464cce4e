//! The tests of the curve: strict decoding (lengths, garbage, points off the
//! subgroup, small-order points), the fixed-base comb against plain
//! multiplication, MSMs against naive sums, and the pairing's bilinearity.

use super::comb::{comb_digit, COMB_BITS, COMB_ENTRIES, COMB_WINDOWS};
use super::{pairing_product_is_one, set_msm_pool, FixedBase, Point, G1, G2};
use crate::field::Scalar;
use crate::Error;
use rand_chacha::rand_core::SeedableRng;
use rand_chacha::ChaCha20Rng;

/// A small-order point decodes on the curve, fails the subgroup check, and
/// strict decoding refuses it; points of the subgroup pass both ways.
fn small_order<P: Point>(want_l: u32) {
    let (t, l) = P::small_order_point().unwrap();
    assert_eq!(l, want_l);
    assert!(!t.is_identity() && !t.in_group());
    let mut acc = P::identity();
    for _ in 0..l {
        acc = acc.add(&t);
    }
    assert!(acc.is_identity(), "order {l}");
    // A subgroup point plus the small-order one: on the curve, off the group.
    let g = P::generator().mul(&Scalar::from_u64(7));
    assert!(g.in_group());
    let off = g.add(&t);
    assert!(!off.in_group());
    let bytes = off.to_bytes();
    assert!(matches!(
        P::from_bytes(&bytes),
        Err(Error::NotInSubgroup { .. })
    ));
    assert_eq!(P::from_bytes_on_curve(&bytes).unwrap(), off);
    assert_eq!(P::from_bytes_on_curve(&g.to_bytes()).unwrap(), g);
    // Wrong lengths are refused by both decoders.
    assert!(P::from_bytes_on_curve(&bytes[1..]).is_err());
}

#[test]
fn small_order_points_are_refused_by_strict_decoding_only() {
    small_order::<G1>(3);
    small_order::<G2>(13);
}

fn roundtrip<P: Point>() {
    let mut rng = ChaCha20Rng::seed_from_u64(3);
    let p = P::generator().mul(&Scalar::random(&mut rng));
    let bytes = p.to_bytes();
    assert_eq!(bytes.len(), P::COMPRESSED_LEN);
    assert_eq!(P::from_bytes(&bytes).unwrap(), p);
    assert!(matches!(
        P::from_bytes(&bytes[1..]),
        Err(Error::WrongLength { .. })
    ));
    assert!(matches!(
        P::from_bytes(&P::identity().to_bytes()),
        Err(Error::IdentityPoint { .. })
    ));
    // x = 0 with the compression bit set is not a point of either curve.
    let mut bad = vec![0u8; P::COMPRESSED_LEN];
    bad[0] = 0x80;
    assert!(P::from_bytes(&bad).is_err());
    // Missing compression flag.
    let mut uncompressed_flag = bytes.clone();
    uncompressed_flag[0] &= 0x7f;
    assert!(P::from_bytes(&uncompressed_flag).is_err());
}

#[test]
fn encodings_roundtrip_and_reject_garbage() {
    roundtrip::<G1>();
    roundtrip::<G2>();
}

/// Finds a compressed encoding of a curve point outside the prime-order subgroup.
fn off_subgroup<P: Point>() -> Vec<u8> {
    for x in 1u8..=255 {
        let mut bytes = vec![0u8; P::COMPRESSED_LEN];
        bytes[0] = 0x80;
        *bytes.last_mut().unwrap() = x;
        if let Err(Error::NotInSubgroup { .. }) = P::from_bytes(&bytes) {
            return bytes;
        }
    }
    panic!("no off-subgroup point found");
}

#[test]
fn rejects_points_outside_the_subgroup() {
    off_subgroup::<G1>();
    off_subgroup::<G2>();
}

fn mul_generator_matches_mul<P: Point>() {
    let mut rng = ChaCha20Rng::seed_from_u64(7);
    let mut scalars = vec![Scalar::ZERO, Scalar::one(), -Scalar::one()];
    scalars.extend((0..32).map(|_| Scalar::random(&mut rng)));
    for s in &scalars {
        assert_eq!(P::mul_generator(s), P::generator().mul(s), "{s:?}");
    }
}

fn fixed_base_matches_mul<P: Point>() {
    let mut rng = ChaCha20Rng::seed_from_u64(8);
    let base = P::generator().mul(&Scalar::random(&mut rng));
    let table = FixedBase::new(base);
    assert_eq!(table.base(), &base);
    let mut scalars = vec![Scalar::ZERO, Scalar::one(), -Scalar::one()];
    scalars.extend((0..32).map(|_| Scalar::random(&mut rng)));
    for s in &scalars {
        assert_eq!(table.mul(s), base.mul(s), "{s:?}");
    }
    let identity = FixedBase::new(P::identity());
    assert!(identity.mul(&Scalar::random(&mut rng)).is_identity());
}

#[test]
fn a_fixed_base_table_gives_the_products_of_mul() {
    fixed_base_matches_mul::<G1>();
    fixed_base_matches_mul::<G2>();
}

#[test]
fn comb_digits_rebuild_the_scalar() {
    let mut rng = ChaCha20Rng::seed_from_u64(9);
    for s in [
        -Scalar::one(),
        Scalar::random(&mut rng),
        Scalar::random(&mut rng),
    ] {
        let bytes = s.to_bytes_le();
        let mut rebuilt = [0u8; 32];
        for w in 0..COMB_WINDOWS {
            let digit = comb_digit(&bytes, w);
            assert!(digit < COMB_ENTRIES as u64);
            for b in 0..COMB_BITS {
                let bit = COMB_BITS * w + b;
                if digit >> b & 1 == 1 {
                    rebuilt[bit / 8] |= 1 << (bit % 8);
                }
            }
        }
        assert_eq!(rebuilt, bytes);
    }
}

#[test]
fn fixed_base_multiplication_matches_blst() {
    mul_generator_matches_mul::<G1>();
    mul_generator_matches_mul::<G2>();
}

#[test]
fn msm_matches_naive_sum() {
    // With blst's pool (from 32 points) and on this thread alone.
    for pool in [true, false] {
        set_msm_pool(pool);
        msm_matches_naive_sum_on_sizes();
    }
    set_msm_pool(true);
}

fn msm_matches_naive_sum_on_sizes() {
    let mut rng = ChaCha20Rng::seed_from_u64(4);
    for n in [0usize, 1, 2, 5, 31, 40] {
        let points: Vec<G1> = (0..n)
            .map(|_| G1::generator().mul(&Scalar::random(&mut rng)))
            .collect();
        let scalars: Vec<Scalar> = (0..n).map(|_| Scalar::random(&mut rng)).collect();
        let naive = points
            .iter()
            .zip(&scalars)
            .fold(G1::identity(), |acc, (p, s)| acc.add(&p.mul(s)));
        assert_eq!(G1::msm(&points, &scalars), naive);
        let points2: Vec<G2> = (0..n)
            .map(|_| G2::generator().mul(&Scalar::random(&mut rng)))
            .collect();
        let naive2 = points2
            .iter()
            .zip(&scalars)
            .fold(G2::identity(), |acc, (p, s)| acc.add(&p.mul(s)));
        assert_eq!(G2::msm(&points2, &scalars), naive2);
        let short: Vec<u128> = (0..n).map(|i| (i as u128 + 3) << 100 | 12345).collect();
        let as_scalars: Vec<Scalar> = short.iter().map(|s| Scalar::from_u128(*s)).collect();
        assert_eq!(G1::msm_u128(&points, &short), G1::msm(&points, &as_scalars));
        assert_eq!(
            G2::msm_u128(&points2, &short),
            G2::msm(&points2, &as_scalars)
        );
    }
}

#[test]
fn pairing_is_bilinear() {
    let mut rng = ChaCha20Rng::seed_from_u64(5);
    let a = Scalar::random(&mut rng);
    let b = Scalar::random(&mut rng);
    let lhs = (G1::generator().mul(&a), G2::generator().mul(&b));
    let rhs = (G1::generator().mul(&(a * b)).neg(), G2::generator());
    assert!(pairing_product_is_one(&[lhs, rhs]));
    let wrong = (G1::generator().mul(&(a + b)).neg(), G2::generator());
    assert!(!pairing_product_is_one(&[lhs, wrong]));
}
