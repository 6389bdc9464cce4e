//! Point decoding: never panics; accepted points re-encode identically.
#![no_main]
use beacon::{Point, G1, G2};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(p) = G1::from_bytes(data) {
        assert_eq!(p.to_bytes(), data);
    }
    if let Ok(p) = G2::from_bytes(data) {
        assert_eq!(p.to_bytes(), data);
    }
});
