//! Host parallelism: how the simulator's own work would spread over more
//! threads, measured on whatever machine runs it (two cores are enough).
//!
//! The engine runs a window's members as tasks on its workers, then merges
//! their effects on one thread. For each phase (the DKG, then the rounds) it
//! measures, with each thread's CPU clock:
//! - the *work*: the CPU time of every task, on every thread
//!   ([`beacon::host_work`]: the helpers of a split computation included);
//! - the *span*: per window, the longest task's *path* (its own CPU time,
//!   each split computation counted by its longest job, plus the shared
//!   results it waited for while another task computed them);
//! - the *serial* part: what the driver does on its one thread between
//!   windows (queue, handing out and collecting the tasks, merge,
//!   bookkeeping). The setup (every member built, and every party's keys)
//!   is one window of its own: its work splits over the threads.
//!
//! On `T` threads a window takes at least `max(span, work / T)`, so the
//! projected wall time of a phase is `sum over windows of max(span_w,
//! work_w / T) + serial` ([`project`]), and the speed-up is the projection
//! on one thread over the projection on `T`. The workers start once per run
//! (`crate::engine`'s pool): the serial part counts the driver's hand-out
//! and collection of each window's tasks, the same on any thread count.
//! The measurement varies from run to run (it is the host's CPU time); what
//! it measures does not change the run, whose trace hash is the same with or
//! without it.
//!
//! The *serial contributors* split the wall time on unlimited threads (the
//! sum of the spans and the serial part): the driver's parts, each shared
//! computation on the longest path of a window (named by the function that
//! computes it), and the rest of those longest tasks' own work (named by
//! their first event).

use serde::Serialize;
use std::collections::BTreeMap;
use std::time::Duration;

/// The thread counts every report projects to (one is the baseline of the
/// speed-ups).
pub const PROJECTED_THREADS: [usize; 4] = [1, 2, 16, 64];

/// Serial contributors a report names.
const TOP: usize = 3;

/// The driver's part that hands a window's tasks to the run's workers and
/// collects them (the workers start once per run).
pub(crate) const WORKERS: &str = "workers (hand out, collect)";

/// The calling thread's CPU time (zero where the clock is unavailable).
pub(crate) fn thread_cpu() -> Duration {
    cpu_time::ThreadTime::try_now()
        .map(|t| t.as_duration())
        .unwrap_or_default()
}

/// What one task (a member's events of one window) took.
#[derive(Clone, Debug, Default)]
pub(crate) struct TaskMeasure {
    /// CPU time on the thread that ran it.
    pub(crate) own: Duration,
    /// CPU time on every thread.
    pub(crate) work: Duration,
    /// Its longest chain (see the module documentation).
    pub(crate) path: Duration,
    /// The shared computations on its path, by name.
    pub(crate) shared: Vec<(&'static str, Duration)>,
    /// What its own work is named by: its first event's kind.
    pub(crate) first_event: &'static str,
}

impl TaskMeasure {
    /// The task measured from its own thread's CPU time `own` and what
    /// [`beacon::host_work::take_task`] returned at its end.
    pub(crate) fn new(
        own: Duration,
        extra: beacon::host_work::TaskExtra,
        first_event: &'static str,
    ) -> Self {
        TaskMeasure {
            own,
            work: extra.work(own),
            path: extra.path(own),
            shared: extra.shared,
            first_event,
        }
    }
}

/// One window's tasks, folded.
#[derive(Clone, Debug, Default)]
pub(crate) struct WindowMeasure {
    /// Tasks.
    pub(crate) tasks: u64,
    /// The sum of their work.
    pub(crate) work: Duration,
    /// The longest task (by path).
    pub(crate) longest: TaskMeasure,
}

impl WindowMeasure {
    /// Adds a task (kept only if it is the longest so far).
    pub(crate) fn add(&mut self, task: &TaskMeasure) {
        self.tasks += 1;
        self.work += task.work;
        if task.path > self.longest.path {
            self.longest = task.clone();
        }
    }
}

/// The wall time a phase is projected to take on `threads` threads: the sum
/// over its `windows` (work, span) of `max(span, work / threads)`, plus the
/// `serial` part.
pub fn project(windows: &[(Duration, Duration)], serial: Duration, threads: usize) -> Duration {
    windows
        .iter()
        .map(|(work, span)| window_wall(*work, *span, threads))
        .sum::<Duration>()
        + serial
}

/// One window's wall time on `threads` threads: `max(span, work / threads)`.
fn window_wall(work: Duration, span: Duration, threads: usize) -> Duration {
    span.max(work / threads.max(1) as u32)
}

/// One phase's measurement, accumulated window by window.
#[derive(Clone, Debug, Default)]
pub(crate) struct PhaseMeter {
    windows: u64,
    tasks: u64,
    work: Duration,
    span: Duration,
    serial: Duration,
    /// Per [`PROJECTED_THREADS`]: the sum of the windows' walls.
    windows_wall: [Duration; PROJECTED_THREADS.len()],
    /// The wall on unlimited threads, by contributor.
    contributors: BTreeMap<String, Duration>,
}

impl PhaseMeter {
    /// Adds a window.
    pub(crate) fn window(&mut self, w: WindowMeasure) {
        if w.tasks == 0 {
            return;
        }
        self.windows += 1;
        self.tasks += w.tasks;
        self.work += w.work;
        let span = w.longest.path;
        self.span += span;
        for (k, threads) in PROJECTED_THREADS.into_iter().enumerate() {
            self.windows_wall[k] += window_wall(w.work, span, threads);
        }
        let mut own = span;
        for (name, path) in &w.longest.shared {
            own = own.saturating_sub(*path);
            *self
                .contributors
                .entry(format!("shared: {name}"))
                .or_default() += *path;
        }
        *self
            .contributors
            .entry(format!(
                "longest task's own work (first event: {})",
                w.longest.first_event
            ))
            .or_default() += own;
    }

    /// Adds `cpu` of the driver's serial work `part`.
    pub(crate) fn serial(&mut self, part: &'static str, cpu: Duration) {
        self.serial += cpu;
        *self
            .contributors
            .entry(format!("driver: {part}"))
            .or_default() += cpu;
    }

    /// The phase's figures.
    pub(crate) fn report(&self) -> PhaseParallelism {
        let walls: Vec<Duration> = (0..PROJECTED_THREADS.len())
            .map(|k| self.windows_wall[k] + self.serial)
            .collect();
        let one = walls[0].as_secs_f64();
        let projected = PROJECTED_THREADS
            .iter()
            .zip(&walls)
            .map(|(threads, wall)| Projection {
                threads: *threads,
                wall_s: wall.as_secs_f64(),
                speedup: ratio(one, wall.as_secs_f64()),
            })
            .collect();
        PhaseParallelism {
            windows: self.windows,
            tasks: self.tasks,
            work_s: self.work.as_secs_f64(),
            span_s: self.span.as_secs_f64(),
            serial_s: self.serial.as_secs_f64(),
            projected,
            serial_top: top(&self.contributors, self.span + self.serial, TOP),
            serial_parts: top(&self.contributors, self.span + self.serial, usize::MAX),
        }
    }

    /// Adds `other`'s contributors to `into` (for the run's whole list).
    fn contributors_into(&self, into: &mut BTreeMap<String, Duration>) {
        for (name, d) in &self.contributors {
            *into.entry(name.clone()).or_default() += *d;
        }
    }
}

/// `a / b`, zero where `b` is.
fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 {
        a / b
    } else {
        0.0
    }
}

/// The `most` largest of `contributors`, each with its share of `total`.
fn top(
    contributors: &BTreeMap<String, Duration>,
    total: Duration,
    most: usize,
) -> Vec<SerialContributor> {
    let mut all: Vec<(&String, &Duration)> = contributors.iter().collect();
    all.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    all.into_iter()
        .take(most)
        .map(|(name, d)| SerialContributor {
            name: name.clone(),
            s: d.as_secs_f64(),
            share: ratio(d.as_secs_f64(), total.as_secs_f64()),
        })
        .collect()
}

/// The run's two phases.
#[derive(Clone, Debug, Default)]
pub(crate) struct HostMeter {
    /// The DKG, until the rounds start (with the setup of the members).
    pub(crate) dkg: PhaseMeter,
    /// The rounds.
    pub(crate) rounds: PhaseMeter,
}

impl HostMeter {
    /// The report, for a run on `threads` threads.
    pub(crate) fn report(&self, threads: usize) -> HostParallelism {
        let mut all = BTreeMap::new();
        self.dkg.contributors_into(&mut all);
        self.rounds.contributors_into(&mut all);
        let total = self.dkg.span + self.dkg.serial + self.rounds.span + self.rounds.serial;
        HostParallelism {
            clock: "thread CPU time",
            threads,
            dkg: self.dkg.report(),
            rounds: self.rounds.report(),
            serial_top: top(&all, total, TOP),
        }
    }
}

/// The projected wall time on some number of threads.
#[derive(Clone, Debug, Serialize)]
pub struct Projection {
    /// Threads.
    pub threads: usize,
    /// Projected wall time (s).
    pub wall_s: f64,
    /// The projection on one thread over this one.
    pub speedup: f64,
}

/// A part of the wall time on unlimited threads.
#[derive(Clone, Debug, Serialize)]
pub struct SerialContributor {
    /// What it is: `driver: <part>`, `shared: <function>`, or the longest
    /// tasks' own work.
    pub name: String,
    /// Its time (s).
    pub s: f64,
    /// Its share of the wall time on unlimited threads.
    pub share: f64,
}

/// One phase's host parallelism.
#[derive(Clone, Debug, Serialize)]
pub struct PhaseParallelism {
    /// Windows that ran a task.
    pub windows: u64,
    /// Tasks (a member's events of one window).
    pub tasks: u64,
    /// The CPU time of every task (s).
    pub work_s: f64,
    /// The sum over windows of the longest task's path (s).
    pub span_s: f64,
    /// The driver's serial work between windows (s).
    pub serial_s: f64,
    /// The projected wall time on 1, 2, 16 and 64 threads.
    pub projected: Vec<Projection>,
    /// The largest parts of the wall time on unlimited threads.
    pub serial_top: Vec<SerialContributor>,
    /// Every part of the wall time on unlimited threads, largest first.
    pub serial_parts: Vec<SerialContributor>,
}

impl PhaseParallelism {
    /// The projection on `threads` threads, if reported.
    pub fn on(&self, threads: usize) -> Option<&Projection> {
        self.projected.iter().find(|p| p.threads == threads)
    }
}

/// How the simulator's host work would spread over more threads (the module
/// documentation says how it is measured and projected).
#[derive(Clone, Debug, Serialize)]
pub struct HostParallelism {
    /// The clock of the measurement.
    pub clock: &'static str,
    /// Threads of the run that measured it.
    pub threads: usize,
    /// The DKG (with the members' setup).
    pub dkg: PhaseParallelism,
    /// The rounds.
    pub rounds: PhaseParallelism,
    /// The largest parts of the whole run's wall time on unlimited threads.
    pub serial_top: Vec<SerialContributor>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    /// Three windows of known work and span, and a serial part: the
    /// projection on each thread count is the sum of max(span, work / T).
    #[test]
    fn the_projection_is_the_sum_of_each_windows_bound_plus_the_serial_part() {
        // (work, span): wide, narrow (one long task), and in between.
        let windows = [(ms(6400), ms(10)), (ms(1000), ms(900)), (ms(3200), ms(100))];
        let serial = ms(50);
        assert_eq!(project(&windows, serial, 1), ms(6400 + 1000 + 3200 + 50));
        assert_eq!(project(&windows, serial, 2), ms(3200 + 900 + 1600 + 50));
        assert_eq!(project(&windows, serial, 16), ms(400 + 900 + 200 + 50));
        assert_eq!(project(&windows, serial, 64), ms(100 + 900 + 100 + 50));
        // The meter folds the same windows from their tasks.
        let mut meter = PhaseMeter::default();
        let task = |work: u64, path: u64| TaskMeasure {
            own: ms(work),
            work: ms(work),
            path: ms(path),
            shared: Vec::new(),
            first_event: "start",
        };
        for tasks in [
            (0..640).map(|_| task(10, 10)).collect::<Vec<_>>(),
            vec![task(100, 100), task(900, 900)],
            (0..32).map(|_| task(100, 100)).collect(),
        ] {
            let mut w = WindowMeasure::default();
            for t in tasks {
                w.add(&t);
            }
            meter.window(w);
        }
        meter.serial("merge", serial);
        let r = meter.report();
        let walls: Vec<f64> = r.projected.iter().map(|p| p.wall_s).collect();
        let expected: Vec<f64> = PROJECTED_THREADS
            .iter()
            .map(|t| project(&windows, serial, *t).as_secs_f64())
            .collect();
        assert_eq!(walls, expected);
        assert_eq!((r.windows, r.tasks), (3, 674));
        assert!((r.work_s - 10.6).abs() < 1e-9 && (r.span_s - 1.01).abs() < 1e-9);
        let speedup_16 = r.on(16).map(|p| p.speedup).unwrap_or_default();
        assert!((speedup_16 - 10.65 / 1.55).abs() < 1e-9, "{speedup_16}");
    }

    /// The serial contributors split the spans and the serial part: shared
    /// computations on the longest path by name, the rest of the longest
    /// task by its first event, the driver's parts by name.
    #[test]
    fn serial_contributors_name_the_longest_paths_parts() {
        let mut meter = HostMeter::default();
        let mut w = WindowMeasure::default();
        w.add(&TaskMeasure {
            own: ms(500),
            work: ms(500),
            path: ms(700),
            shared: vec![("beacon::dkg::batch::batch_check", ms(600))],
            first_event: "dkg-shares",
        });
        w.add(&TaskMeasure {
            own: ms(650),
            work: ms(650),
            path: ms(650),
            shared: Vec::new(),
            first_event: "start",
        });
        meter.dkg.window(w);
        meter.dkg.serial("merge", ms(300));
        meter.rounds.serial("queue", ms(20));
        let r = meter.report(2);
        let names: Vec<(&str, f64)> = r
            .serial_top
            .iter()
            .map(|c| (c.name.as_str(), c.s))
            .collect();
        assert_eq!(
            names,
            vec![
                ("shared: beacon::dkg::batch::batch_check", 0.6),
                ("driver: merge", 0.3),
                ("longest task's own work (first event: dkg-shares)", 0.1),
            ]
        );
        assert!((r.serial_top[0].share - 0.6 / 1.02).abs() < 1e-9);
        assert!((r.dkg.projected[0].wall_s - 1.45).abs() < 1e-9);
    }
}
