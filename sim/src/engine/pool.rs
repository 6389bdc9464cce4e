//! The run's workers: threads started once, at the first window with two
//! members to run, and handed every later window's members.
//!
//! A window's tasks (one member's events of the window, with the member's
//! [`Slot`], moved out of the engine for the window) go into one queue; the
//! workers and the driver's thread take them one at a time (a dealer's deal
//! costs thousands of times a receiver's step: fixed chunks left most
//! workers idle) and hand back the slot with its effects. The effects come
//! back in the window's order, so the trace is the same for any thread count.
//! Starting the window's threads each time cost the driver per worker and per
//! window; a pool costs it the hand-out and the collection alone.

use super::node::Slot;
use super::step::{run_node, Context, NodeEffects, Shared};
use crate::host_parallelism::thread_cpu;
use beacon::{Scheme, Time};
use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

/// One member's events of one window: its place in the window, the member,
/// its slot (moved out of the engine for the window), the window's end and
/// whether the merge drops what members do as replicas.
pub(super) struct Task<S: Scheme> {
    pub(super) index: usize,
    pub(super) node: u32,
    pub(super) slot: Box<Slot<S>>,
    pub(super) end: Time,
    pub(super) before_cut: bool,
}

/// A task done: its place in the window, its slot back, and its effects (or
/// the message of a panic outside the member, which `run_node` catches
/// inside it).
pub(super) struct Done<S: Scheme> {
    pub(super) index: usize,
    pub(super) node: u32,
    pub(super) slot: Box<Slot<S>>,
    pub(super) effects: Result<NodeEffects<S>, String>,
}

/// The tasks waiting for a thread, and whether the pool is shutting down.
struct Queue<S: Scheme> {
    tasks: VecDeque<Task<S>>,
    closed: bool,
}

/// What the workers and the driver share.
struct Board<S: Scheme> {
    queue: Mutex<Queue<S>>,
    ready: Condvar,
    context: Arc<Context>,
}

impl<S: Scheme> Board<S> {
    /// The next task, waiting for one unless `wait` is false; `None` once
    /// the pool closes (or, without waiting, when the queue is empty).
    fn next(&self, wait: bool) -> Option<Task<S>> {
        let mut queue = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            if let Some(task) = queue.tasks.pop_front() {
                return Some(task);
            }
            if queue.closed || !wait {
                return None;
            }
            queue = self
                .ready
                .wait(queue)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// Runs `task` on this thread, measured from this thread's CPU clock
    /// `started` ([`run_node`]); returns it done and the clock at its end.
    fn run(&self, task: Task<S>, started: Duration) -> (Done<S>, Duration) {
        let Task {
            index,
            node,
            mut slot,
            end,
            before_cut,
        } = task;
        let shared = Shared::new(&self.context, before_cut);
        let mut ended = started;
        let effects = catch_unwind(AssertUnwindSafe(|| {
            let (fx, at) = run_node(node, &mut slot, end, &shared, started);
            ended = at;
            fx
        }))
        .map_err(|p| {
            p.downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "panic".into())
        });
        if effects.is_err() {
            ended = thread_cpu();
        }
        let done = Done {
            index,
            node,
            slot,
            effects,
        };
        (done, ended)
    }
}

/// The run's worker threads.
pub(super) struct Pool<S: Scheme> {
    board: Arc<Board<S>>,
    done: Receiver<Done<S>>,
    workers: Vec<JoinHandle<()>>,
}

/// A window run on the pool: its tasks done, by their place in the window
/// (every place filled), and the CPU time of those the driver's thread ran.
pub(super) struct PoolWindow<S: Scheme> {
    pub(super) done: Vec<Option<Done<S>>>,
    pub(super) on_caller: Duration,
}

impl<S: Scheme> Pool<S> {
    /// Starts `helpers` worker threads (the driver's thread works too) over
    /// the run's `context`.
    pub(super) fn start(helpers: usize, context: Arc<Context>) -> Self {
        let board = Arc::new(Board {
            queue: Mutex::new(Queue {
                tasks: VecDeque::new(),
                closed: false,
            }),
            ready: Condvar::new(),
            context,
        });
        let (tx, done) = channel();
        let workers = (0..helpers)
            .map(|_| {
                let board = board.clone();
                let tx: Sender<Done<S>> = tx.clone();
                std::thread::spawn(move || {
                    // A worker's MSMs stay on it: blst's one shared pool
                    // would serialize them all.
                    beacon::curve::set_msm_pool(false);
                    beacon::host_work::take_task();
                    // Each task is measured from the end of the one before
                    // (waking up for a window's first included).
                    let mut clock = thread_cpu();
                    while let Some(task) = board.next(true) {
                        let (done, ended) = board.run(task, clock);
                        clock = ended;
                        if tx.send(done).is_err() {
                            return;
                        }
                    }
                })
            })
            .collect();
        Pool {
            board,
            done,
            workers,
        }
    }

    /// Runs `tasks` (one window's, numbered `0..tasks.len()` in the
    /// window's order) on the workers and this thread; returns them done in
    /// that order.
    pub(super) fn run(&self, tasks: Vec<Task<S>>) -> PoolWindow<S> {
        let count = tasks.len();
        {
            let mut queue = self
                .board
                .queue
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            queue.tasks.extend(tasks);
        }
        self.board.ready.notify_all();
        let mut done: Vec<Option<Done<S>>> = (0..count).map(|_| None).collect();
        // The tasks this thread runs, measured one from the end of the
        // other: the driver's part is before and after them.
        let first = thread_cpu();
        let mut clock = first;
        let mut received = 0;
        while let Some(task) = self.board.next(false) {
            let (d, ended) = self.board.run(task, clock);
            clock = ended;
            let index = d.index;
            done[index] = Some(d);
            received += 1;
        }
        while received < count {
            // The workers end only when the pool is dropped.
            let d = self
                .done
                .recv()
                .expect("the simulation's workers run until the pool is dropped");
            let index = d.index;
            done[index] = Some(d);
            received += 1;
        }
        PoolWindow {
            done,
            on_caller: clock.saturating_sub(first),
        }
    }
}

impl<S: Scheme> Drop for Pool<S> {
    fn drop(&mut self) {
        self.board
            .queue
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .closed = true;
        self.board.ready.notify_all();
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
    }
}
