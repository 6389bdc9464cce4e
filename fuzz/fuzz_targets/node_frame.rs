//! Every frame a peer can send a node: decoding must never panic, what decodes
//! re-encodes to the same bytes, and DKG messages never panic the DKG session
//! (its relay, its agreement step).
#![no_main]
use beacon::dkg::relay::SigningKey;
use beacon::dkg::session::{DkgSession, SessionInput};
use beacon::dkg::{DkgSettings, DkgTiming};
use beacon::{MinPk, NodeIndex, Time};
use consensus::Envelope;
use libfuzzer_sys::fuzz_target;
use std::sync::Arc;
use std::time::Duration;

fn session() -> DkgSession<MinPk> {
    let secrets: Vec<SigningKey> = (0..4u8).map(|i| SigningKey::from_bytes(&[i + 1; 32])).collect();
    let keys = Arc::new(secrets.iter().map(|k| k.verifying_key()).collect());
    let config = DkgSettings {
        session: [1; 32],
        n: 4,
        thresholds: vec![2],
        dealers: Vec::new(),
        timing: DkgTiming::new(Duration::from_millis(1), 2),
        min_qualified: 2,
        max_faulty: 1,
    }
    .build()
    .unwrap();
    let memo = beacon::memo::Memo::disabled();
    let agreement = beacon::dkg::harness::agreement_keys::<MinPk>(4, |i| [i as u8 + 9; 32]);
    let mut s = DkgSession::new(
        config,
        NodeIndex(0),
        [0; 32],
        memo,
        secrets[0].clone(),
        keys,
        agreement[0].clone(),
    )
    .unwrap();
    let _ = s.handle(Time::ZERO, SessionInput::Start);
    s
}

fuzz_target!(|data: &[u8]| {
    let Ok(frame) = beacon::wire::decode::<Envelope<MinPk>>(data) else {
        return;
    };
    assert_eq!(beacon::wire::encode(&frame).unwrap(), data);
    if let Envelope::Dkg(message) = frame {
        let _ = session().handle(
            Time::ZERO,
            SessionInput::Message {
                from: NodeIndex(1),
                message,
            },
        );
    }
});
