//! A host-side cache of pure computations on public data, shared by many
//! simulated nodes.
//!
//! At thousands of nodes, many simulated nodes repeat one computation on the same
//! public inputs (summing the same DKG commitments, deriving all verification keys
//! from them). A [`Memo`] computes such a result once, keyed by a digest of its
//! inputs, and hands the same `Arc` to every caller. Each caller is still charged
//! the operations (see [`crate::cost`]) and the CPU time the computation took, so
//! virtual-time accounting is unchanged. Honest code paths are identical with the
//! cache on or off; a real node uses [`Memo::disabled`].

use crate::cost::{self, OpCounts};
use crate::host_work::{self, Measured};
use std::any::Any;
use std::cell::Cell;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// A computed result: its value, the operations and the wall time it took
/// (charged to every caller), and, where the driver measures its host
/// ([`crate::host_work`]), its name, work and path.
#[derive(Clone)]
struct Entry {
    value: Arc<dyn Any + Send + Sync>,
    counts: OpCounts,
    time: Duration,
    name: &'static str,
    measured: Measured,
}

/// One key's result: computed by the first caller, while later callers with
/// the same key wait for it instead of computing it again (at 16 threads,
/// members receiving one deal in one window each checked it).
type Slot = Arc<OnceLock<Entry>>;

/// A cache of pure computations keyed by 32-byte digests of their inputs.
pub struct Memo {
    enabled: bool,
    entries: Mutex<HashMap<[u8; 32], Slot>>,
    /// The last [`RECENT`] keys of [`Memo::get_or_compute_recent`].
    recent: Mutex<VecDeque<([u8; 32], Slot)>>,
}

/// Results [`Memo::get_or_compute_recent`] keeps.
const RECENT: usize = 64;

impl std::fmt::Debug for Memo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Memo(enabled = {})", self.enabled)
    }
}

thread_local! {
    static CHARGED: Cell<Duration> = const { Cell::new(Duration::ZERO) };
}

/// CPU time charged to this thread for cache hits since the last call (the time
/// the shared computations took when first run); resets the accumulator.
pub fn take_charged_time() -> Duration {
    CHARGED.with(|c| c.replace(Duration::ZERO))
}

impl Memo {
    /// A cache that never caches: every call computes (what a real node does).
    pub fn disabled() -> Arc<Memo> {
        Arc::new(Memo {
            enabled: false,
            entries: Mutex::new(HashMap::new()),
            recent: Mutex::new(VecDeque::new()),
        })
    }

    /// A shared cache (for simulators and in-process harnesses).
    pub fn shared() -> Arc<Memo> {
        Arc::new(Memo {
            enabled: true,
            entries: Mutex::new(HashMap::new()),
            recent: Mutex::new(VecDeque::new()),
        })
    }

    /// Whether results are shared.
    pub fn is_enabled(&self) -> bool {
        self.enabled
    }

    /// The result of `compute` for inputs with digest `key`: computed now, or the
    /// shared result of an earlier call with the same key (charging this thread the
    /// operations and time the computation took). A call while another thread
    /// computes the same key waits for that result. `compute` must be a pure
    /// function of the inputs `key` digests.
    pub fn get_or_compute<T: Any + Send + Sync>(
        &self,
        key: [u8; 32],
        compute: impl FnOnce() -> T,
    ) -> Arc<T> {
        if !self.enabled {
            return Arc::new(compute());
        }
        let slot = self
            .entries
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(key)
            .or_default()
            .clone();
        Self::share(key, &slot, compute)
    }

    /// [`Memo::get_or_compute`] for large results worth sharing only while
    /// they are recent (the tables of the messages replicas sign now): the
    /// last few are kept, and an older one is computed again if asked for.
    pub fn get_or_compute_recent<T: Any + Send + Sync>(
        &self,
        key: [u8; 32],
        compute: impl FnOnce() -> T,
    ) -> Arc<T> {
        if !self.enabled {
            return Arc::new(compute());
        }
        let slot = {
            let mut recent = self.recent.lock().unwrap_or_else(|e| e.into_inner());
            match recent.iter().find(|(k, _)| *k == key) {
                Some((_, slot)) => slot.clone(),
                None => {
                    if recent.len() == RECENT {
                        recent.pop_front();
                    }
                    let slot = Slot::default();
                    recent.push_back((key, slot.clone()));
                    slot
                }
            }
        };
        Self::share(key, &slot, compute)
    }

    /// The result in `slot`: computed here if it is empty (other callers of
    /// the key wait meanwhile), else charged to this thread as a hit. A result
    /// of another type (a key misused for two computations) is computed again
    /// and not shared.
    fn share<T: Any + Send + Sync, F: FnOnce() -> T>(
        key: [u8; 32],
        slot: &OnceLock<Entry>,
        compute: F,
    ) -> Arc<T> {
        let mut compute = Some(compute);
        let mut mine = None;
        let entry = slot.get_or_init(|| {
            let run = compute.take().expect("the slot runs its initializer once");
            let (value, entry) = Self::compute(key, run);
            mine = Some(value);
            entry
        });
        if let Some(value) = mine {
            return value;
        }
        if let Some(value) = Self::charged(key, entry.clone()) {
            return value;
        }
        let run = compute
            .take()
            .expect("not run: the slot was filled by another call");
        Self::compute(key, run).0
    }

    /// A cached result, charging this thread the operations and time it took
    /// (`None` if it is of another type).
    fn charged<T: Any + Send + Sync>(key: [u8; 32], entry: Entry) -> Option<Arc<T>> {
        let v = entry.value.downcast::<T>().ok()?;
        cost::charge(&entry.counts);
        CHARGED.with(|c| c.set(c.get() + entry.time));
        host_work::used_shared(key, entry.name, entry.measured);
        Some(v)
    }

    /// Runs `compute`, charging this thread its operations, and the entry
    /// that charges them to later callers.
    fn compute<T: Any + Send + Sync, F: FnOnce() -> T>(
        key: [u8; 32],
        compute: F,
    ) -> (Arc<T>, Entry) {
        let before = cost::take();
        let section = host_work::start_section();
        // Named exception: the host's CPU time of a shared computation, charged
        // to every node that uses it (simulation accounting, not protocol time).
        #[allow(clippy::disallowed_methods)]
        let start = Instant::now();
        let value = Arc::new(compute());
        let time = start.elapsed();
        let counts = cost::take();
        cost::charge(&before);
        cost::charge(&counts);
        let (name, measured) = match section {
            Some(section) => {
                let name = host_work::computation_name::<F>();
                (name, host_work::end_section(section, name, key))
            }
            None => ("", Measured::default()),
        };
        let entry = Entry {
            value: value.clone(),
            counts,
            time,
            name,
            measured,
        };
        (value, entry)
    }

    /// Drops every cached result.
    pub fn clear(&self) {
        self.entries
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
        self.recent
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::curve::{Point, G1};
    use crate::field::Scalar;

    #[test]
    fn shared_results_are_charged_to_every_caller() {
        let memo = Memo::shared();
        cost::take();
        let a = memo.get_or_compute([1; 32], || G1::generator().mul(&Scalar::from_u64(3)));
        let first = cost::take();
        assert_eq!(first.mul_g1, 1);
        let b = memo.get_or_compute([1; 32], || -> G1 { unreachable!("cached") });
        assert!(Arc::ptr_eq(&a, &b));
        assert_eq!(cost::take(), first);
        let off = Memo::disabled();
        let c = off.get_or_compute([1; 32], || G1::generator().mul(&Scalar::from_u64(3)));
        assert_eq!(*c, *a);
        assert_eq!(cost::take().mul_g1, 1);
    }

    /// Callers of one key on several threads at once wait for the one
    /// computation instead of each running it (what burned CPU without
    /// progress at 16 simulation threads), and each is charged its cost.
    #[test]
    fn concurrent_callers_of_one_key_compute_it_once() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        for recent in [false, true] {
            let memo = Memo::shared();
            let runs = AtomicUsize::new(0);
            let start = std::sync::Barrier::new(8);
            let results: Vec<(Arc<G1>, u64)> = std::thread::scope(|s| {
                let handles: Vec<_> = (0..8)
                    .map(|_| {
                        s.spawn(|| {
                            cost::take();
                            start.wait();
                            let compute = || {
                                runs.fetch_add(1, Ordering::SeqCst);
                                // Long enough that the other callers arrive
                                // while it runs.
                                std::thread::sleep(Duration::from_millis(50));
                                G1::generator().mul(&Scalar::from_u64(5))
                            };
                            let value = if recent {
                                memo.get_or_compute_recent([7; 32], compute)
                            } else {
                                memo.get_or_compute([7; 32], compute)
                            };
                            (value, cost::take().mul_g1)
                        })
                    })
                    .collect();
                handles.into_iter().map(|h| h.join().unwrap()).collect()
            });
            assert_eq!(runs.load(Ordering::SeqCst), 1, "recent = {recent}");
            for (value, charged) in &results {
                assert!(Arc::ptr_eq(value, &results[0].0));
                assert_eq!(*charged, 1, "every caller is charged the multiplication");
            }
        }
    }

    /// A result computed in this window is on the path of every task that
    /// uses it (once per task: it waited for it); one computed in an earlier
    /// window was ready, and is on no one's path. Charges are unchanged.
    #[test]
    fn a_task_waits_for_a_shared_result_of_its_own_window_only() {
        use crate::host_work::{self, test_clock};
        test_clock::install();
        let memo = Memo::shared();
        let ms = Duration::from_millis;
        let key = [42; 32];
        host_work::begin_window();
        host_work::take_task();
        let value = memo.get_or_compute(key, || {
            test_clock::advance(ms(40));
            7u32
        });
        let computer = host_work::take_task();
        assert_eq!(computer.waited, Duration::ZERO);
        assert_eq!(computer.shared.len(), 1);
        assert_eq!(computer.shared[0].1, ms(40));
        assert!(
            computer.shared[0]
                .0
                .ends_with("memo::tests::a_task_waits_for_a_shared_result_of_its_own_window_only"),
            "{}",
            computer.shared[0].0
        );
        // Another task of the window uses it twice: it waited once.
        for _ in 0..2 {
            let again = memo.get_or_compute(key, || -> u32 { unreachable!("shared") });
            assert!(Arc::ptr_eq(&value, &again));
        }
        let waiter = host_work::take_task();
        assert_eq!(waiter.waited, ms(40));
        assert_eq!(waiter.path(ms(1)), ms(41));
        assert_eq!(
            waiter.work(ms(1)),
            ms(1),
            "the computation is the computer's work"
        );
        // In the next window it is ready.
        host_work::begin_window();
        let _ = memo.get_or_compute(key, || -> u32 { unreachable!("shared") });
        assert_eq!(host_work::take_task(), host_work::TaskExtra::default());
    }
}
