//! The fixed-base comb's windows: the layout of the tables of
//! [`Point::mul_generator`] and [`FixedBase`], and the digit of a scalar each
//! window reads.
//!
//! [`Point::mul_generator`]: super::Point::mul_generator
//! [`FixedBase`]: super::FixedBase

/// Bits per window of [`Point::mul_generator`]'s table: 5 bits make 51
/// additions (13 fewer than 4 bits) for 32 entries a window to read (313 KB in
/// G2), about a fifth less time per multiplication.
///
/// [`Point::mul_generator`]: super::Point::mul_generator
pub(super) const COMB_BITS: usize = 5;

/// Entries per window of [`Point::mul_generator`]'s table.
///
/// [`Point::mul_generator`]: super::Point::mul_generator
pub(super) const COMB_ENTRIES: usize = 1 << COMB_BITS;

/// Windows of [`Point::mul_generator`]'s table: scalars are below the group
/// order, so 255 bits.
///
/// [`Point::mul_generator`]: super::Point::mul_generator
pub(super) const COMB_WINDOWS: usize = 255_usize.div_ceil(COMB_BITS);

/// Window `w` of the 32-byte little-endian `bytes`: bits `5 w .. 5 w + 5`.
pub(super) fn comb_digit(bytes: &[u8; 32], w: usize) -> u64 {
    let bit = COMB_BITS * w;
    let low = u64::from(bytes[bit / 8]);
    let high = bytes.get(bit / 8 + 1).map_or(0, |b| u64::from(*b));
    ((low | high << 8) >> (bit % 8)) & (COMB_ENTRIES as u64 - 1)
}
