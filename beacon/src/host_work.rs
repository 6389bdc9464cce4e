//! The host's work and path of a driver's parallel tasks: a measurement the
//! simulator's driver makes of itself, never protocol logic.
//!
//! The simulator runs many members' steps on several threads, window by
//! window. To tell how that work would spread over more cores, it measures
//! each task (one member's events of one window) twice:
//! - its *work*: the CPU time it took on every thread, the helpers that ran
//!   parts of it in parallel ([`crate::parallel`]) included;
//! - its *path*: the longest chain of work it had to wait for. That is its
//!   own thread's CPU time, with each parallel split counted by its longest
//!   job instead of by the jobs this thread ran, plus the path of every shared
//!   result ([`crate::memo`]) it waited for while another task of the same
//!   window computed it.
//!
//! This module keeps, per thread, what the current task did beyond its own
//! thread's CPU time ([`TaskExtra`]), and which window the driver runs now
//! ([`begin_window`]). It reads a clock only once a driver installed one
//! ([`install_clock`], the thread's CPU clock): a node never does, and then
//! nothing here is measured or kept. Nothing here changes what a member
//! computes or is charged in virtual time.

use std::cell::RefCell;
use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

/// The clock that measures: the calling thread's CPU time.
static CLOCK: OnceLock<fn() -> Duration> = OnceLock::new();

/// The window the driver runs now.
static WINDOW: AtomicU64 = AtomicU64::new(0);

/// What a task did beyond its own thread's CPU time.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TaskExtra {
    /// CPU time of parallel jobs that helper threads ran for it.
    pub helper_cpu: Duration,
    /// CPU time of parallel jobs it ran on its own thread (part of its own
    /// CPU time, but not of its path: the longest job stands for them).
    pub own_parallel: Duration,
    /// Its parallel splits' paths: the longest job of each.
    pub parallel_path: Duration,
    /// The paths of the shared results it waited for: computed by another
    /// task in the same window.
    pub waited: Duration,
    /// The shared results on its path, by the name of their computation:
    /// those it computed and those it waited for, in this window.
    pub shared: Vec<(&'static str, Duration)>,
}

impl TaskExtra {
    /// The task's work, given its own thread's CPU time `own`.
    pub fn work(&self, own: Duration) -> Duration {
        own + self.helper_cpu
    }

    /// The task's path, given its own thread's CPU time `own`.
    pub fn path(&self, own: Duration) -> Duration {
        own.saturating_sub(self.own_parallel) + self.parallel_path + self.waited
    }
}

thread_local! {
    static EXTRA: RefCell<TaskExtra> = RefCell::new(TaskExtra::default());
    /// The shared results already on this task's path.
    static ON_PATH: RefCell<HashSet<[u8; 32]>> = RefCell::new(HashSet::new());
}

/// Installs the clock that measures (the calling thread's CPU time); the
/// first call wins. Without one, nothing is measured.
pub fn install_clock(clock: fn() -> Duration) {
    let _ = CLOCK.set(clock);
}

/// The calling thread's CPU time, if a clock is installed.
pub fn cpu_now() -> Option<Duration> {
    CLOCK.get().map(|clock| clock())
}

/// The driver starts its next window: shared results computed before it are
/// ready, and no task waits for them.
pub fn begin_window() {
    WINDOW.fetch_add(1, Ordering::Relaxed);
}

/// The window the driver runs now.
pub fn window() -> u64 {
    WINDOW.load(Ordering::Relaxed)
}

/// What this thread's task did beyond its own CPU time since the last call;
/// starts the next task afresh.
pub fn take_task() -> TaskExtra {
    ON_PATH.with(|p| p.borrow_mut().clear());
    EXTRA.with(|e| std::mem::take(&mut *e.borrow_mut()))
}

/// Runs `job`, one job of a parallel split, as a task of its own: what it
/// did beyond its thread's CPU time (a split inside it, the shared results
/// it waited for) is returned, not added to this thread's task, whose own
/// record is left as it was.
pub(crate) fn as_job<R>(job: impl FnOnce() -> R) -> (R, TaskExtra) {
    let outer = EXTRA.with(|e| std::mem::take(&mut *e.borrow_mut()));
    let result = job();
    let inner = EXTRA.with(|e| std::mem::replace(&mut *e.borrow_mut(), outer));
    (result, inner)
}

/// A parallel split of this thread's task: `own` of its jobs' CPU time ran
/// on this thread, `helpers` on others, and its longest job took `longest`.
pub(crate) fn record_split(own: Duration, helpers: Duration, longest: Duration) {
    EXTRA.with(|e| {
        let mut e = e.borrow_mut();
        e.own_parallel += own;
        e.helper_cpu += helpers;
        e.parallel_path += longest;
    });
}

/// The work and path of one shared computation, measured where it ran.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Measured {
    /// CPU time on every thread.
    pub work: Duration,
    /// The longest chain of it (see the module documentation).
    pub path: Duration,
    /// The window it was computed in.
    pub window: u64,
}

/// The start of a measured computation on this thread.
pub(crate) struct Section {
    cpu: Duration,
    extra: TaskExtra,
}

/// Starts measuring a computation on this thread (`None` without a clock).
pub(crate) fn start_section() -> Option<Section> {
    let cpu = cpu_now()?;
    let extra = EXTRA.with(|e| e.borrow().clone());
    Some(Section { cpu, extra })
}

/// Ends the computation `section` started: its work and path, and this
/// task's path now holds it under `name` (the results it waited for inside
/// it are its own, not named apart). `key`: the shared result it computed.
pub(crate) fn end_section(section: Section, name: &'static str, key: [u8; 32]) -> Measured {
    let Some(now) = cpu_now() else {
        return Measured::default();
    };
    let own = now.saturating_sub(section.cpu);
    let before = section.extra;
    EXTRA.with(|e| {
        let mut e = e.borrow_mut();
        let inner = TaskExtra {
            helper_cpu: e.helper_cpu.saturating_sub(before.helper_cpu),
            own_parallel: e.own_parallel.saturating_sub(before.own_parallel),
            parallel_path: e.parallel_path.saturating_sub(before.parallel_path),
            waited: e.waited.saturating_sub(before.waited),
            shared: Vec::new(),
        };
        let measured = Measured {
            work: inner.work(own),
            path: inner.path(own),
            window: window(),
        };
        e.shared.truncate(before.shared.len());
        e.shared.push((name, measured.path));
        ON_PATH.with(|p| p.borrow_mut().insert(key));
        measured
    })
}

/// This task used the shared result `key`, named `name`, that was computed
/// as `measured`: if another task computed it in this window, this one
/// waited for it, and its path holds the computation's (once per task).
pub(crate) fn used_shared(key: [u8; 32], name: &'static str, measured: Measured) {
    if CLOCK.get().is_none() || measured.window != window() {
        return;
    }
    if !ON_PATH.with(|p| p.borrow_mut().insert(key)) {
        return;
    }
    EXTRA.with(|e| {
        let mut e = e.borrow_mut();
        e.waited += measured.path;
        e.shared.push((name, measured.path));
    });
}

/// The name of a computation: the path of the function that wrote the
/// closure `F`, without generic arguments or closure markers
/// (`beacon::dkg::batch::batch_check`).
pub(crate) fn computation_name<F>() -> &'static str {
    static NAMES: OnceLock<std::sync::Mutex<HashSet<&'static str>>> = OnceLock::new();
    let full = std::any::type_name::<F>();
    let mut short = String::with_capacity(full.len());
    let mut depth = 0usize;
    for c in full.chars() {
        match c {
            '<' => depth += 1,
            '>' => depth = depth.saturating_sub(1),
            _ if depth == 0 => short.push(c),
            _ => {}
        }
    }
    while let Some(rest) = short.strip_suffix("::{{closure}}") {
        short.truncate(rest.len());
    }
    // `<impl Trait for Type>` segments leave an empty one.
    let short = short.replace("::::", "::");
    let names = NAMES.get_or_init(Default::default);
    let mut names = names.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(found) = names.get(short.as_str()) {
        return found;
    }
    let leaked: &'static str = Box::leak(short.into_boxed_str());
    names.insert(leaked);
    leaked
}

/// A clock for tests: each thread's time moves only when it calls
/// [`test_clock::advance`].
#[cfg(test)]
pub(crate) mod test_clock {
    use std::cell::Cell;
    use std::time::Duration;

    thread_local! {
        static NOW: Cell<Duration> = const { Cell::new(Duration::ZERO) };
    }

    /// This thread's time.
    pub(crate) fn now() -> Duration {
        NOW.with(|n| n.get())
    }

    /// This thread spends `d`.
    pub(crate) fn advance(d: Duration) {
        NOW.with(|n| n.set(n.get() + d));
    }

    /// Installs this clock (the first clock installed in a test process wins,
    /// and only tests install one).
    pub(crate) fn install() {
        super::install_clock(now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_task_path_counts_each_split_by_its_longest_job() {
        let ms = Duration::from_millis;
        let extra = TaskExtra {
            helper_cpu: ms(30),
            own_parallel: ms(20),
            parallel_path: ms(12),
            waited: ms(5),
            shared: Vec::new(),
        };
        // 50 ms on its own thread, 20 of them jobs of a split whose longest
        // job took 12 ms; helpers ran 30 ms; it waited 5 ms for a result.
        assert_eq!(extra.work(ms(50)), ms(80));
        assert_eq!(extra.path(ms(50)), ms(30 + 12 + 5));
    }

    #[test]
    fn computations_are_named_by_the_function_that_wrote_them() {
        fn outer<T>() -> &'static str {
            let f = || -> Option<T> { None };
            fn name_of<F>(_: &F) -> &'static str {
                computation_name::<F>()
            }
            name_of(&f)
        }
        let name = outer::<Vec<u8>>();
        assert!(
            name.ends_with(
                "host_work::tests::computations_are_named_by_the_function_that_wrote_them::outer"
            ),
            "{name}"
        );
        assert!(std::ptr::eq(name, outer::<u32>()), "one name, kept once");
    }
}
