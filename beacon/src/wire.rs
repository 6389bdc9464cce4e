//! The one wire codec of the project: bincode 2.x (serde) with a decode size limit,
//! plus the serde representation of field elements and points.
//!
//! Every message that crosses a process boundary or lands in a file goes through
//! [`encode`] / [`decode`], so the codec can be swapped in one place. Decoding
//! rejects oversized input, trailing bytes, and (through the point and scalar
//! impls below) non-canonical scalars and invalid points, with a clear error.
//! Points and scalars encode as their canonical bytes in binary formats and as
//! lowercase hex in human-readable ones (JSON, TOML).

use crate::curve::{Point, G1, G2};
use crate::field::Scalar;
use crate::{Error, WireError};
use bincode::error::DecodeError;
use serde::de::{self, DeserializeOwned, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::cell::RefCell;
use std::fmt;

/// Largest message [`decode`] accepts (bytes).
pub const MAX_MESSAGE_BYTES: usize = 16 << 20;

type Config = bincode::config::Configuration<
    bincode::config::LittleEndian,
    bincode::config::Fixint,
    bincode::config::Limit<MAX_MESSAGE_BYTES>,
>;

/// Fixed-width integers: every value has exactly one encoding (varints would
/// accept over-long forms), so decoded messages re-encode to the same bytes.
fn config() -> Config {
    bincode::config::standard()
        .with_fixed_int_encoding()
        .with_limit::<MAX_MESSAGE_BYTES>()
}

/// Encodes a value.
pub fn encode<T: Serialize + ?Sized>(value: &T) -> Result<Vec<u8>, Error> {
    bincode::serde::encode_to_vec(value, config())
        .map_err(|e| Error::Wire(WireError::Encode(e.to_string())))
}

/// Decodes a value, rejecting input over [`MAX_MESSAGE_BYTES`], malformed input and
/// trailing bytes.
pub fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, Error> {
    if bytes.len() > MAX_MESSAGE_BYTES {
        return Err(Error::Wire(WireError::TooLarge {
            len: bytes.len(),
            limit: MAX_MESSAGE_BYTES,
        }));
    }
    forget_refusal();
    let (value, used) = bincode::serde::decode_from_slice(bytes, config()).map_err(decode_error)?;
    if used != bytes.len() {
        return Err(Error::Wire(WireError::TrailingBytes {
            count: bytes.len() - used,
        }));
    }
    Ok(value)
}

/// Decodes a value at the start of `bytes`, ignoring what follows it (a
/// file's header, read before the rest), with [`decode`]'s size limit.
pub fn decode_prefix<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, Error> {
    let bytes = &bytes[..bytes.len().min(MAX_MESSAGE_BYTES)];
    forget_refusal();
    let (value, _) = bincode::serde::decode_from_slice(bytes, config()).map_err(decode_error)?;
    Ok(value)
}

thread_local! {
    /// The typed reason a point or scalar check refused a value in the
    /// message being decoded: serde carries only its text up through the
    /// codec, and [`decode_error`] takes it back.
    static REFUSAL: RefCell<Option<Error>> = const { RefCell::new(None) };
}

/// Drops a reason left by an earlier refusal (one decoded by another
/// format, such as JSON, which never reaches [`decode_error`]).
fn forget_refusal() {
    REFUSAL.with(|r| r.borrow_mut().take());
}

/// Refuses a value for `reason`: remembers the typed reason for
/// [`decode_error`] and hands serde its text.
pub(crate) fn refuse<E: de::Error>(reason: Error) -> E {
    let error = E::custom(&reason);
    REFUSAL.with(|r| *r.borrow_mut() = Some(reason));
    error
}

/// The typed reason for a codec failure: the refusal a value's own check
/// recorded, or what the codec says.
fn decode_error(error: DecodeError) -> Error {
    let refusal = REFUSAL.with(|r| r.borrow_mut().take());
    let reason = match (error, refusal) {
        (DecodeError::OtherString(_), Some(Error::Wire(reason))) => reason,
        (DecodeError::OtherString(_), Some(reason)) => WireError::InvalidValue(Box::new(reason)),
        (DecodeError::UnexpectedEnd { additional }, _) => WireError::Truncated {
            missing: additional,
        },
        (DecodeError::LimitExceeded, _) => WireError::LengthOverLimit {
            limit: MAX_MESSAGE_BYTES,
        },
        (error, _) => WireError::Malformed(error.to_string()),
    };
    Error::Wire(reason)
}

thread_local! {
    /// Points the current [`decode_with_point_budget`] may still decode (`None`:
    /// no budget).
    static POINT_BUDGET: std::cell::Cell<Option<usize>> = const { std::cell::Cell::new(None) };
}

/// Decodes like [`decode`], but fails as soon as more than `max_points` group
/// elements have been decoded: each point costs a decompression and a subgroup
/// check (tens of microseconds), so a message of known kind gets a budget of what
/// an honest one holds, and a hostile frame packed with points is refused after
/// that many instead of after all of them.
pub fn decode_with_point_budget<T: DeserializeOwned>(
    bytes: &[u8],
    max_points: usize,
) -> Result<T, Error> {
    struct Reset(Option<usize>);
    impl Drop for Reset {
        fn drop(&mut self) {
            POINT_BUDGET.with(|b| b.set(self.0));
        }
    }
    let _reset = Reset(POINT_BUDGET.with(|b| b.replace(Some(max_points))));
    decode(bytes)
}

/// Takes one point from the current budget, if any.
fn spend_point() -> Result<(), Error> {
    POINT_BUDGET.with(|b| match b.get() {
        None => Ok(()),
        Some(0) => Err(Error::Wire(WireError::TooManyPoints)),
        Some(k) => {
            b.set(Some(k - 1));
            Ok(())
        }
    })
}

/// Serializes canonical bytes: raw in binary formats, hex in human-readable ones.
fn serialize_bytes<S: Serializer>(bytes: &[u8], serializer: S) -> Result<S::Ok, S::Error> {
    if serializer.is_human_readable() {
        serializer.serialize_str(&hex::encode(bytes))
    } else {
        serializer.serialize_bytes(bytes)
    }
}

struct BytesVisitor;

impl<'de> Visitor<'de> for BytesVisitor {
    type Value = Vec<u8>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("bytes or a hex string")
    }
    fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<Vec<u8>, E> {
        Ok(v.to_vec())
    }
    fn visit_byte_buf<E: de::Error>(self, v: Vec<u8>) -> Result<Vec<u8>, E> {
        Ok(v)
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Vec<u8>, E> {
        hex::decode(v).map_err(|e| E::custom(format!("invalid hex: {e}")))
    }
    fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<u8>, A::Error> {
        let mut out = Vec::new();
        while let Some(b) = seq.next_element::<u8>()? {
            if out.len() >= 1024 {
                return Err(de::Error::custom("byte sequence too long"));
            }
            out.push(b);
        }
        Ok(out)
    }
}

fn deserialize_bytes<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<u8>, D::Error> {
    if deserializer.is_human_readable() {
        deserializer.deserialize_str(BytesVisitor)
    } else {
        deserializer.deserialize_bytes(BytesVisitor)
    }
}

thread_local! {
    /// Set while [`encoded_len_and_fingerprint`] encodes: points of G1 and G2
    /// go as their projective coordinates, counted here by group.
    static PROJECTIVE: std::cell::Cell<Option<(usize, usize)>> = const { std::cell::Cell::new(None) };
}

/// Writes a point of G1 (`g2 == false`) or G2 as [`encoded_len_and_fingerprint`]
/// does, if it is encoding; `false` otherwise.
fn serialize_projective<S: Serializer>(
    g2: bool,
    projective: &[u8],
    serializer: S,
) -> Result<Result<S::Ok, S::Error>, S> {
    match PROJECTIVE.with(|p| p.get()) {
        Some((g1s, g2s)) if !serializer.is_human_readable() => {
            let counts = if g2 { (g1s, g2s + 1) } else { (g1s + 1, g2s) };
            PROJECTIVE.with(|p| p.set(Some(counts)));
            Ok(serializer.serialize_bytes(projective))
        }
        _ => Err(serializer),
    }
}

/// What the simulator needs of a message it sends, without compressing its
/// points (a field inversion each, 15% of a large run's time): the length of
/// its [`encode`] (exactly), and a fingerprint, equal only for equal values
/// (points as their projective coordinates: equal points may still differ).
pub fn encoded_len_and_fingerprint<T: Serialize + ?Sized>(
    value: &T,
) -> Result<(usize, Vec<u8>), Error> {
    /// Ends the projective mode however the encoding ends.
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            PROJECTIVE.with(|p| p.set(None));
        }
    }
    PROJECTIVE.with(|p| p.set(Some((0, 0))));
    let reset = Reset;
    let fingerprint = encode(value)?;
    let (g1s, g2s) = PROJECTIVE.with(|p| p.get()).unwrap_or((0, 0));
    drop(reset);
    let g1_extra = G1::identity().projective_bytes().len() - G1::COMPRESSED_LEN;
    let g2_extra = G2::identity().projective_bytes().len() - G2::COMPRESSED_LEN;
    let len = fingerprint.len() - g1s * g1_extra - g2s * g2_extra;
    Ok((len, fingerprint))
}

macro_rules! point_serde {
    ($t:ty, $group:expr, $projective:expr) => {
        impl Serialize for $t {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                let group: Option<bool> = $group;
                let projective: fn(&$t) -> Option<&[u8]> = $projective;
                let mut serializer = serializer;
                if let Some(g2) = group {
                    crate::cost::encoded_point(g2);
                    if let Some(bytes) = projective(self) {
                        match serialize_projective(g2, bytes, serializer) {
                            Ok(done) => return done,
                            Err(s) => serializer = s,
                        }
                    }
                }
                serialize_bytes(&self.to_bytes(), serializer)
            }
        }
        impl<'de> Deserialize<'de> for $t {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let bytes = deserialize_bytes(deserializer)?;
                spend_point().map_err(refuse)?;
                <$t>::from_bytes(&bytes).map_err(refuse)
            }
        }
    };
}

// Encoded points are counted by group (`Some(true)`: G2) for the simulator's
// cost of decoding; the mock scheme's points cost nothing to decode.
point_serde!(G1, Some(false), |p| Some(p.projective_bytes()));
point_serde!(G2, Some(true), |p| Some(p.projective_bytes()));
point_serde!(crate::mock::MockPoint, None, |_| None);

impl Serialize for Scalar {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serialize_bytes(&self.to_bytes_be(), serializer)
    }
}

impl<'de> Deserialize<'de> for Scalar {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let bytes = deserialize_bytes(deserializer)?;
        let arr: [u8; 32] = bytes.as_slice().try_into().map_err(|_| {
            refuse(Error::WrongLength {
                what: "scalar",
                expected: 32,
                got: bytes.len(),
            })
        })?;
        Scalar::from_bytes_be(&arr).ok_or_else(|| refuse(Error::NonCanonicalScalar))
    }
}

/// The bytes of one encoded point, counted against the decoder's point
/// budget (for types that decode points their own way: the DKG's
/// commitments, decoded on the curve only).
pub(crate) fn point_bytes<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<u8>, D::Error> {
    let bytes = deserialize_bytes(deserializer)?;
    spend_point().map_err(refuse)?;
    Ok(bytes)
}

/// Serde helpers for `Vec<u8>` fields: raw bytes in binary formats, hex in JSON.
pub mod hex_bytes {
    use super::*;

    /// Serializes a byte string.
    pub fn serialize<S: Serializer>(bytes: &[u8], serializer: S) -> Result<S::Ok, S::Error> {
        serialize_bytes(bytes, serializer)
    }

    /// Deserializes a byte string.
    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<u8>, D::Error> {
        deserialize_bytes(deserializer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::curve::Point;

    #[test]
    fn points_and_scalars_roundtrip() {
        let p = G1::generator().mul(&Scalar::from_u64(5));
        let q = G2::generator().mul(&Scalar::from_u64(9));
        let s = Scalar::from_u64(12345);
        let bytes = encode(&(p, q, s)).unwrap();
        assert_eq!(decode::<(G1, G2, Scalar)>(&bytes).unwrap(), (p, q, s));
        let json = serde_json::to_string(&(p, s)).unwrap();
        assert_eq!(serde_json::from_str::<(G1, Scalar)>(&json).unwrap(), (p, s));
    }

    /// The simulator's length of a message is its encoding's, to the byte; its
    /// fingerprint tells different values apart, and is the same for the same
    /// value; the normal encoding after it is unchanged.
    #[test]
    fn the_simulators_length_and_fingerprint_match_the_encoding() {
        let a = (
            vec![G1::generator().mul(&Scalar::from_u64(3)); 3],
            Some(G2::generator().mul(&Scalar::from_u64(4))),
            Scalar::from_u64(1),
            vec![7u8; 64],
        );
        let mut b = a.clone();
        b.0[1] = G1::generator().mul(&Scalar::from_u64(5));
        for v in [&a, &b] {
            let (len, fingerprint) = encoded_len_and_fingerprint(v).unwrap();
            assert_eq!(len, encode(v).unwrap().len());
            assert_eq!(encoded_len_and_fingerprint(v).unwrap().1, fingerprint);
        }
        assert_ne!(
            encoded_len_and_fingerprint(&a).unwrap().1,
            encoded_len_and_fingerprint(&b).unwrap().1
        );
        let bytes = encode(&a).unwrap();
        assert_eq!(
            decode::<(Vec<G1>, Option<G2>, Scalar, Vec<u8>)>(&bytes).unwrap(),
            a
        );
        // Points in JSON inside it stay hex.
        assert!(encoded_len_and_fingerprint(&"x").is_ok());
    }

    #[test]
    fn encoding_counts_the_points_a_receiver_decodes() {
        crate::cost::take_encoded();
        let q = G2::generator();
        encode(&(
            vec![G1::generator(); 3],
            q,
            Scalar::from_u64(1),
            vec![7u8; 64],
        ))
        .unwrap();
        let counted = crate::cost::take_encoded();
        assert_eq!((counted.g1, counted.g2), (3, 1));
        assert_eq!(crate::cost::take_encoded(), Default::default());
        encode(&crate::mock::MockPoint::generator()).unwrap();
        assert_eq!(crate::cost::take_encoded(), Default::default());
    }

    #[test]
    fn point_budget_stops_decoding_after_that_many_points() {
        let points = vec![G1::generator(); 10];
        let bytes = encode(&points).unwrap();
        assert_eq!(
            decode_with_point_budget::<Vec<G1>>(&bytes, 10).unwrap(),
            points
        );
        let err = decode_with_point_budget::<Vec<G1>>(&bytes, 9).unwrap_err();
        assert_eq!(err, Error::Wire(WireError::TooManyPoints));
        assert!(err.to_string().contains("more points"), "{err}");
        // The budget ends with the call.
        assert_eq!(decode::<Vec<G1>>(&bytes).unwrap(), points);
    }

    #[test]
    fn decoding_rejects_bad_input() {
        let p = G1::generator();
        let mut bytes = encode(&p).unwrap();
        let refused = |e: Error| match e {
            Error::Wire(WireError::InvalidValue(reason)) => *reason,
            other => panic!("not a refused value: {other}"),
        };
        // Trailing byte.
        bytes.push(0);
        let err = decode::<G1>(&bytes).unwrap_err();
        assert_eq!(err, Error::Wire(WireError::TrailingBytes { count: 1 }));
        assert!(err.to_string().contains("trailing"), "{err}");
        bytes.pop();
        // Truncated.
        assert!(matches!(
            decode::<G1>(&bytes[..10]),
            Err(Error::Wire(WireError::Truncated { .. }))
        ));
        // A G1 encoding where a G2 is expected: wrong length.
        let err = decode::<G2>(&bytes).unwrap_err();
        assert!(err.to_string().contains("expected 96 bytes"), "{err}");
        assert!(matches!(
            refused(err),
            Error::WrongLength {
                expected: 96,
                got: 48,
                ..
            }
        ));
        // Identity.
        let id = encode(&G1::identity().to_bytes()).unwrap();
        assert!(matches!(
            refused(decode::<G1>(&id).unwrap_err()),
            Error::IdentityPoint { .. }
        ));
        // Non-canonical scalar.
        let big = encode(&[0xffu8; 32].to_vec()).unwrap();
        assert_eq!(
            refused(decode::<Scalar>(&big).unwrap_err()),
            Error::NonCanonicalScalar
        );
        // Oversized.
        assert_eq!(
            decode::<Vec<u8>>(&vec![0u8; MAX_MESSAGE_BYTES + 1]),
            Err(Error::Wire(WireError::TooLarge {
                len: MAX_MESSAGE_BYTES + 1,
                limit: MAX_MESSAGE_BYTES
            }))
        );
        // A length prefix promising more than the limit (and more than the
        // input holds: nothing is allocated for it).
        let huge_len = encode(&(u64::MAX)).unwrap();
        assert!(matches!(
            decode::<Vec<u8>>(&huge_len),
            Err(Error::Wire(
                WireError::Truncated { .. } | WireError::LengthOverLimit { .. }
            ))
        ));
        // A reason refused by JSON is not taken for the next binary decode.
        assert!(serde_json::from_str::<Scalar>(&format!("\"{}\"", "ff".repeat(32))).is_err());
        assert_eq!(
            decode::<u8>(&[]),
            Err(Error::Wire(WireError::Truncated { missing: 1 }))
        );
    }
}
