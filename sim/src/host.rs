//! The one host a local network runs on (`[network] host_cores`): its cores,
//! which every node's inputs and its store thread's writes wait for; its
//! disk, which every durable write holds in turn; and, where the links are
//! `localnet`'s userspace WAN emulator (`[network] relays_on_host`), the
//! emulator's relay thread, whose work on each message takes a core too.

use crate::network::broadcast_receivers;
use beacon::effect::Effect;
use beacon::{Scheme, Time};
use consensus::MemberOutput;

/// When each of the host's cores, its disk and its relay thread are next free.
pub(crate) struct Host {
    cores: Vec<Time>,
    /// When the shared disk is next free.
    pub(crate) disk: Time,
    relay: Option<Relay>,
}

/// The WAN emulator's one thread: its CPU per message, split between reading
/// the message from its sender and writing it to its receiver.
struct Relay {
    read_us: u64,
    write_us: u64,
    free: Time,
}

impl Host {
    /// A host of `cores` cores; `relay_us`: the emulator's CPU per message
    /// carried, if the links are its relays.
    pub(crate) fn new(cores: u32, relay_us: Option<u64>) -> Self {
        Host {
            cores: vec![Time::ZERO; cores as usize],
            disk: Time::ZERO,
            relay: relay_us.map(|us| Relay {
                read_us: us / 2,
                write_us: us - us / 2,
                free: Time::ZERO,
            }),
        }
    }

    /// The core free first, and when.
    pub(crate) fn earliest(&self) -> (usize, Time) {
        self.cores
            .iter()
            .enumerate()
            .min_by_key(|(i, t)| (**t, *i))
            .map(|(i, t)| (i, *t))
            .unwrap_or((0, Time::ZERO))
    }

    /// A store thread's durable write, ready at `at`: `cpu` microseconds on
    /// the first free core, then `disk` on the shared disk.
    pub(crate) fn store_write(&mut self, at: Time, (cpu, disk): (u64, u64)) {
        let written = if cpu > 0 { self.on_a_core(at, cpu) } else { at };
        durable_write(Some(&mut self.disk), written, disk);
    }

    /// `us` of work ready at `at` on the first free core, which it holds.
    /// Returns when it is done.
    fn on_a_core(&mut self, at: Time, us: u64) -> Time {
        let (core, free) = self.earliest();
        let done = at.max(free).plus_micros(us);
        self.occupy(core, done);
        done
    }

    /// Core `core` is busy until `until`.
    pub(crate) fn occupy(&mut self, core: usize, until: Time) {
        if let Some(c) = self.cores.get_mut(core) {
            *c = until;
        }
    }

    /// Whether the links are the emulator's relays.
    pub(crate) fn relays(&self) -> bool {
        self.relay.is_some()
    }

    /// When the relay has read a message its sender wrote at `at` (on its
    /// thread and the first free core): the link's latency starts then.
    /// `at` itself without relays.
    pub(crate) fn relay_read(&mut self, at: Time) -> Time {
        match self.relay.as_ref().map(|r| r.read_us) {
            Some(us) => self.relay_work(at, us),
            None => at,
        }
    }

    /// The relays read the messages among `outputs[first..]` (what node `me`
    /// of `parties` sent, at the time each entry gives), one after the other
    /// on their thread: each copy leaves when it has been read, a broadcast
    /// as one send per receiver. What a node sends itself crosses no relay;
    /// nothing changes without relays.
    pub(crate) fn relay_reads<S: Scheme>(
        &mut self,
        outputs: &mut Vec<(Time, MemberOutput<S>)>,
        first: usize,
        me: u32,
        parties: u32,
    ) {
        if !self.relays() {
            return;
        }
        let sent: Vec<_> = outputs.drain(first..).collect();
        for (at, output) in sent {
            let (to, message) = match output {
                MemberOutput::Effect(Effect::Send { to, message }) if to.0 != me => {
                    (vec![to], message)
                }
                MemberOutput::Effect(Effect::Broadcast(message)) => {
                    (broadcast_receivers(me, parties).collect(), message)
                }
                other => {
                    outputs.push((at, other));
                    continue;
                }
            };
            for to in to {
                let message = message.clone();
                let send = MemberOutput::Effect(Effect::Send { to, message });
                outputs.push((self.relay_read(at), send));
            }
        }
    }

    /// When a message that reached the relay's side of its link at `at` has
    /// been written to its receiver: `at` itself without relays.
    pub(crate) fn relay_write(&mut self, at: Time) -> Time {
        match self.relay.as_ref().map(|r| r.write_us) {
            Some(us) => self.relay_work(at, us),
            None => at,
        }
    }

    /// `us` of the relay thread's work, ready at `at`: it waits for the thread
    /// and a core, and holds both. Returns when it is done.
    fn relay_work(&mut self, at: Time, us: u64) -> Time {
        let Some(ready) = self.relay.as_ref().map(|r| at.max(r.free)) else {
            return at;
        };
        let done = self.on_a_core(ready, us);
        if let Some(relay) = self.relay.as_mut() {
            relay.free = done;
        }
        done
    }
}

/// One durable write of `us` microseconds, ready at `at`: on the host's shared
/// `disk` when modelled (it waits for the disk and holds it), else on a disk
/// of the node's own. Returns when it is done.
pub(crate) fn durable_write(disk: Option<&mut Time>, at: Time, us: u64) -> Time {
    match disk {
        Some(free) => {
            *free = at.max(*free).plus_micros(us);
            *free
        }
        None => at.plus_micros(us),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_relay_thread_takes_a_core_and_runs_one_message_at_a_time() {
        let mut host = Host::new(2, Some(100));
        // Two messages written at once: the one thread writes them in turn.
        assert_eq!(host.relay_write(Time(1_000)), Time(1_050));
        assert_eq!(host.relay_write(Time(1_000)), Time(1_100));
        // Each write held a core: both are busy until then.
        assert_eq!(host.earliest().1, Time(1_050));
        host.occupy(0, Time(5_000));
        host.occupy(1, Time(5_000));
        // Reads of a broadcast wait for a free core, and for each other.
        let reads: Vec<Time> = (0..3).map(|_| host.relay_read(Time(2_000))).collect();
        assert_eq!(reads, vec![Time(5_050), Time(5_100), Time(5_150)]);
        assert_eq!(host.earliest().1, Time(5_100));
        assert_eq!(host.relay_write(Time(2_000)), Time(5_000 + 3 * 50 + 50));
        // Without relays, a message is at its receiver when it arrives.
        let mut plain = Host::new(2, None);
        assert!(!plain.relays() && host.relays());
        assert_eq!(plain.relay_read(Time(3)), Time(3));
        assert_eq!(plain.relay_write(Time(7)), Time(7));
        assert_eq!(plain.earliest(), (0, Time::ZERO));
    }

    #[test]
    fn a_store_threads_write_takes_a_core_then_the_disk() {
        let mut host = Host::new(1, None);
        host.occupy(0, Time(1_000));
        host.store_write(Time(500), (100, 300));
        assert_eq!((host.earliest().1, host.disk), (Time(1_100), Time(1_400)));
        // A write with no CPU part waits for no core.
        host.store_write(Time(600), (0, 300));
        assert_eq!((host.earliest().1, host.disk), (Time(1_100), Time(1_700)));
    }

    #[test]
    fn the_relays_read_a_broadcast_one_copy_after_the_other() {
        use beacon::{MinSig, NodeIndex};
        use consensus::{Envelope, Height, Message};
        let message = Envelope::<MinSig>::Consensus(Message::SyncRequest {
            from_height: Height::new(1),
        });
        let fresh = || {
            let changed = consensus::Event::ViewChanged {
                height: Height::new(1),
                view: consensus::View::ZERO,
            };
            vec![
                (Time(7), MemberOutput::Event(changed)),
                (
                    Time(10),
                    MemberOutput::Effect(Effect::Broadcast(message.clone())),
                ),
            ]
        };
        let mut outputs = fresh();
        Host::new(4, Some(100)).relay_reads(&mut outputs, 1, 1, 4);
        let sent: Vec<(Time, u32)> = outputs[1..]
            .iter()
            .map(|(at, o)| match o {
                MemberOutput::Effect(Effect::Send { to, .. }) => (*at, to.0),
                _ => panic!("a broadcast becomes sends"),
            })
            .collect();
        assert_eq!(sent, vec![(Time(60), 0), (Time(110), 2), (Time(160), 3)]);
        assert!(matches!(outputs[0], (Time(7), MemberOutput::Event(_))));
        // What a node sends itself crosses no relay.
        let to_self = Effect::Send {
            to: NodeIndex(1),
            message: message.clone(),
        };
        let mut outputs = vec![(Time(10), MemberOutput::Effect(to_self))];
        Host::new(4, Some(100)).relay_reads(&mut outputs, 0, 1, 4);
        assert!(matches!(outputs[0].0, Time(10)));
        // Without relays the outputs stay as they are.
        let mut outputs = fresh();
        Host::new(4, None).relay_reads(&mut outputs, 0, 1, 4);
        assert!(matches!(
            outputs[1].1,
            MemberOutput::Effect(Effect::Broadcast(_))
        ));
    }
}
