//! Tests of the resharing: helpers here; the protocol's properties in
//! [`protocol`], parameter and input handling in [`inputs`], and the 64 → 96
//! harness run in [`large`].

mod inputs;
// Named exception: the large test reports wall time (a measurement, not
// protocol code).
#[allow(clippy::disallowed_methods)]
mod large;
mod protocol;

use super::harness::{self, ByzantineResharer, ReshareParticipant, ReshareRun, ResharerFault};
use super::*;
use crate::chain::{round_message, Beacon, ChainInfo};
use crate::dkg::harness::Disturbances;
use crate::dkg::{Disqualification, DkgFailure};
use crate::effect::Effect;
use crate::field::Scalar;
use crate::lagrange::{InterpolationMethod, SignerDomain};
use crate::memo::Memo;
use crate::threshold::{SecretShare, ShareSet, SignatureShare, ThresholdPublicKey};
use crate::{wire, Time};
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;

/// The identity of party `i`.
fn id(i: u32) -> MemberId {
    let mut bytes = [0u8; 32];
    bytes[..4].copy_from_slice(&i.to_be_bytes());
    bytes[31] = 0xa5;
    MemberId(bytes)
}

fn ids(parties: impl IntoIterator<Item = u32>) -> Vec<MemberId> {
    parties.into_iter().map(id).collect()
}

/// A trusted-dealer `(t, n)` group: its public polynomial and every share.
fn old_group<S: Scheme>(n: u32, t: u32, seed: u64) -> (Arc<Vec<S::PublicKey>>, Vec<SecretShare>) {
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let poly: Vec<Scalar> = (0..t).map(|_| Scalar::random(&mut rng)).collect();
    let g = S::PublicKey::generator();
    let commitments = poly.iter().map(|a| g.mul(a)).collect();
    let values = SignerDomain::new(n).unwrap().evaluate_all(&poly);
    let shares = values
        .into_iter()
        .enumerate()
        .map(|(i, v)| SecretShare::new(NodeIndex(i as u32), v))
        .collect();
    (Arc::new(commitments), shares)
}

/// The resharing of the group of parties `old` (with `polynomial`) to the
/// parties `new` with threshold `t_new`.
fn epoch<S: Scheme>(
    old: &[MemberId],
    polynomial: Arc<Vec<S::PublicKey>>,
    new: &[MemberId],
    t_new: u32,
) -> ReshareEpoch<S> {
    ReshareSettings {
        epoch: 1,
        old_members: old.to_vec(),
        old_public_polynomial: polynomial,
        new_members: new.to_vec(),
        new_threshold: t_new,
        phase_timeout_us: 1_000,
    }
    .build()
    .unwrap()
}

/// Runs `epoch` with old shares `shares` (by old index), the participants of
/// `faults` replaced by Byzantine dealers.
fn run_with<S: Scheme>(
    epoch: &ReshareEpoch<S>,
    shares: &[Option<SecretShare>],
    faults: &[(u32, ResharerFault)],
    seed: u64,
    disturbances: &Disturbances,
) -> ReshareRun<S> {
    let memo = Memo::shared();
    let mut participants = harness::honest(epoch, shares, seed, &memo).unwrap();
    let roster = epoch.roster();
    let byzantine = |p: u32, fault: &ResharerFault| -> Box<ReshareParticipant<S>> {
        let id = roster.participants()[p as usize];
        let share = shares[p as usize].clone();
        let seed = harness::participant_seed(seed, p);
        let inner = Resharer::new(epoch.clone(), id, share, seed, memo.clone()).unwrap();
        Box::new(ByzantineResharer::new(inner, fault.clone()))
    };
    for (p, fault) in faults {
        participants[*p as usize] = byzantine(*p, fault);
    }
    harness::run(participants, seed, disturbances)
}

fn all_shares(shares: &[SecretShare]) -> Vec<Option<SecretShare>> {
    shares.iter().cloned().map(Some).collect()
}

/// Every participant not in `byzantine` reshared to the same public polynomial,
/// which keeps the group key; every new member's share matches its key. Returns
/// the new members' outputs by new index (`None` for Byzantine ones).
fn check_reshared<S: Scheme>(
    run: &ReshareRun<S>,
    epoch: &ReshareEpoch<S>,
    byzantine: &[u32],
) -> Vec<Option<Arc<ReshareOutput<S>>>> {
    let roster = epoch.roster();
    let mut first: Option<Arc<ReshareOutput<S>>> = None;
    let mut by_new = vec![None; epoch.new_members.len()];
    for p in (0..roster.len()).filter(|p| !byzantine.contains(p)) {
        let out = match &run.results[p as usize] {
            Some(Ok(out)) => out.clone(),
            other => panic!("participant {p}: {other:?}"),
        };
        out.check().unwrap();
        assert_eq!(
            out.group_key(),
            epoch.group_key().unwrap(),
            "group key kept"
        );
        assert_eq!(out.me, roster.new_index(NodeIndex(p)));
        assert_eq!(out.share.is_some(), out.me.is_some());
        if let Some(f) = &first {
            assert_eq!(out.public_polynomial, f.public_polynomial);
            assert_eq!(out.verification_keys, f.verification_keys);
            assert_eq!(out.verdicts.qual, f.verdicts.qual);
        }
        if let Some(j) = out.me {
            by_new[j.0 as usize] = Some(out.clone());
        }
        first.get_or_insert(out);
    }
    by_new
}

/// `signers` (new indices) sign round `round` of a chain through the collector's
/// path (`ShareSet`, then recovery); the beacon verifies under the old chain info.
fn sign_beacon<S: Scheme>(
    outputs: &[Option<Arc<ReshareOutput<S>>>],
    signers: &[u32],
    round: u64,
) -> bool {
    let any = outputs.iter().flatten().next().expect("one output");
    let public = any.public_key().unwrap();
    let previous = vec![round as u8; 32];
    let message = round_message(S::ID, round, &previous);
    let mut set = ShareSet::<S>::new(message.to_vec(), any.n);
    for j in signers {
        let share = outputs[*j as usize]
            .as_ref()
            .unwrap()
            .share
            .clone()
            .unwrap();
        set.insert(&message, share.sign::<S>(&message)).unwrap();
    }
    let mut rng = ChaCha20Rng::seed_from_u64(round);
    let recovered = public
        .recover(
            &message,
            &set.shares(),
            InterpolationMethod::RootsOfUnity,
            &mut rng,
        )
        .unwrap();
    assert!(recovered.invalid.is_empty());
    let Some(signature) = recovered.signature else {
        return false;
    };
    let info = ChainInfo {
        public_key: any.group_key().to_bytes(),
        period: 3,
        genesis_time: 0,
        genesis_seed: vec![1; 32],
        scheme: S::ID,
        beacon_id: "default".into(),
    };
    let beacon = Beacon {
        round,
        signature: signature.to_bytes(),
        previous_signature: previous,
    };
    info.verify_beacon(&beacon).is_ok()
}

/// Aggregates `shares` with the new group's coefficients and verifies the result
/// under the group key.
fn combines<S: Scheme>(
    public: &ThresholdPublicKey<S>,
    msg: &[u8],
    shares: &[SignatureShare<S>],
) -> bool {
    match public.aggregate(shares, InterpolationMethod::Naive) {
        Ok(sig) => public.verify(msg, &sig),
        Err(_) => false,
    }
}
