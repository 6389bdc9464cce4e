//! One large computation split over several threads: the jobs of a
//! computation that many callers wait for (an FFT in the exponent, the MSMs of
//! a batched check), run by this thread and scoped helper threads.
//!
//! A job's results and operation counts ([`crate::cost`]) do not depend on
//! the thread that ran it: each job counts on its own and hands its counts
//! back, and the caller charges them to itself ([`map`] returns them in job
//! order), so a member's virtual cost is the same for any number of threads.
//! Each split is recorded in the caller's task ([`crate::host_work`]): the
//! CPU time its helpers spent, and its longest job.
//!
//! [`set_threads`] says how many threads a split may use: two by default
//! (what the FFT in the exponent always used); the simulator sets its own
//! thread count.

use crate::cost::{self, OpCounts};
use crate::host_work;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// Threads a split may use, the caller's included.
static THREADS: AtomicUsize = AtomicUsize::new(2);

/// Lets a split use up to `threads` threads (at least one: the caller's).
pub fn set_threads(threads: usize) {
    THREADS.store(threads.max(1), Ordering::Relaxed);
}

/// Threads a split may use, the caller's included.
pub fn threads() -> usize {
    THREADS.load(Ordering::Relaxed)
}

/// One job's CPU time: on the thread that ran it (`own`), on every thread
/// (`work`: with the helpers of a split inside it), and its longest chain
/// (`path`; see [`crate::host_work`]).
#[derive(Clone, Copy)]
struct Measure {
    own: Duration,
    work: Duration,
    path: Duration,
}

/// One job's outcome: its index, result, operation counts and CPU time.
type Done<R> = (usize, R, OpCounts, Measure);

/// Runs `job` on every item of `items` on up to [`threads`] threads (this one
/// and scoped helpers, which take the next item as they finish one) and
/// returns each result with the operations it counted, in the items' order.
/// Nothing is charged to the caller: it charges what it chooses. A job's
/// panic is raised again here once every job ended.
pub fn map<T: Send, R: Send>(items: Vec<T>, job: impl Fn(T) -> R + Sync) -> Vec<(R, OpCounts)> {
    let count = items.len();
    let helpers = threads().min(count).saturating_sub(1);
    let queue: Vec<Mutex<Option<T>>> = items.into_iter().map(|t| Mutex::new(Some(t))).collect();
    let next = AtomicUsize::new(0);
    let run = |helper: bool| -> Vec<Done<R>> {
        if helper {
            crate::curve::set_msm_pool(false);
        }
        let mut done = Vec::new();
        loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            let Some(slot) = queue.get(i) else {
                return done;
            };
            let Some(item) = slot.lock().unwrap_or_else(|e| e.into_inner()).take() else {
                continue;
            };
            let saved = cost::take();
            let started = host_work::cpu_now();
            let (result, inner) = host_work::as_job(|| job(item));
            let cpu = match (started, host_work::cpu_now()) {
                (Some(a), Some(b)) => b.saturating_sub(a),
                _ => Duration::ZERO,
            };
            // A split inside the job counts as one does in a task: its
            // helpers' CPU is work, its longest job is on the path.
            let cpu = Measure {
                own: cpu,
                work: inner.work(cpu),
                path: inner.path(cpu),
            };
            let counts = cost::take();
            cost::charge(&saved);
            done.push((i, result, counts, cpu));
        }
    };
    let mut all: Vec<Done<R>> = Vec::with_capacity(count);
    let mut helper_cpu = Duration::ZERO;
    let mut own_cpu = Duration::ZERO;
    let mut longest = Duration::ZERO;
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..helpers).map(|_| s.spawn(|| run(true))).collect();
        let mine = run(false);
        for (_, _, _, cpu) in &mine {
            own_cpu += cpu.own;
            helper_cpu += cpu.work.saturating_sub(cpu.own);
            longest = longest.max(cpu.path);
        }
        all.extend(mine);
        let mut panic = None;
        for h in handles {
            match h.join() {
                Ok(theirs) => {
                    for (_, _, _, cpu) in &theirs {
                        helper_cpu += cpu.work;
                        longest = longest.max(cpu.path);
                    }
                    all.extend(theirs);
                }
                Err(p) => panic = Some(p),
            }
        }
        if let Some(p) = panic {
            std::panic::resume_unwind(p);
        }
    });
    host_work::record_split(own_cpu, helper_cpu, longest);
    all.sort_unstable_by_key(|(i, ..)| *i);
    all.into_iter().map(|(_, r, c, _)| (r, c)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::curve::{Point, G1};
    use crate::field::Scalar;

    /// Tests that set the threads run one at a time.
    static THREADS_SET: Mutex<()> = Mutex::new(());

    /// Results and counts come back in the items' order, the same for one
    /// thread or several, and the caller's own counts are left alone.
    #[test]
    fn jobs_count_their_own_operations_whatever_the_thread() {
        let _one = THREADS_SET.lock().unwrap_or_else(|e| e.into_inner());
        let run = |threads: usize| {
            set_threads(threads);
            cost::take();
            cost::record(|c| c.hash_g1 += 1);
            let out = map((1..=6u64).collect(), |k| {
                for _ in 0..k {
                    let _ = G1::generator().mul(&Scalar::from_u64(k));
                }
                k * 10
            });
            let caller = cost::take();
            set_threads(2);
            (out, caller)
        };
        for threads in [1, 3, 8] {
            let (out, caller) = run(threads);
            let results: Vec<u64> = out.iter().map(|(r, _)| *r).collect();
            let muls: Vec<u64> = out.iter().map(|(_, c)| c.mul_g1).collect();
            assert_eq!(results, vec![10, 20, 30, 40, 50, 60], "{threads} threads");
            assert_eq!(muls, vec![1, 2, 3, 4, 5, 6], "{threads} threads");
            assert_eq!((caller.hash_g1, caller.mul_g1), (1, 0), "{threads} threads");
        }
    }

    #[test]
    fn a_jobs_panic_reaches_the_caller() {
        let caught = std::panic::catch_unwind(|| {
            map(vec![1, 2, 3], |k| {
                assert!(k != 2, "job 2 fails");
                k
            })
        });
        assert!(caught.is_err());
    }

    /// A split inside a job (a shared computation split while the members
    /// that wait for it are built in a split) counts in that job as a split
    /// counts in a task: the job's path holds the inner split's longest job,
    /// not every inner job its thread ran.
    #[test]
    fn a_split_inside_a_job_counts_its_longest_job_on_the_path() {
        use crate::host_work::{self, test_clock};
        let _one = THREADS_SET.lock().unwrap_or_else(|e| e.into_inner());
        test_clock::install();
        let ms = Duration::from_millis;
        for threads in [1, 4] {
            set_threads(threads);
            host_work::take_task();
            map(vec![5u64], |own| {
                test_clock::advance(ms(own));
                map(vec![10u64, 30, 20], |d| test_clock::advance(ms(d)));
            });
            set_threads(2);
            let extra = host_work::take_task();
            assert_eq!(
                extra.helper_cpu + extra.own_parallel,
                ms(65),
                "{threads} threads"
            );
            assert_eq!(extra.parallel_path, ms(35), "{threads} threads");
        }
    }

    /// A split is recorded in its caller's task: the jobs' CPU time on
    /// helpers is its work, and its path counts the longest job instead of
    /// the jobs it ran itself.
    #[test]
    fn a_split_counts_its_longest_job_on_the_callers_path() {
        use crate::host_work::{self, test_clock};
        let _one = THREADS_SET.lock().unwrap_or_else(|e| e.into_inner());
        test_clock::install();
        let ms = Duration::from_millis;
        for threads in [1, 4] {
            set_threads(threads);
            host_work::take_task();
            let out = map(vec![10u64, 30, 20, 5], |d| test_clock::advance(ms(d)));
            set_threads(2);
            assert_eq!(out.len(), 4);
            let extra = host_work::take_task();
            assert_eq!(
                extra.helper_cpu + extra.own_parallel,
                ms(65),
                "{threads} threads"
            );
            assert_eq!(extra.parallel_path, ms(30), "{threads} threads");
            if threads == 1 {
                assert_eq!(extra.helper_cpu, Duration::ZERO);
            }
            // Whatever ran where, the caller's path is its own time
            // outside the split plus the longest job.
            let own = extra.own_parallel + ms(3);
            assert_eq!(extra.path(own), ms(33), "{threads} threads");
            assert_eq!(extra.work(own), ms(68), "{threads} threads");
        }
    }
}
