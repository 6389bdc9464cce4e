//! The tests of threshold BLS: dealing, signing and verifying shares, recovery
//! with bad shares named, batch verification and bisection, share sets.

use super::{deal, SecretShare, ShareSet, SignatureShare};
use crate::curve::Point;
use crate::field::Scalar;
use crate::lagrange::InterpolationMethod;
use crate::scheme::{MinPk, MinSig, Scheme};
use crate::{Error, NodeIndex};
use proptest::prelude::*;
use rand_chacha::rand_core::SeedableRng;
use rand_chacha::ChaCha20Rng;

fn sign_all<S: Scheme>(shares: &[SecretShare], msg: &[u8]) -> Vec<SignatureShare<S>> {
    let h = S::hash_message(msg);
    shares.iter().map(|s| s.sign_hashed::<S>(&h)).collect()
}

fn any_t_shares_give_one_signature<S: Scheme>(t: u32, n: u32, seed: u64) {
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let (public, shares) = deal::<S, _>(t, n, &mut rng).unwrap();
    let sigs = sign_all::<S>(&shares, b"round 1");
    let reference = public.aggregate(&sigs, InterpolationMethod::Naive).unwrap();
    assert!(public.verify(b"round 1", &reference));
    for trial in 0..3 {
        let mut subset = sigs.clone();
        for i in (1..subset.len()).rev() {
            let j = (rand_core::RngCore::next_u64(&mut rng) % (i as u64 + 1)) as usize;
            subset.swap(i, j);
        }
        subset.truncate(t as usize + trial % 2);
        for m in InterpolationMethod::ALL {
            assert_eq!(
                public.aggregate(&subset, m).unwrap(),
                reference,
                "method {m}"
            );
        }
    }
}

#[test]
fn any_t_shares_give_the_same_signature_both_schemes() {
    any_t_shares_give_one_signature::<MinPk>(3, 7, 1);
    any_t_shares_give_one_signature::<MinSig>(5, 8, 2);
    any_t_shares_give_one_signature::<MinSig>(1, 1, 3);
    any_t_shares_give_one_signature::<MinSig>(10, 10, 4);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(12))]
    #[test]
    fn any_t_valid_shares_give_the_same_signature(n in 1u32..40, t_frac in 0.0f64..=1.0, seed in any::<u64>()) {
        let t = ((n as f64 * t_frac).ceil() as u32).clamp(1, n);
        any_t_shares_give_one_signature::<MinSig>(t, n, seed);
    }
}

#[test]
fn aggregation_errors() {
    let mut rng = ChaCha20Rng::seed_from_u64(5);
    let (public, shares) = deal::<MinSig, _>(3, 5, &mut rng).unwrap();
    let sigs = sign_all::<MinSig>(&shares, b"m");
    let m = InterpolationMethod::RootsOfUnity;
    assert_eq!(
        public.aggregate(&sigs[..2], m),
        Err(Error::NotEnoughShares { have: 2, need: 3 })
    );
    let dup = vec![sigs[0], sigs[1], sigs[0]];
    assert_eq!(
        public.aggregate(&dup, m),
        Err(Error::DuplicateSigner {
            signer: NodeIndex(0)
        })
    );
    let mut out = sigs.clone();
    out[4].signer = NodeIndex(9);
    assert_eq!(
        public.aggregate(&out, m),
        Err(Error::SignerOutOfRange {
            signer: NodeIndex(9),
            n: 5
        })
    );
    let mut set = ShareSet::<MinSig>::new(b"m".to_vec(), 5);
    set.insert(b"m", sigs[0]).unwrap();
    assert_eq!(
        set.insert(b"x", sigs[1]),
        Err(Error::MessageMismatch {
            signer: NodeIndex(1)
        })
    );
    assert_eq!(
        set.insert(b"m", sigs[0]),
        Err(Error::DuplicateSigner {
            signer: NodeIndex(0)
        })
    );
    assert_eq!(
        set.insert(b"m", out[4]),
        Err(Error::SignerOutOfRange {
            signer: NodeIndex(9),
            n: 5
        })
    );
    assert!(deal::<MinSig, _>(0, 5, &mut rng).is_err());
    assert!(deal::<MinSig, _>(6, 5, &mut rng).is_err());
}

fn corrupt<S: Scheme>(share: &mut SignatureShare<S>) {
    share.signature = share.signature.add(&S::Signature::generator());
}

fn check_bad<S: Scheme>(bad: &[u32], n: u32, t: u32) {
    let mut rng = ChaCha20Rng::seed_from_u64(6 + bad.len() as u64);
    let (public, shares) = deal::<S, _>(t, n, &mut rng).unwrap();
    let mut sigs = sign_all::<S>(&shares, b"msg");
    for b in bad {
        corrupt(&mut sigs[*b as usize]);
    }
    let h = S::hash_message(b"msg");
    let expected: Vec<NodeIndex> = bad.iter().map(|b| NodeIndex(*b)).collect();
    assert_eq!(public.find_invalid(&h, &sigs, &mut rng), expected);
    for s in &sigs {
        assert_eq!(public.verify_share(&h, s), !bad.contains(&s.signer.0));
    }
    assert_eq!(public.batch_verify(&h, &sigs, &mut rng), bad.is_empty());
    let rec = public
        .recover(b"msg", &sigs, InterpolationMethod::RootsOfUnity, &mut rng)
        .unwrap();
    assert_eq!(rec.invalid, expected);
    if n as usize - bad.len() >= t as usize {
        assert!(public.verify(b"msg", &rec.signature.unwrap()));
    } else {
        assert!(rec.signature.is_none());
    }
}

#[test]
fn bisection_finds_exactly_the_bad_shares() {
    check_bad::<MinSig>(&[], 16, 6);
    check_bad::<MinSig>(&[0], 16, 6);
    check_bad::<MinSig>(&[3, 4, 9, 15], 16, 6);
    check_bad::<MinPk>(&[2, 7], 9, 4);
    check_bad::<MinSig>(&(0..12).collect::<Vec<_>>(), 12, 5);
}

#[test]
fn cancelling_pair_is_caught_by_random_weights() {
    // s_a + D and s_b - D sum to the honest sum: an unweighted batch check passes.
    let mut rng = ChaCha20Rng::seed_from_u64(8);
    let (public, shares) = deal::<MinSig, _>(3, 6, &mut rng).unwrap();
    let mut sigs = sign_all::<MinSig>(&shares, b"msg");
    let delta = <MinSig as Scheme>::Signature::generator().mul(&Scalar::from_u64(42));
    sigs[1].signature = sigs[1].signature.add(&delta);
    sigs[4].signature = sigs[4].signature.add(&delta.neg());
    let h = MinSig::hash_message(b"msg");
    // Unweighted check: sum of shares against sum of keys passes.
    let sum_sig = sigs
        .iter()
        .fold(<MinSig as Scheme>::Signature::identity(), |a, s| {
            a.add(&s.signature)
        });
    let sum_key = public
        .verification_keys()
        .iter()
        .fold(<MinSig as Scheme>::PublicKey::identity(), |a, k| a.add(k));
    assert!(MinSig::verify_hashed(&sum_key, &h, &sum_sig));
    assert!(!public.batch_verify(&h, &sigs, &mut rng));
    assert_eq!(
        public.find_invalid(&h, &sigs, &mut rng),
        vec![NodeIndex(1), NodeIndex(4)]
    );
}
