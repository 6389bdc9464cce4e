//! Criterion benchmarks of the threshold core: Lagrange coefficients (three
//! methods), MSM, recovery, and share verification. Larger sizes are measured by
//! `sbft-beacon bench interpolation|verify`.
#![allow(missing_docs)] // criterion_group! generates undocumented items

use beacon::lagrange::{lagrange_fast, lagrange_naive};
use beacon::{
    deal, InterpolationMethod, MinPk, MinSig, NodeIndex, Point, Scalar, Scheme, SignerDomain,
};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;

fn subset(n: u32, t: u32) -> Vec<NodeIndex> {
    (0..n)
        .filter(|i| i % 2 == 0)
        .take(t as usize)
        .map(NodeIndex)
        .collect()
}

fn lagrange(c: &mut Criterion) {
    let mut g = c.benchmark_group("lagrange");
    g.sample_size(10);
    for t in [64u32, 256, 1024] {
        let n = 2 * t - 1;
        let domain = SignerDomain::new(n).unwrap();
        let signers = subset(n, t);
        let points: Vec<Scalar> = signers.iter().map(|s| domain.point(*s).unwrap()).collect();
        g.bench_with_input(BenchmarkId::new("naive", t), &points, |b, p| {
            b.iter(|| lagrange_naive(p))
        });
        g.bench_with_input(BenchmarkId::new("fast", t), &points, |b, p| {
            b.iter(|| lagrange_fast(p))
        });
        g.bench_with_input(BenchmarkId::new("roots_of_unity", t), &signers, |b, s| {
            b.iter(|| domain.lagrange_at_zero(s, InterpolationMethod::RootsOfUnity))
        });
    }
    g.finish();
}

fn msm_and_recovery<S: Scheme>(c: &mut Criterion, name: &str) {
    let mut g = c.benchmark_group(format!("recovery/{name}"));
    g.sample_size(10);
    let mut rng = ChaCha20Rng::seed_from_u64(1);
    for t in [64u32, 256] {
        let n = 2 * t - 1;
        let (public, shares) = deal::<S, _>(t, n, &mut rng).unwrap();
        let h = S::hash_message(b"bench");
        let sigs: Vec<_> = shares.iter().map(|s| s.sign_hashed::<S>(&h)).collect();
        let points: Vec<S::Signature> = sigs.iter().map(|s| s.signature).collect();
        let scalars: Vec<Scalar> = (0..n).map(|_| Scalar::random(&mut rng)).collect();
        g.bench_function(BenchmarkId::new("msm", t), |b| {
            b.iter(|| S::Signature::msm(&points[..t as usize], &scalars[..t as usize]))
        });
        g.bench_function(BenchmarkId::new("aggregate", t), |b| {
            b.iter(|| public.aggregate(&sigs, InterpolationMethod::RootsOfUnity))
        });
        g.bench_function(BenchmarkId::new("batch_verify_all", t), |b| {
            b.iter(|| public.batch_verify(&h, &sigs, &mut rng))
        });
        g.bench_function(BenchmarkId::new("verify_one_share", t), |b| {
            b.iter(|| public.verify_share(&h, &sigs[0]))
        });
    }
    g.finish();
}

fn recovery(c: &mut Criterion) {
    msm_and_recovery::<MinPk>(c, "g2-signatures");
    msm_and_recovery::<MinSig>(c, "g1-signatures");
}

/// A dealer's commitment to one coefficient: the fixed-base comb
/// (`mul_generator`) against blst's multiplication of the generator.
fn fixed_base(c: &mut Criterion) {
    let mut g = c.benchmark_group("fixed-base/g2");
    let s = Scalar::random(&mut ChaCha20Rng::seed_from_u64(3));
    g.bench_function("mul_generator", |b| {
        b.iter(|| <beacon::curve::G2 as Point>::mul_generator(&s))
    });
    g.bench_function("generator_mul", |b| {
        b.iter(|| <beacon::curve::G2 as Point>::generator().mul(&s))
    });
    g.finish();
}

criterion_group!(benches, lagrange, recovery, fixed_base);
criterion_main!(benches);
