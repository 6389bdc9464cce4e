//! The pairing: whether a product of pairings is one in G_T (the check every
//! signature verification, single or batched, comes down to).

use super::group::{G1, G2};
use super::point::Point;
use crate::cost;
use blst::{blst_final_exp, blst_fp12, blst_fp12_is_one, blst_fp12_mul, blst_miller_loop};

/// A product of Miller loops not yet raised to the final exponent: the part
/// of a pairing-product check that splits over threads (each part one
/// [`miller_product`], the parts multiplied and checked once by
/// [`miller_products_are_one`]). `None`: no term (the product 1).
#[derive(Clone, Copy, Default)]
pub struct MillerProduct(Option<blst_fp12>);

impl std::fmt::Debug for MillerProduct {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "MillerProduct(empty = {})", self.0.is_none())
    }
}

impl MillerProduct {
    fn times(self, other: MillerProduct) -> MillerProduct {
        MillerProduct(match (self.0, other.0) {
            (None, x) | (x, None) => x,
            (Some(a), Some(b)) => {
                let mut out = blst_fp12::default();
                // SAFETY: valid Fp12 inputs and output.
                unsafe { blst_fp12_mul(&mut out, &a, &b) };
                Some(out)
            }
        })
    }
}

/// The product of the Miller loops of `terms` (terms with an identity point
/// contribute 1), each counted as one Miller loop.
pub fn miller_product(terms: &[(G1, G2)]) -> MillerProduct {
    cost::timed(cost::Timed::Pairing, || {
        cost::record(|c| c.miller_loops += terms.len() as u64);
        MillerProduct(miller_loops(terms))
    })
}

/// Whether the product of `parts` is one in G_T after the final
/// exponentiation (counted once): [`pairing_product_is_one`] over the union
/// of the parts' terms.
pub fn miller_products_are_one(parts: &[MillerProduct]) -> bool {
    cost::timed(cost::Timed::Pairing, || {
        let product = parts
            .iter()
            .fold(MillerProduct::default(), |acc, p| acc.times(*p));
        let Some(acc) = product.0 else { return true };
        cost::record(|c| c.final_exps += 1);
        final_exp_is_one(&acc)
    })
}

/// Whether `prod_i e(g1_i, g2_i) == 1` in G_T. Terms with an identity point contribute 1.
pub fn pairing_product_is_one(terms: &[(G1, G2)]) -> bool {
    cost::timed(cost::Timed::Pairing, || {
        pairing_product_is_one_untimed(terms)
    })
}

fn pairing_product_is_one_untimed(terms: &[(G1, G2)]) -> bool {
    let Some(acc) = miller_loops(terms) else {
        return true;
    };
    cost::record(|c| {
        c.miller_loops += terms.len() as u64;
        c.final_exps += 1;
    });
    final_exp_is_one(&acc)
}

/// Whether `acc` raised to the final exponent is one.
fn final_exp_is_one(acc: &blst_fp12) -> bool {
    let mut out = blst_fp12::default();
    // SAFETY: valid Fp12 input and output.
    unsafe { blst_final_exp(&mut out, acc) };
    // SAFETY: valid Fp12.
    unsafe { blst_fp12_is_one(&out) }
}

/// The product of the Miller loops of the terms without an identity point
/// (`None` if there is none), not counted.
fn miller_loops(terms: &[(G1, G2)]) -> Option<blst_fp12> {
    let mut acc: Option<blst_fp12> = None;
    for (p, q) in terms {
        if p.is_identity() || q.is_identity() {
            continue;
        }
        let (pa, qa) = (p.to_affine(), q.to_affine());
        let mut ml = blst_fp12::default();
        // SAFETY: valid affine points, valid output.
        unsafe { blst_miller_loop(&mut ml, &qa, &pa) };
        acc = Some(match acc {
            None => ml,
            Some(a) => {
                let mut out = blst_fp12::default();
                // SAFETY: valid Fp12 inputs and output.
                unsafe { blst_fp12_mul(&mut out, &a, &ml) };
                out
            }
        });
    }
    acc
}
