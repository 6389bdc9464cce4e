//! A deal's Feldman commitments `g^{a_{k,i}}`, one row per threshold, held in
//! affine form: a third less memory than projective points (at 4,096
//! members, 3.1 million G2 commitments are the largest structure of a
//! simulation), read by blst's MSMs without a conversion, and compressed
//! without an inversion. Decoded on the curve only: see [`Commitments::in_group`]
//! on the callers' side (`Deal::commitments_in_group`).

use crate::curve::Point;
use crate::wire;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;

/// The commitments of one deal: `rows[k][i] = g^{a_{k,i}}` for threshold `k`,
/// coefficient `i`.
#[derive(Clone, PartialEq, Eq)]
pub struct Commitments<P: Point> {
    rows: Vec<Vec<P::Affine>>,
}

impl<P: Point> Commitments<P> {
    /// The commitments `rows[k][i]`.
    pub fn new(rows: &[Vec<P>]) -> Self {
        Commitments {
            rows: rows.iter().map(|row| P::to_affine_batch(row)).collect(),
        }
    }

    /// Number of thresholds (rows).
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// Whether there is no row.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The rows, in affine form.
    pub fn rows(&self) -> impl Iterator<Item = &[P::Affine]> + '_ {
        self.rows.iter().map(Vec::as_slice)
    }

    /// Row `k` (threshold `k`), in affine form.
    pub fn row(&self, k: usize) -> Option<&[P::Affine]> {
        self.rows.get(k).map(Vec::as_slice)
    }

    /// Number of coefficients of each row.
    pub fn row_lens(&self) -> impl Iterator<Item = usize> + '_ {
        self.rows.iter().map(Vec::len)
    }

    /// Whether row `k` has `thresholds[k]` coefficients, for every `k`, and
    /// there are as many rows as thresholds.
    pub fn has_degrees(&self, thresholds: &[u32]) -> bool {
        self.rows.len() == thresholds.len()
            && self
                .rows
                .iter()
                .zip(thresholds)
                .all(|(row, t)| row.len() == *t as usize)
    }

    /// The commitment to coefficient `i` of threshold `k`.
    pub fn point(&self, k: usize, i: usize) -> Option<P> {
        self.rows.get(k)?.get(i).map(P::from_affine)
    }

    /// Every commitment, row by row.
    pub fn points(&self) -> impl Iterator<Item = P> + '_ {
        self.rows.iter().flatten().map(P::from_affine)
    }

    /// The rows as points (for tests and Byzantine dealers that tamper with them).
    pub fn to_rows(&self) -> Vec<Vec<P>> {
        self.rows
            .iter()
            .map(|row| row.iter().map(P::from_affine).collect())
            .collect()
    }
}

impl<P: Point> fmt::Debug for Commitments<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.to_rows()).finish()
    }
}

/// One row, serialized as the points it holds (the encoding of `Vec<P>`).
struct Row<'a, P: Point>(&'a [P::Affine]);

impl<P: Point + Serialize> Serialize for Row<'_, P> {
    fn serialize<Ser: Serializer>(&self, serializer: Ser) -> Result<Ser::Ok, Ser::Error> {
        serializer.collect_seq(self.0.iter().map(P::from_affine))
    }
}

/// The wire form is that of `Vec<Vec<P>>`: each point compressed.
impl<P: Point + Serialize> Serialize for Commitments<P> {
    fn serialize<Ser: Serializer>(&self, serializer: Ser) -> Result<Ser::Ok, Ser::Error> {
        serializer.collect_seq(self.rows.iter().map(|row| Row::<P>(row)))
    }
}

/// A point decoded on the curve only, in affine form.
struct OnCurve<P: Point>(P::Affine);

impl<'de, P: Point> Deserialize<'de> for OnCurve<P> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let bytes = wire::point_bytes(deserializer)?;
        P::affine_from_bytes_on_curve(&bytes)
            .map(OnCurve)
            .map_err(wire::refuse)
    }
}

/// Decoded on the curve only ([`Point::from_bytes_on_curve`]): checking each
/// point's subgroup was most of a member's DKG work; whoever combines them
/// checks the combination.
impl<'de, P: Point> Deserialize<'de> for Commitments<P> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let rows: Vec<Vec<OnCurve<P>>> = Vec::deserialize(deserializer)?;
        Ok(Commitments {
            rows: rows
                .into_iter()
                .map(|row| row.into_iter().map(|p| p.0).collect())
                .collect(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Scalar, G1, G2};

    fn rows<P: Point>() -> Vec<Vec<P>> {
        let g = P::generator();
        vec![
            (1..4u64).map(|i| g.mul(&Scalar::from_u64(i))).collect(),
            (5..10u64).map(|i| g.mul(&Scalar::from_u64(i))).collect(),
        ]
    }

    fn round_trip<P: Point + Serialize + serde::de::DeserializeOwned>() {
        let rows = rows::<P>();
        let c = Commitments::<P>::new(&rows);
        assert_eq!(c.to_rows(), rows);
        assert_eq!(c.point(1, 2), Some(rows[1][2]));
        assert_eq!(c.point(2, 0), None);
        assert_eq!(c.row_lens().collect::<Vec<_>>(), vec![3, 5]);
        // The same bytes as the rows of points they stand for.
        let bytes = wire::encode(&c).unwrap();
        assert_eq!(bytes, wire::encode(&rows).unwrap());
        let back: Commitments<P> = wire::decode(&bytes).unwrap();
        assert_eq!(back, c);
        // Truncated or damaged input is an error.
        assert!(wire::decode::<Commitments<P>>(&bytes[..bytes.len() - 1]).is_err());
        // A point of the wrong length, or without the compression flag.
        let short = wire::encode(&vec![vec![vec![0xc0u8; P::COMPRESSED_LEN - 1]]]).unwrap();
        assert!(wire::decode::<Commitments<P>>(&short).is_err());
        let unflagged = wire::encode(&vec![vec![vec![0u8; P::COMPRESSED_LEN]]]).unwrap();
        assert!(wire::decode::<Commitments<P>>(&unflagged).is_err());
    }

    #[test]
    fn commitments_encode_as_their_points_and_decode_back() {
        round_trip::<G1>();
        round_trip::<G2>();
    }
}
