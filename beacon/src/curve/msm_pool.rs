//! Whether this thread's multi-scalar multiplications use blst's shared
//! thread pool ([`set_msm_pool`]), and the smallest MSM that does.

/// Smallest MSM that blst's shared thread pool runs (below it, dispatching to
/// the pool costs more than it saves).
pub(super) const POOL_MIN_POINTS: usize = 32;

thread_local! {
    /// Whether this thread's MSMs may use blst's shared thread pool.
    static MSM_POOL: std::cell::Cell<bool> = const { std::cell::Cell::new(true) };
}

/// Lets (`true`, the default) or stops (`false`) this thread's MSMs using
/// blst's shared thread pool. A driver that runs many members on threads of
/// its own (the simulator's workers) turns it off on them: otherwise every
/// MSM of every worker queues on one process-wide pool behind one lock, and
/// more workers burn more CPU for little more progress. Results are the same
/// either way.
pub fn set_msm_pool(enabled: bool) {
    MSM_POOL.with(|p| p.set(enabled));
}

pub(super) fn msm_pool() -> bool {
    MSM_POOL.with(|p| p.get())
}

/// Whether this thread's large MSMs run on blst's shared thread pool (then a
/// caller does not split them over threads of its own: see
/// [`crate::parallel`]).
pub fn msm_pool_enabled() -> bool {
    msm_pool()
}
