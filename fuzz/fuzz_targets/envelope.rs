//! Every message a peer can send: decoding must never panic, and what decodes
//! must re-encode to the same bytes.
#![no_main]
use beacon::{MinPk, MinSig};
use consensus::Envelope;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(e) = Envelope::<MinPk>::decode(data) {
        assert_eq!(e.encode().unwrap(), data);
    }
    if let Ok(e) = Envelope::<MinSig>::decode(data) {
        assert_eq!(e.encode().unwrap(), data);
    }
});
