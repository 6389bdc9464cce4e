//! The resharing's properties: key kept, new shares sign, old ones do not mix,
//! Byzantine dealers excluded, too few dealers fail, a lost share comes back.

use super::*;
use crate::scheme::{MinPk, MinSig};
use proptest::prelude::*;

/// 7 members (t = 3) to 7 members (t = 4): parties 0..2 leave, 3..6 stay, 7..9
/// join.
fn replace_three<S: Scheme>(seed: u64) -> (ReshareEpoch<S>, Vec<SecretShare>, ReshareRun<S>) {
    let (polynomial, shares) = old_group::<S>(7, 3, seed);
    let epoch = epoch::<S>(&ids(0..7), polynomial, &ids(3..10), 4);
    let run = run_with(
        &epoch,
        &all_shares(&shares),
        &[],
        seed,
        &Disturbances::default(),
    );
    (epoch, shares, run)
}

fn key_kept_and_new_shares_sign<S: Scheme>(seed: u64) {
    let (epoch, shares, run) = replace_three::<S>(seed);
    let outputs = check_reshared(&run, &epoch, &[]);
    // Leaving members learn the new public side, and hold no share.
    for p in 0..3 {
        let out = run.results[p].clone().unwrap().unwrap();
        assert!(out.me.is_none() && out.share.is_none());
    }
    // Any t_new new members sign beacons that verify under the unchanged key.
    assert!(sign_beacon(&outputs, &[0, 1, 2, 3], 5));
    assert!(sign_beacon(&outputs, &[6, 2, 4, 5], 6));
    assert!(sign_beacon(&outputs, &[0, 1, 2, 3, 4, 5, 6], 7));
    // Fewer than t_new do not.
    let public = outputs[0].as_ref().unwrap().public_key().unwrap();
    assert_eq!(public.threshold(), 4);
    let msg = b"three are not enough";
    let three: Vec<_> = outputs[..3]
        .iter()
        .map(|o| o.as_ref().unwrap().share.clone().unwrap().sign::<S>(msg))
        .collect();
    assert!(public
        .aggregate(&three, InterpolationMethod::Naive)
        .is_err());
    // A member that stays (party 3: old index 3, new index 0) has a fresh share.
    let kept = outputs[0].as_ref().unwrap().share.clone().unwrap();
    assert_ne!(kept.value(), shares[3].value());
}

#[test]
fn group_key_is_kept_and_new_shares_sign_beacons() {
    key_kept_and_new_shares_sign::<MinSig>(1);
    key_kept_and_new_shares_sign::<MinPk>(2);
}

#[test]
fn old_shares_of_removed_members_do_not_combine_with_new_ones() {
    let (epoch, shares, run) = replace_three::<MinSig>(3);
    let outputs = check_reshared(&run, &epoch, &[]);
    let public = outputs[0].as_ref().unwrap().public_key().unwrap();
    let msg = b"mixing epochs";
    let new_share = |j: u32| -> SignatureShare<MinSig> {
        let share = outputs[j as usize].as_ref().unwrap().share.clone().unwrap();
        share.sign::<MinSig>(msg)
    };
    for removed in &shares[..3] {
        let old = removed.sign::<MinSig>(msg);
        // The removed member's share, put in any new member's place, next to t_new - 1 new shares.
        for slot in 0..7u32 {
            let others = (0..7).filter(|j| *j != slot).take(3);
            let mut mixed: Vec<_> = others.map(new_share).collect();
            mixed.push(SignatureShare {
                signer: NodeIndex(slot),
                signature: old.signature,
            });
            assert!(!combines(&public, msg, &mixed), "slot {slot}");
            // The control: the slot's own new share combines.
            mixed.pop();
            mixed.push(new_share(slot));
            assert!(combines(&public, msg, &mixed), "slot {slot}");
        }
    }
    // The caveat of the module documentation: old shares still combine among
    // themselves, so leaving members must erase theirs.
    let (old_shares, old_poly) = (&shares, epoch.old_public_polynomial.clone());
    let old_keys = crate::dkg::evaluate_in_exponent(&old_poly, &SignerDomain::new(7).unwrap());
    let old_group = ThresholdPublicKey::<MinSig>::new(
        3,
        Arc::new(SignerDomain::new(7).unwrap()),
        old_poly[0],
        old_keys,
    )
    .unwrap();
    let old_sigs: Vec<_> = old_shares[..3]
        .iter()
        .map(|s| s.sign::<MinSig>(msg))
        .collect();
    assert!(combines(&old_group, msg, &old_sigs));
}

#[test]
fn byzantine_dealers_are_excluded_and_resharing_succeeds() {
    use Disqualification::*;
    // 10 members (t = 4) to the same 10 plus 3 (t = 5).
    let (polynomial, shares) = old_group::<MinSig>(10, 4, 4);
    let epoch = epoch::<MinSig>(&ids(0..10), polynomial, &ids(0..13), 5);
    // Each Byzantine old dealer, its fault, and what the others exclude it for
    // (dealer 2 reveals the right sub-shares and stays qualified).
    let byzantine = [
        (
            1,
            ResharerFault::BadSubShares {
                victims: vec![NodeIndex(0), NodeIndex(11)],
            },
            Some(UnansweredComplaints),
        ),
        (
            2,
            ResharerFault::BadSubSharesThenJustified {
                victims: vec![NodeIndex(5), NodeIndex(12)],
            },
            None,
        ),
        (
            4,
            ResharerFault::WrongConstant,
            Some(InconsistentWithOldKey),
        ),
        (6, ResharerFault::WrongDegree, Some(WrongDegree)),
        (8, ResharerFault::Silent, Some(NoDeal)),
    ];
    let faults: Vec<(u32, ResharerFault)> =
        byzantine.iter().map(|(d, f, _)| (*d, f.clone())).collect();
    for seed in [5, 6] {
        let run = run_with(
            &epoch,
            &all_shares(&shares),
            &faults,
            seed,
            &Disturbances::all(),
        );
        let outputs = check_reshared(&run, &epoch, &[1, 4, 6, 8]);
        for out in outputs.iter().flatten() {
            crate::dkg::harness::assert_verdicts(&out.verdicts, 10, &byzantine);
        }
        // The victims of the justified dealer, and the new members, sign.
        assert!(sign_beacon(&outputs, &[5, 12, 0, 11, 3], seed));
    }
}

#[test]
fn fewer_than_t_old_honest_dealers_fail_with_a_clear_error() {
    let (polynomial, shares) = old_group::<MinPk>(7, 3, 7);
    let epoch = epoch::<MinPk>(&ids(0..7), polynomial, &ids(0..7), 3);
    let faults: Vec<(u32, ResharerFault)> = [0, 1, 2, 3]
        .into_iter()
        .map(|p| (p, ResharerFault::Silent))
        .chain([(4, ResharerFault::WrongConstant)])
        .collect();
    let run = run_with(
        &epoch,
        &all_shares(&shares),
        &faults,
        8,
        &Disturbances::default(),
    );
    for p in [5, 6] {
        let error = run.results[p].clone().unwrap().unwrap_err();
        assert_eq!(
            error,
            DkgFailure::TooFewDealers {
                qualified: 2,
                need: 3
            }
        );
        assert!(error.to_string().contains("need 3"), "{error}");
    }
}

#[test]
fn a_member_that_lost_its_key_rejoins_with_the_same_member_list() {
    let (polynomial, shares) = old_group::<MinSig>(7, 3, 9);
    let epoch = epoch::<MinSig>(&ids(0..7), polynomial, &ids(0..7), 3);
    let mut held = all_shares(&shares);
    held[4] = None;
    let run = run_with(&epoch, &held, &[], 10, &Disturbances::default());
    let outputs = check_reshared(&run, &epoch, &[]);
    let out = outputs[4].clone().unwrap();
    assert_eq!(
        out.verdicts.reason(NodeIndex(4)),
        Some(Disqualification::NoDeal)
    );
    assert!(sign_beacon(&outputs, &[4, 0, 6], 11));
    // The restored member persists its result and signs after a restart.
    let bytes = out.encode().unwrap();
    let reloaded = ReshareOutput::<MinSig>::decode(&bytes).unwrap();
    assert!(
        !format!("{reloaded:?}").contains(&format!("{:?}", out.share.as_ref().unwrap().value()))
    );
    let material = reloaded.key_material().unwrap();
    assert_eq!(material.secret_share, *out.share.as_ref().unwrap());
    let mut tampered = bytes.clone();
    tampered[bytes.len() - 3] ^= 1;
    assert!(ReshareOutput::<MinSig>::decode(&tampered).is_err());
}

#[test]
fn a_reshared_group_reshares_again() {
    let (epoch1, _, run) = replace_three::<MinPk>(12);
    let outputs = check_reshared(&run, &epoch1, &[]);
    let first = outputs[0].clone().unwrap();
    let epoch2 = epoch::<MinPk>(&ids(3..10), first.public_polynomial.clone(), &ids(5..9), 2)
        .with(|e| e.epoch = 2)
        .unwrap();
    let held: Vec<Option<SecretShare>> = outputs
        .iter()
        .map(|o| o.clone().unwrap().share.clone())
        .collect();
    let run = run_with(&epoch2, &held, &[], 13, &Disturbances::default());
    let outputs = check_reshared(&run, &epoch2, &[]);
    assert_eq!(
        outputs[0].as_ref().unwrap().group_key(),
        epoch1.group_key().unwrap()
    );
    assert!(sign_beacon(&outputs, &[3, 1], 14));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(8))]

    /// Any sizes and thresholds: the key is kept and any t_new new members sign.
    #[test]
    fn any_sizes_keep_the_key(
        n_old in 1u32..8,
        t_old_frac in 0.0f64..=1.0,
        keep_frac in 0.0f64..=1.0,
        joining in 0u32..4,
        t_new_frac in 0.0f64..=1.0,
        seed in any::<u64>(),
    ) {
        let t_old = ((n_old as f64 * t_old_frac).ceil() as u32).clamp(1, n_old);
        let kept = (n_old as f64 * keep_frac) as u32;
        let new: Vec<u32> = (n_old - kept..n_old + joining.max(u32::from(kept == 0))).collect();
        let n_new = new.len() as u32;
        let t_new = ((n_new as f64 * t_new_frac).ceil() as u32).clamp(1, n_new);
        let (polynomial, shares) = old_group::<MinSig>(n_old, t_old, seed);
        let epoch = epoch::<MinSig>(&ids(0..n_old), polynomial, &ids(new), t_new);
        let run = run_with(&epoch, &all_shares(&shares), &[], seed, &Disturbances::default());
        let outputs = check_reshared(&run, &epoch, &[]);
        let signers: Vec<u32> = (n_new - t_new..n_new).collect();
        prop_assert!(sign_beacon(&outputs, &signers, 1 + seed % 1000));
    }
}

/// Delivers every queued message whose link `cut` leaves open, and what the
/// deliveries send, until nothing is left; returns the outputs.
fn pump(
    parties: &mut [Resharer<MinSig>],
    queue: &mut Vec<(u32, u32, DkgMessage<MinSig>)>,
    cut: impl Fn(u32, u32) -> bool,
    outputs: &mut [Option<Arc<ReshareOutput<MinSig>>>],
) {
    pump_holding(parties, queue, cut, &mut Vec::new(), outputs);
}

/// [`pump`], keeping the messages `cut` holds back in `held` (to deliver
/// them late).
fn pump_holding(
    parties: &mut [Resharer<MinSig>],
    queue: &mut Vec<(u32, u32, DkgMessage<MinSig>)>,
    cut: impl Fn(u32, u32) -> bool,
    held: &mut Vec<(u32, u32, DkgMessage<MinSig>)>,
    outputs: &mut [Option<Arc<ReshareOutput<MinSig>>>],
) {
    while let Some((from, to, message)) = queue.pop() {
        if cut(from, to) {
            held.push((from, to, message));
            continue;
        }
        let input = ReshareInput::Message {
            from: NodeIndex(from),
            message,
        };
        let actions = parties[to as usize].handle(Time::ZERO, input);
        route(to, actions, parties.len() as u32, queue, outputs);
    }
}

fn route(
    from: u32,
    actions: Vec<ResharePhaseOutput<MinSig>>,
    n: u32,
    queue: &mut Vec<(u32, u32, DkgMessage<MinSig>)>,
    outputs: &mut [Option<Arc<ReshareOutput<MinSig>>>],
) {
    for action in actions {
        match action {
            ResharePhaseOutput::Effect(Effect::Send { to, message }) => {
                queue.push((from, to.0, message))
            }
            ResharePhaseOutput::Effect(Effect::Broadcast(message)) => {
                for to in (0..n).filter(|p| *p != from) {
                    queue.push((from, to, message.clone()));
                }
            }
            ResharePhaseOutput::Done(output) => outputs[from as usize] = Some(output),
            _ => {}
        }
    }
}

/// A participant that took part late — it got a deal the others had given
/// up on before their deadline — combines other dealers than they did, so its
/// keys differ from the ones the chain switches to. With the dealers the
/// others combined (which the chain records) it recombines its share of the
/// agreed polynomial; a participant without one of those deals cannot.
#[test]
fn a_late_participant_adopts_the_dealers_the_others_combined() {
    let (polynomial, shares) = old_group::<MinSig>(4, 2, 5);
    let e = epoch::<MinSig>(&ids(0..4), polynomial.clone(), &ids(0..4), 2);
    let mut parties: Vec<Resharer<MinSig>> = (0..4)
        .map(|p| {
            Resharer::new(
                e.clone(),
                id(p),
                Some(shares[p as usize].clone()),
                [p as u8 + 40; 32],
                Memo::disabled(),
            )
            .unwrap()
        })
        .collect();
    let mut queue = Vec::new();
    let mut outputs = vec![None; 4];
    for p in 0..4u32 {
        let actions = parties[p as usize].handle(Time::ZERO, ReshareInput::Start);
        route(p, actions, 4, &mut queue, &mut outputs);
    }
    // Dealer 0's deal and sub-shares reach participant 3 only (and itself)
    // within the phases.
    let late = |from: u32, to: u32| from == 0 && (to == 1 || to == 2);
    let mut held = Vec::new();
    pump_holding(&mut parties, &mut queue, late, &mut held, &mut outputs);
    for timer in [
        DkgTimer::EndOfDeal,
        DkgTimer::EndOfComplaints,
        DkgTimer::EndOfJustifications,
    ] {
        for p in 0..4u32 {
            let actions = parties[p as usize].handle(Time::ZERO, ReshareInput::Timer(timer));
            route(p, actions, 4, &mut queue, &mut outputs);
        }
        pump_holding(&mut parties, &mut queue, late, &mut held, &mut outputs);
    }
    let out: Vec<Arc<ReshareOutput<MinSig>>> = outputs.into_iter().map(Option::unwrap).collect();
    assert_eq!(
        out[1].verdicts.qual,
        vec![NodeIndex(1), NodeIndex(2), NodeIndex(3)]
    );
    assert_eq!(out[1].public_polynomial, out[2].public_polynomial);
    assert_eq!(out[3].verdicts.qual.len(), 4, "the late one kept dealer 0");
    assert_ne!(out[3].public_polynomial, out[1].public_polynomial);
    assert_eq!(out[3].public_polynomial[0], polynomial[0], "same group key");
    // The others combined dealers 1 and 2.
    let combined = [NodeIndex(1), NodeIndex(2)];
    let adopted = parties[3].adopt(&combined).unwrap();
    assert_eq!(adopted.public_polynomial, out[1].public_polynomial);
    let share = adopted.share.clone().unwrap();
    assert_eq!(
        share.verification_key::<MinSig>(),
        adopted.verification_keys[share.index.0 as usize]
    );
    // Participant 1 never saw dealer 0's deal: it cannot combine it.
    assert!(parties[1].adopt(&[NodeIndex(0), NodeIndex(1)]).is_none());
    // Not t_old dealers, or out of order: refused.
    assert!(parties[3].adopt(&[NodeIndex(1)]).is_none());
    assert!(parties[3].adopt(&[NodeIndex(2), NodeIndex(1)]).is_none());
    // Dealer 0's messages reach participant 1 late: it can now recombine the
    // keys of participant 3's dealers (which the chain may name), and dealer
    // 0, which it had disqualified for dealing nothing in time, is then
    // qualified, not both.
    assert!(out[1].verdicts.reason(NodeIndex(0)).is_some());
    queue.extend(held.into_iter().filter(|(_, to, _)| *to == 1));
    pump(&mut parties, &mut queue, |_, _| false, &mut vec![None; 4]);
    let named = [NodeIndex(0), NodeIndex(1)];
    let adopted = parties[1].adopt(&named).unwrap();
    assert_eq!(adopted.public_polynomial, out[3].public_polynomial);
    assert_eq!(adopted.verdicts.qual, named.to_vec());
    assert!(adopted.verdicts.is_qualified(NodeIndex(0)));
    assert_eq!(adopted.verdicts.reason(NodeIndex(0)), None);
}
