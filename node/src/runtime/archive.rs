//! The chain on disk as the API sees it: the persistence thread writes
//! finalized heights durably (trying a failed write again until the disk
//! takes it), then publishes them to the API's view; the store answers the
//! API for heights older than that view.

use crate::clock::now;
use crate::http::{ApiState, BlockJson, ChainView};
use crate::store::{DiskWriter, Store, WriteRetry};
use beacon::{Beacon, Point as _, Scheme};
use consensus::CommittedEntry;
use std::sync::mpsc::TryRecvError;
use std::sync::Arc;
use std::time::Instant;
use tracing::{error, warn};

/// Writes finalized heights durably, then makes them visible to the API. A
/// write that fails (a full disk) is tried again with backoff, with what was
/// queued meanwhile, until it succeeds (`store::WriteRetry`); the failure
/// shows on `/health` and the metrics meanwhile.
pub(super) fn persistence_thread<S: Scheme>(
    store: Arc<Store>,
    state: Arc<ApiState>,
    rx: std::sync::mpsc::Receiver<Arc<CommittedEntry<S>>>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        while let Ok(first) = rx.recv() {
            // Coalesce what is already queued into one transaction.
            let mut batch = vec![first];
            batch.extend(rx.try_iter());
            let mut retry: Option<WriteRetry> = None;
            loop {
                let t0 = now().0;
                let r = store.append(&batch);
                tracing::trace!(target: "timeline", at = t0, wall_us = now().0 - t0, "appended");
                let Err(e) = r else { break };
                state.disk_failed(DiskWriter::Chain, &e);
                match &mut retry {
                    None => {
                        error!(error = %e, heights = batch.len(), "cannot persist finalized heights; trying again with backoff");
                        retry = Some(WriteRetry::new(e.to_string()));
                    }
                    Some(r) => r.failed_again(),
                }
                if let Some(r) = &retry {
                    std::thread::sleep(r.due().saturating_duration_since(Instant::now()));
                }
                loop {
                    match rx.try_recv() {
                        Ok(entry) => batch.push(entry),
                        Err(TryRecvError::Empty) => break,
                        Err(TryRecvError::Disconnected) => {
                            // The node stops: peers give the heights back at
                            // its next start.
                            error!(
                                heights = batch.len(),
                                "stopping with finalized heights the disk did not take"
                            );
                            return;
                        }
                    }
                }
            }
            if let Some(r) = retry {
                state.disk_recovered(DiskWriter::Chain);
                warn!(
                    failed_s = format!("{:.1}", r.elapsed().as_secs_f64()),
                    tries = r.failures(),
                    first_error = r.first_error(),
                    heights = batch.len(),
                    "finalized heights persisted again after failed writes"
                );
            }
            let mut view = state.chain.write().unwrap_or_else(|e| e.into_inner());
            for entry in &batch {
                publish(&mut view, entry);
            }
            state.metrics.height.set(view.latest() as i64);
        }
    })
}

/// A committed block as the API shows it.
fn block_json<S: Scheme>(entry: &CommittedEntry<S>) -> BlockJson {
    let block = &entry.block;
    BlockJson {
        height: block.height.get(),
        digest: hex::encode(entry.certificate.digest),
        parent: hex::encode(block.parent),
        view: entry.certificate.view.get(),
        path: entry.certificate.path.as_str(),
        transactions: block.transactions.iter().map(hex::encode).collect(),
    }
}

/// Adds a durable entry's beacon and block to the API view.
pub(super) fn publish<S: Scheme>(view: &mut ChainView, entry: &CommittedEntry<S>) {
    view.insert(beacon_of(entry), block_json(entry));
}

/// The beacon of a finalized entry: its block names the beacon it chains on
/// (the genesis seed for round 1), so no other height is needed.
fn beacon_of<S: Scheme>(entry: &CommittedEntry<S>) -> Beacon {
    Beacon::new(
        S::ID,
        entry.block.height.get(),
        entry.beacon.to_bytes(),
        &entry.block.previous_beacon,
    )
}

/// The store as the API's archive of older beacons, blocks and transactions.
pub(super) struct StoreArchive<S> {
    store: std::sync::Weak<Store>,
    scheme: std::marker::PhantomData<fn() -> S>,
}

impl<S> StoreArchive<S> {
    /// The archive of `store`, held weakly.
    pub(super) fn new(store: &Arc<Store>) -> Self {
        StoreArchive {
            store: Arc::downgrade(store),
            scheme: std::marker::PhantomData,
        }
    }
}

impl<S: Scheme> crate::http::ChainArchive for StoreArchive<S> {
    fn block(&self, height: u64) -> Option<BlockJson> {
        let entry = self.store.upgrade()?.get::<S>(height).ok().flatten()?;
        Some(block_json(&entry))
    }

    fn beacon(&self, round: u64) -> Option<Beacon> {
        let entry = self.store.upgrade()?.get::<S>(round).ok().flatten()?;
        Some(beacon_of(&entry))
    }

    fn transaction(&self, id: &[u8; 32]) -> Option<u64> {
        self.store.upgrade()?.transaction_height(id).ok().flatten()
    }
}
