//! Persisted key material: decoding a corrupted key file never panics.
#![no_main]
use beacon::dkg::DkgOutput;
use beacon::{MinPk, MinSig};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = DkgOutput::<MinPk>::decode(data);
    let _ = DkgOutput::<MinSig>::decode(data);
});
