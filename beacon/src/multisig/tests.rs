use super::*;
use crate::threshold::deal;
use crate::{MinPk, MinSig};
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;

fn members<S: Scheme>(n: u32, seed: u64) -> (Vec<ConsensusSecretKey>, MultisigKeys<S>) {
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let secrets: Vec<_> = (0..n)
        .map(|_| ConsensusSecretKey::random(&mut rng))
        .collect();
    let keys = secrets.iter().map(|s| s.public::<S>()).collect();
    (secrets, MultisigKeys::new(Arc::new(keys)))
}

fn sign_all<S: Scheme>(
    secrets: &[ConsensusSecretKey],
    who: &[u32],
    hashed: &S::Signature,
) -> Vec<SignatureShare<S>> {
    who.iter()
        .map(|i| SignatureShare {
            signer: NodeIndex(*i),
            signature: secrets[*i as usize].sign_hashed::<S>(hashed),
        })
        .collect()
}

fn possession_checks<S: Scheme>() {
    let (secrets, _) = members::<S>(2, 1);
    let listing = secrets[0].listing::<S>();
    assert!(listing.decode::<S>().is_ok());
    // Another member's proof, or a vote on the key's bytes, is no proof.
    let other = ConsensusListing {
        possession: secrets[1].listing::<S>().possession,
        ..listing.clone()
    };
    assert_eq!(
        other.decode::<S>(),
        Err(Error::InvalidSignature(SignatureError::Possession))
    );
    let vote = secrets[0].sign_hashed::<S>(&hash_vote::<S>(&listing.public_key));
    let as_proof = ConsensusListing {
        possession: vote.to_bytes(),
        ..listing.clone()
    };
    assert!(as_proof.decode::<S>().is_err());
    // Wrong lengths and bad points are errors, not panics.
    let short = ConsensusListing {
        public_key: listing.public_key[1..].to_vec(),
        ..listing
    };
    assert!(short.decode::<S>().is_err());
}

#[test]
fn a_proof_of_possession_verifies_only_for_its_key_and_tag() {
    possession_checks::<MinPk>();
    possession_checks::<MinSig>();
}

#[test]
fn a_rogue_key_has_no_proof() {
    // The chosen-key attack: pk' = g^x - pk_honest makes `x` sign alone for
    // {honest, rogue}. Its maker knows no secret of pk', so it cannot prove
    // possession; a proof made with `x` is a proof of g^x, not of pk'.
    let (secrets, keys) = members::<MinPk>(1, 2);
    let mut rng = ChaCha20Rng::seed_from_u64(3);
    let x = ConsensusSecretKey::random(&mut rng);
    let rogue = x.public::<MinPk>().add(&keys.keys()[0].neg());
    let both = MultisigKeys::<MinPk>::new(Arc::new(vec![keys.keys()[0], rogue]));
    let hashed = hash_vote::<MinPk>(b"block");
    let forged = x.sign_hashed::<MinPk>(&hashed);
    let signers = SignerBitmap::of(2, [NodeIndex(0), NodeIndex(1)]).unwrap();
    // Without proofs the forgery verifies: this is what the proofs prevent.
    assert!(both.verify(&hashed, &forged, &signers));
    let listing = ConsensusListing {
        public_key: rogue.to_bytes(),
        possession: x.prove_possession::<MinPk>().to_bytes(),
    };
    assert!(listing.decode::<MinPk>().is_err());
    let _ = secrets;
}

#[test]
fn beacon_shares_are_not_independent_keys() {
    // Shares of one polynomial summed over the whole domain of roots of unity
    // give n times the group secret: whoever holds the group's signature on a
    // message (any t_b colluders) would "multi-sign" it for every member. A
    // verifier that summed verification keys would accept it; members' own
    // keys refuse it.
    let n = 4u32;
    let mut rng = ChaCha20Rng::seed_from_u64(4);
    let (public, shares) = deal::<MinPk, _>(2, n, &mut rng).unwrap();
    let hashed = hash_vote::<MinPk>(b"fast vote");
    let group_secret_sig = {
        let partials: Vec<_> = shares[..2]
            .iter()
            .map(|s| s.sign_hashed::<MinPk>(&hashed))
            .collect();
        public
            .aggregate(&partials, crate::InterpolationMethod::RootsOfUnity)
            .unwrap()
    };
    let forged = group_secret_sig.mul(&Scalar::from_u64(u64::from(n)));
    let all = SignerBitmap::of(n, (0..n).map(NodeIndex)).unwrap();
    let share_keys = MultisigKeys::<MinPk>::new(Arc::new(public.verification_keys().to_vec()));
    assert!(
        share_keys.verify(&hashed, &forged, &all),
        "the attack is real"
    );
    let (_, own) = members::<MinPk>(n, 5);
    assert!(!own.verify(&hashed, &forged, &all));
}

fn aggregates<S: Scheme>() {
    let n = 10;
    let (secrets, keys) = members::<S>(n, 6);
    let hashed = hash_vote::<S>(b"commit");
    for who in [
        vec![3u32],
        vec![0, 2, 5],
        (0..7).collect(),
        (0..10).collect(),
    ] {
        let sigs = sign_all::<S>(&secrets, &who, &hashed);
        let (sum, signers) = aggregate::<S>(n, &sigs).unwrap();
        assert_eq!(signers.count() as usize, who.len());
        assert!(keys.verify(&hashed, &sum, &signers), "{who:?}");
        // The two ways of adding the keys agree.
        let direct = signers.signers().fold(S::PublicKey::identity(), |a, i| {
            a.add(&keys.keys()[i.0 as usize])
        });
        assert_eq!(keys.aggregate_key(&signers).unwrap(), direct);
        // Another bitmap, another message or another sum does not verify.
        let mut more = signers.clone();
        let extra = (0..n).map(NodeIndex).find(|i| !signers.contains(*i));
        if let Some(extra) = extra {
            more.insert(extra).unwrap();
            assert!(!keys.verify(&hashed, &sum, &more));
        }
        assert!(!keys.verify(&hash_vote::<S>(b"other"), &sum, &signers));
    }
    assert!(!keys.verify(&hashed, &S::Signature::generator(), &SignerBitmap::new(n)));
    let wrong_n = SignerBitmap::of(n + 1, [NodeIndex(0)]).unwrap();
    assert!(keys.aggregate_key(&wrong_n).is_err());
    let twice = sign_all::<S>(&secrets, &[1, 1], &hashed);
    assert!(aggregate::<S>(n, &twice).is_err());
}

#[test]
fn multi_signatures_verify_against_the_signers_keys() {
    aggregates::<MinPk>();
    aggregates::<MinSig>();
}

#[test]
fn bisection_names_exactly_the_bad_signers() {
    let n = 16;
    let (secrets, keys) = members::<MinPk>(n, 7);
    let hashed = hash_vote::<MinPk>(b"vote");
    let mut sigs = sign_all::<MinPk>(&secrets, &(0..n).collect::<Vec<_>>(), &hashed);
    let mut rng = ChaCha20Rng::seed_from_u64(8);
    assert!(keys.batch_verify(&hashed, &sigs, &mut rng));
    assert!(keys.find_invalid(&hashed, &sigs, &mut rng).is_empty());
    sigs[3].signature = secrets[4].sign_hashed::<MinPk>(&hashed);
    sigs[11].signature = sigs[11].signature.add(&MinPk::hash_message(b"x"));
    sigs.push(SignatureShare {
        signer: NodeIndex(n),
        signature: sigs[0].signature,
    });
    assert!(!keys.batch_verify(&hashed, &sigs, &mut rng));
    assert_eq!(
        keys.find_invalid(&hashed, &sigs, &mut rng),
        vec![NodeIndex(3), NodeIndex(11), NodeIndex(n)]
    );
}

#[test]
fn bitmaps_refuse_bad_encodings() {
    let map = SignerBitmap::of(10, [NodeIndex(0), NodeIndex(9)]).unwrap();
    let bytes = crate::wire::encode(&map).unwrap();
    assert_eq!(crate::wire::decode::<SignerBitmap>(&bytes).unwrap(), map);
    assert!(bytes.len() <= SignerBitmap::encoded_len(10));
    assert!(SignerBitmap::from_parts(10, vec![0; 3]).is_err());
    assert!(SignerBitmap::from_parts(10, vec![0, 0b100]).is_err());
    assert!(SignerBitmap::from_parts(10, vec![0xff, 0b11]).is_ok());
    assert!(SignerBitmap::of(10, [NodeIndex(10)]).is_err());
    let bad = crate::wire::encode(&(10u32, vec![0u8, 0b1000_0000])).unwrap();
    assert!(crate::wire::decode::<SignerBitmap>(&bad).is_err());
    assert_eq!(map.missing().count(), 8);
    assert!(!map.contains(NodeIndex(99)));
}

#[test]
fn secret_keys_round_trip_and_refuse_zero() {
    let mut rng = ChaCha20Rng::seed_from_u64(9);
    let k = ConsensusSecretKey::random(&mut rng);
    assert_eq!(ConsensusSecretKey::from_bytes(&k.to_bytes()).unwrap(), k);
    assert!(ConsensusSecretKey::from_bytes(&[0; 32]).is_err());
    assert!(ConsensusSecretKey::from_bytes(&[0xff; 32]).is_err());
    assert!(!format!("{k:?}").contains(&hex::encode(k.to_bytes())));
}

#[test]
fn a_batch_of_proofs_fails_with_any_bad_one() {
    let (secrets, _) = members::<MinPk>(6, 11);
    let mut pairs: Vec<_> = secrets
        .iter()
        .map(|s| s.listing::<MinPk>().points::<MinPk>().unwrap())
        .collect();
    assert!(verify_possessions::<MinPk>(&pairs));
    assert!(verify_possessions::<MinPk>(&[]));
    // Whole pairs in another order: still every proof of its own key.
    pairs.swap(1, 2);
    assert!(verify_possessions::<MinPk>(&pairs));
    // Two proofs exchanged between their keys: each a valid proof, of the
    // other key.
    let mut exchanged = pairs.clone();
    exchanged[1].1 = pairs[2].1;
    exchanged[2].1 = pairs[1].1;
    assert!(!verify_possessions::<MinPk>(&exchanged));
    let mut bad = pairs.clone();
    bad[4].1 = bad[3].1;
    assert!(!verify_possessions::<MinPk>(&bad));
    let (secrets, _) = members::<MinSig>(3, 12);
    let mut g1: Vec<_> = secrets
        .iter()
        .map(|s| s.listing::<MinSig>().points::<MinSig>().unwrap())
        .collect();
    assert!(verify_possessions::<MinSig>(&g1));
    g1[0].1 = g1[0].1.add(&g1[1].1);
    assert!(!verify_possessions::<MinSig>(&g1));
}

/// A batch of several jobs ([`POSSESSIONS_PER_JOB`]) fails on a bad proof in
/// any job, decodes listings naming the first bad one, and counts the
/// operations of one batch (a Miller loop per key and one for the proofs'
/// sum, one final exponentiation) on any number of threads.
#[test]
fn a_split_batch_of_proofs_counts_one_batch_on_any_threads() {
    let n = 2 * POSSESSIONS_PER_JOB + 5;
    let (secrets, _) = members::<MinSig>(n as u32, 13);
    let listings: Vec<ConsensusListing> = secrets.iter().map(|s| s.listing::<MinSig>()).collect();
    let pairs = decode_listings(&listings, ConsensusListing::points::<MinSig>).unwrap();
    for threads in [1, 3] {
        crate::parallel::set_threads(threads);
        crate::cost::take();
        assert!(verify_possessions::<MinSig>(&pairs), "{threads} threads");
        let counts = crate::cost::take();
        assert_eq!(counts.miller_loops, n as u64 + 1, "{threads} threads");
        assert_eq!(counts.final_exps, 1, "{threads} threads");
        assert_eq!((counts.hash_g1, counts.mul_g2), (n as u64, n as u64));
        for bad in [0, n - 1] {
            let mut wrong = pairs.clone();
            wrong[bad].1 = wrong[bad].1.add(&wrong[1].1);
            assert!(!verify_possessions::<MinSig>(&wrong), "{threads} threads");
        }
    }
    crate::parallel::set_threads(2);
    let mut broken = listings.clone();
    broken[n - 2].public_key = vec![0u8; 3];
    broken[n - 1].public_key = vec![0u8; 3];
    let (at, _) = decode_listings(&broken, ConsensusListing::public_key::<MinSig>).unwrap_err();
    assert_eq!(at, n - 2);
}
