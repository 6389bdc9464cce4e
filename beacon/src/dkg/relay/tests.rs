//! The relay's own cases: consistency, totality, equivocation, bounded pulls.

use super::*;
use crate::dkg::{Complaint, Deal};
use crate::MinSig;
use crate::Point as _;
use std::collections::VecDeque;
use std::sync::Arc;

type M = DkgMessage<MinSig>;

fn relays(n: u32) -> Vec<BroadcastRelay> {
    relays_for(n, [1; 32])
}

fn relays_for(n: u32, session: [u8; 32]) -> Vec<BroadcastRelay> {
    let (secrets, keys) = crate::dkg::harness::member_keys(n, |i| [i as u8 + 1; 32]);
    secrets
        .into_iter()
        .enumerate()
        .map(|(i, k)| {
            BroadcastRelay::new(
                NodeIndex(i as u32),
                session,
                k,
                keys.clone(),
                Memo::disabled(),
            )
        })
        .collect()
}

fn deal(dealer: u32, x: u64) -> M {
    deal_in([1; 32], dealer, x)
}

fn deal_in(session: [u8; 32], dealer: u32, x: u64) -> M {
    let g = <MinSig as Scheme>::PublicKey::generator();
    let c = g.mul(&crate::Scalar::from_u64(x));
    DkgMessage::Deal(Arc::new(Deal::new(
        session,
        NodeIndex(dealer),
        crate::dkg::Commitments::new(&[vec![c]]),
        [0; 32],
    )))
}

fn complaint(from: u32, dealers: &[u32]) -> M {
    DkgMessage::Complaint(Complaint {
        session: [1; 32],
        from: NodeIndex(from),
        dealers: dealers.iter().map(|d| NodeIndex(*d)).collect(),
    })
}

fn delivered(actions: &[RelayOutput<MinSig>]) -> usize {
    actions
        .iter()
        .filter(|a| matches!(a, RelayOutput::Deliver { .. }))
        .count()
}

fn equivocations(actions: &[RelayOutput<MinSig>]) -> Vec<u32> {
    actions
        .iter()
        .filter_map(|a| match a {
            RelayOutput::Equivocation(o) => Some(o.0),
            _ => None,
        })
        .collect()
}

/// What a [`flood`] produced, per member.
#[derive(Default)]
struct Flooded {
    delivered: Vec<Vec<(u32, M)>>,
    faulty: Vec<Vec<u32>>,
    consistent: Vec<Vec<Kind>>,
    /// Messages sent, by kind name.
    sent: BTreeMap<&'static str, usize>,
}

fn name(m: &RelayMessage) -> &'static str {
    match m {
        RelayMessage::Broadcast { .. } => "broadcast",
        RelayMessage::Summary { .. } => "summary",
        RelayMessage::PullVersions { .. } => "pull-versions",
        RelayMessage::Versions { .. } => "versions",
        RelayMessage::Pull { .. } => "pull",
    }
}

/// Queues the actions of member `who`, recording what they report.
fn apply(
    who: u32,
    n: usize,
    actions: Vec<RelayOutput<MinSig>>,
    queue: &mut VecDeque<(u32, u32, RelayMessage)>,
    out: &mut Flooded,
) {
    for a in actions {
        match a {
            RelayOutput::Deliver { origin, message } => {
                out.delivered[who as usize].push((origin.0, message))
            }
            RelayOutput::Effect(Effect::Send { to, message }) => {
                *out.sent.entry(name(&message)).or_default() += 1;
                queue.push_back((who, to.0, message))
            }
            RelayOutput::Effect(Effect::Broadcast(message)) => {
                for j in (0..n as u32).filter(|j| *j != who) {
                    *out.sent.entry(name(&message)).or_default() += 1;
                    queue.push_back((who, j, message.clone()));
                }
            }
            RelayOutput::Effect(Effect::SetTimer { timer, .. }) => match timer {},
            RelayOutput::Equivocation(o) => out.faulty[who as usize].push(o.0),
            RelayOutput::Consistent(k) => out.consistent[who as usize].push(k),
        }
    }
}

/// Carries every relay message until none is left (FIFO). `announce` says,
/// per member, which kinds it announces once the queue first runs dry (as a
/// DKG would once it holds what it waits for).
fn flood(
    r: &mut [BroadcastRelay],
    mut queue: VecDeque<(u32, u32, RelayMessage)>,
    announce: &[(u32, Kind)],
) -> Flooded {
    let n = r.len();
    let mut out = Flooded {
        delivered: vec![Vec::new(); n],
        faulty: vec![Vec::new(); n],
        consistent: vec![Vec::new(); n],
        sent: BTreeMap::new(),
    };
    let mut announced = false;
    loop {
        while let Some((from, to, m)) = queue.pop_front() {
            let Ok(actions) = r[to as usize].receive::<MinSig>(NodeIndex(from), m) else {
                continue;
            };
            apply(to, n, actions, &mut queue, &mut out);
        }
        if announced {
            return out;
        }
        announced = true;
        for (who, kind) in announce {
            let actions = r[*who as usize].announce::<MinSig>(*kind);
            apply(*who, n, actions, &mut queue, &mut out);
        }
    }
}

fn everyone(n: u32, kind: Kind) -> Vec<(u32, Kind)> {
    (0..n).map(|i| (i, kind)).collect()
}

#[test]
fn a_deal_reaches_a_member_the_dealer_skipped() {
    let mut r = relays(4);
    let b = r[0].sign(&deal(0, 5)).unwrap();
    // The dealer skips member 2; the others announce what they hold.
    let queue = [(0, 1, b.clone()), (0, 3, b.clone())].into_iter().collect();
    let out = flood(&mut r, queue, &everyone(4, Kind::Deal));
    for m in 1..4 {
        assert_eq!(out.delivered[m].len(), 1, "member {m}");
        assert!(out.faulty[m].is_empty());
        assert_eq!(out.consistent[m], vec![Kind::Deal], "member {m}");
    }
    // Member 2 asked one list and one payload; nobody else did.
    assert!(
        out.sent["pull"] >= 1 && out.sent["pull"] <= 3,
        "{:?}",
        out.sent
    );
    // A copy arriving later is not delivered again.
    let again = r[2].receive::<MinSig>(NodeIndex(0), b).unwrap();
    assert_eq!(delivered(&again), 0);
}

#[test]
fn two_signed_deals_prove_equivocation_everywhere() {
    let mut r = relays(4);
    let v1 = r[0].sign(&deal(0, 5)).unwrap();
    let v2 = r[0].sign(&deal(0, 6)).unwrap();
    let queue = [(0, 1, v1), (0, 2, v2)].into_iter().collect();
    let out = flood(&mut r, queue, &everyone(4, Kind::Deal));
    for m in 1..4 {
        assert_eq!(out.faulty[m], vec![0], "member {m}");
        // Views converge on both versions: the kind is consistent.
        assert_eq!(out.consistent[m], vec![Kind::Deal], "member {m}");
    }
    // Each of members 1 and 2 delivered only the version it got first.
    assert_eq!(out.delivered[1].len(), 1);
    assert_eq!(out.delivered[2].len(), 1);
}

#[test]
fn two_complaint_versions_prove_equivocation_and_only_the_first_is_delivered() {
    let mut r = relays(4);
    let v1 = r[3].sign(&complaint(3, &[0])).unwrap();
    let v2 = r[3].sign(&complaint(3, &[1])).unwrap();
    let mut got = r[1].receive::<MinSig>(NodeIndex(3), v1).unwrap();
    got.extend(r[1].receive::<MinSig>(NodeIndex(3), v2).unwrap());
    assert_eq!(delivered(&got), 1);
    assert_eq!(equivocations(&got), vec![3]);
}

#[test]
fn forged_or_malformed_broadcasts_are_errors() {
    let mut r = relays(4);
    let RelayMessage::Broadcast {
        attestation,
        payload,
    } = r[0].sign(&deal(0, 5)).unwrap()
    else {
        panic!()
    };
    let mut bad_sig = Attestation::clone(&attestation);
    bad_sig.signature[0] ^= 1;
    let mut bad_origin = Attestation::clone(&attestation);
    bad_origin.origin = 9;
    let mut wrong_signer = Attestation::clone(&attestation);
    wrong_signer.origin = 1;
    let mut wrong_kind = Attestation::clone(&attestation);
    wrong_kind.kind = Kind::Complaint;
    let mut other_payload = payload.bytes().to_vec();
    other_payload[0] ^= 1;
    let other_payload = Payload::new(other_payload);
    let cases = [
        (Arc::new(bad_sig.clone()), payload.clone()),
        (Arc::new(bad_origin.clone()), payload.clone()),
        (Arc::new(wrong_signer), payload.clone()),
        (Arc::new(wrong_kind), payload.clone()),
        (attestation.clone(), other_payload),
    ];
    for (a, p) in cases {
        let m = RelayMessage::Broadcast {
            attestation: a,
            payload: p,
        };
        assert!(r[1].receive::<MinSig>(NodeIndex(0), m).is_err());
    }
    // Forged attestations in a list are skipped (no version, no pull).
    let list = RelayMessage::Versions {
        kind: Kind::Deal,
        attestations: vec![bad_sig, bad_origin],
    };
    assert!(r[1]
        .receive::<MinSig>(NodeIndex(0), list)
        .unwrap()
        .is_empty());
    // A list longer than any honest one is an error.
    let long = RelayMessage::Versions {
        kind: Kind::Deal,
        attestations: vec![Attestation::clone(&attestation); 9],
    };
    assert!(r[1].receive::<MinSig>(NodeIndex(0), long).is_err());
    // Not from another member.
    let summary = RelayMessage::Summary {
        kind: Kind::Deal,
        summary: Summary {
            count: 0,
            digest: [0; 32],
        },
        settled: false,
    };
    assert!(r[1]
        .receive::<MinSig>(NodeIndex(1), summary.clone())
        .is_err());
    assert!(r[1].receive::<MinSig>(NodeIndex(4), summary).is_err());
    // Nothing was recorded: the genuine broadcast still delivers.
    let ok = RelayMessage::Broadcast {
        attestation,
        payload,
    };
    assert_eq!(
        delivered(&r[1].receive::<MinSig>(NodeIndex(0), ok).unwrap()),
        1
    );
}

/// Finding 5: three signed complaint versions, one per honest member, one hop
/// each. Every honest member must end with the same verdict on the origin.
#[test]
fn three_complaint_versions_fault_the_origin_everywhere() {
    let mut r = relays(4);
    let harmless_a = r[3].sign(&complaint(3, &[])).unwrap();
    let harmful = r[3].sign(&complaint(3, &[0])).unwrap();
    let harmless_b = r[3].sign(&complaint(3, &[3])).unwrap();
    let queue = [(3, 0, harmless_a), (3, 2, harmless_b), (3, 1, harmful)]
        .into_iter()
        .collect();
    let honest: Vec<(u32, Kind)> = (0..3).map(|i| (i, Kind::Complaint)).collect();
    let out = flood(&mut r, queue, &honest);
    for m in 0..3 {
        assert_eq!(out.faulty[m], vec![3], "member {m}: {:?}", out.delivered[m]);
        assert_eq!(out.consistent[m], vec![Kind::Complaint], "member {m}");
    }
}

/// Finding 7: an honest dealer's signed deal of attempt 0, replayed in
/// attempt 1, is no second version of its attempt-1 deal.
#[test]
fn a_broadcast_of_an_old_attempt_is_not_a_second_version() {
    let mut old = relays_for(4, [1; 32]);
    let mut new = relays_for(4, [2; 32]);
    let replayed = old[0].sign(&deal_in([1; 32], 0, 5)).unwrap();
    let fresh = new[0].sign(&deal_in([2; 32], 0, 6)).unwrap();
    let queue = [(2, 1, replayed), (0, 1, fresh)].into_iter().collect();
    let out = flood(&mut new, queue, &[]);
    assert!(out.faulty.iter().all(Vec::is_empty), "{:?}", out.faulty);
    assert_eq!(out.delivered[1].len(), 1);
}

/// In an honest run the attestations cost one summary per member pair and
/// kind, whatever the number of broadcasts: no lists, no pulls.
#[test]
fn honest_attestation_traffic_is_one_summary_per_member_pair() {
    let n = 16u32;
    let mut r = relays(n);
    let mut queue = VecDeque::new();
    for i in 0..n {
        let b = r[i as usize].sign(&complaint(i, &[])).unwrap();
        for j in (0..n).filter(|j| *j != i) {
            queue.push_back((i, j, b.clone()));
        }
    }
    let out = flood(&mut r, queue, &everyone(n, Kind::Complaint));
    let pairs = (n * (n - 1)) as usize;
    assert_eq!(out.sent.get("summary"), Some(&pairs), "{:?}", out.sent);
    assert_eq!(out.sent.len(), 1, "{:?}", out.sent);
    for m in 0..n as usize {
        assert_eq!(out.delivered[m].len(), n as usize - 1);
        assert_eq!(out.consistent[m], vec![Kind::Complaint]);
    }
}

/// A member that announces with a view others do not share is never
/// reported consistent (its phase then ends on its timeout).
#[test]
fn a_missing_summary_withholds_consistency() {
    let mut r = relays(4);
    let b = r[0].sign(&deal(0, 5)).unwrap();
    let queue = (1..4).map(|j| (0, j, b.clone())).collect();
    // Member 3 never announces.
    let some: Vec<(u32, Kind)> = (0..3).map(|i| (i, Kind::Deal)).collect();
    let out = flood(&mut r, queue, &some);
    for m in 0..3 {
        assert!(out.consistent[m].is_empty(), "member {m}");
    }
}

#[test]
fn a_payload_is_its_bytes_on_the_wire_and_hashes_them() {
    let payload = Payload::new(vec![1, 2, 3, 250]);
    let expected: [u8; 32] = Sha256::digest([1u8, 2, 3, 250]).into();
    assert_eq!(payload.digest(), expected);
    let copy = payload.clone();
    assert_eq!(copy.digest(), expected, "a shared copy keeps the digest");
    let encoded = crate::wire::encode(&payload).unwrap();
    let decoded: Payload = crate::wire::decode(&encoded).unwrap();
    assert_eq!(decoded.bytes(), payload.bytes());
    assert_eq!(decoded.digest(), expected);
    // The encoding is the byte string's, as before the digest was cached.
    let as_bytes = crate::wire::encode(&HexBytes(vec![1, 2, 3, 250])).unwrap();
    assert_eq!(encoded, as_bytes);
}

/// A byte string serialized as `wire::hex_bytes`, the payload's old encoding.
#[derive(serde::Serialize)]
struct HexBytes(#[serde(with = "crate::wire::hex_bytes")] Vec<u8>);

/// Relays of `n` members whose summaries go to and from `hub`.
fn hub_relays(n: u32, hub: &[u32]) -> Vec<BroadcastRelay> {
    let hub: Vec<NodeIndex> = hub.iter().map(|m| NodeIndex(*m)).collect();
    relays(n).into_iter().map(|r| r.with_hub(&hub)).collect()
}

#[test]
fn with_a_hub_summaries_go_to_and_from_the_committee_only() {
    let (n, hub) = (16u32, [0u32, 5, 9, 12]);
    let mut r = hub_relays(n, &hub);
    let mut queue = VecDeque::new();
    for d in hub {
        let b = r[d as usize].sign(&deal(d, u64::from(d) + 2)).unwrap();
        for j in (0..n).filter(|j| *j != d) {
            queue.push_back((d, j, b.clone()));
        }
    }
    let out = flood(&mut r, queue, &everyone(n, Kind::Deal));
    for m in 0..n as usize {
        assert_eq!(out.consistent[m], vec![Kind::Deal], "member {m}");
        assert!(out.faulty[m].is_empty());
    }
    // Outside members to the hub, hub to hub, and one settled summary from
    // each hub member to each outside member: 2 (n - K) K + K (K - 1).
    let (n, k) = (n as usize, hub.len());
    assert_eq!(out.sent["summary"], 2 * (n - k) * k + k * (k - 1));
    assert!(out.sent["summary"] < n * (n - 1));
    assert!(!out.sent.contains_key("pull-versions"), "{:?}", out.sent);
}

#[test]
fn with_a_hub_a_broadcast_that_reached_one_outside_member_reaches_all() {
    let (n, hub) = (16u32, [0u32, 5, 9, 12]);
    let mut r = hub_relays(n, &hub);
    // Dealer 5 reaches member 10 alone, outside the hub.
    let b = r[5].sign(&deal(5, 7)).unwrap();
    let queue = [(5, 10, b)].into_iter().collect();
    let out = flood(&mut r, queue, &everyone(n, Kind::Deal));
    for m in (0..n as usize).filter(|m| *m != 5) {
        assert_eq!(out.delivered[m].len(), 1, "member {m}");
        assert_eq!(out.consistent[m], vec![Kind::Deal], "member {m}");
    }
}

#[test]
fn with_a_hub_an_outside_equivocator_is_proven_faulty_everywhere() {
    let (n, hub) = (16u32, [0u32, 5, 9, 12]);
    let mut r = hub_relays(n, &hub);
    // Member 3 (outside the hub) signs two complaints and sends one to each
    // of two other outside members.
    let v1 = r[3].sign(&complaint(3, &[0])).unwrap();
    let v2 = r[3].sign(&complaint(3, &[5])).unwrap();
    let queue = [(3, 10, v1), (3, 11, v2)].into_iter().collect();
    let out = flood(&mut r, queue, &everyone(n, Kind::Complaint));
    for m in (0..n as usize).filter(|m| *m != 3) {
        assert_eq!(out.faulty[m], vec![3], "member {m}");
        assert_eq!(out.consistent[m], vec![Kind::Complaint], "member {m}");
        assert!(out.delivered[m].len() <= 1, "member {m}");
    }
}

#[test]
fn outside_the_hub_only_hub_members_summaries_count() {
    let (n, hub) = (16u32, [0u32, 5, 9, 12]);
    let mut r = hub_relays(n, &hub);
    let stray = RelayMessage::Summary {
        kind: Kind::Deal,
        summary: Summary {
            count: 3,
            digest: [7; 32],
        },
        settled: true,
    };
    // An outside member neither asks another outside member for its list nor
    // counts it.
    let actions = r[10]
        .receive::<MinSig>(NodeIndex(11), stray.clone())
        .unwrap();
    assert!(actions.is_empty());
    // A hub member asks (it compares every member's summary).
    let actions = r[0].receive::<MinSig>(NodeIndex(11), stray).unwrap();
    assert!(actions.iter().any(|a| matches!(
        a,
        RelayOutput::Effect(Effect::Send {
            message: RelayMessage::PullVersions { .. },
            ..
        })
    )));
}
