//! The pairing: whether a product of pairings is one in G_T (the check every
//! signature verification, single or batched, comes down to).

use super::group::{G1, G2};
use super::point::Point;
use crate::cost;
use blst::{blst_final_exp, blst_fp12, blst_fp12_is_one, blst_fp12_mul, blst_miller_loop};

/// Whether `prod_i e(g1_i, g2_i) == 1` in G_T. Terms with an identity point contribute 1.
pub fn pairing_product_is_one(terms: &[(G1, G2)]) -> bool {
    cost::timed(cost::Timed::Pairing, || {
        pairing_product_is_one_untimed(terms)
    })
}

fn pairing_product_is_one_untimed(terms: &[(G1, G2)]) -> bool {
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
    let Some(acc) = acc else { return true };
    cost::record(|c| {
        c.miller_loops += terms.len() as u64;
        c.final_exps += 1;
    });
    let mut out = blst_fp12::default();
    // SAFETY: valid Fp12 input and output.
    unsafe { blst_final_exp(&mut out, &acc) };
    // SAFETY: valid Fp12.
    unsafe { blst_fp12_is_one(&out) }
}
