//! [`Height`] and [`View`]: the two counters that place a message in the protocol;
//! [`Epoch`], the counter of member sets; and [`DirectoryIndex`], a party's
//! place in the member directory.
//!
//! Both arrive from the network, so either can be `u64::MAX` (one VIEW-CHANGE for
//! view `u64::MAX` once made every receiver panic on `view + 1`). The types offer
//! checked arithmetic only: [`next`](Height::next) and
//! [`checked_add`](Height::checked_add) return `None` at the top,
//! [`saturating_sub`](Height::saturating_sub) stops at zero, and there is no `+` or
//! `-` that could wrap or panic. A `u64` becomes a height or a view only through
//! [`Height::new`] / [`View::new`] (no `From<u64>`: a bare `.into()` would hide
//! which counter a number turns into), and leaves through `get()` where it meets
//! the beacon crate's rounds, timers' arithmetic, or a store's `u64` keys.
//!
//! All are `#[serde(transparent)]`: a height, view or epoch encodes exactly as
//! the `u64` it holds, and a directory index as its `u32`, on the wire, in
//! stored chains and in JSON.
//!
//! A [`DirectoryIndex`] is not a [`beacon::NodeIndex`]: the directory lists
//! every party the transport reaches (the genesis members first, then parties
//! that may join), while a `NodeIndex` is a member's place in one epoch's
//! committee (`0..n`); [`crate::epoch::EpochView`] translates.

use beacon::NodeIndex;
use serde::{Deserialize, Serialize};
use std::fmt;

macro_rules! counter {
    ($(#[$doc:meta])* $name:ident, $what:literal) => {
        $(#[$doc])*
        #[derive(
            Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
        )]
        #[serde(transparent)]
        pub struct $name(u64);

        impl $name {
            #[doc = concat!("The ", $what, " 0.")]
            pub const ZERO: Self = Self(0);
            #[doc = concat!("The largest ", $what, " (`u64::MAX`); it has no next.")]
            pub const MAX: Self = Self(u64::MAX);

            #[doc = concat!("The ", $what, " numbered `value`.")]
            pub const fn new(value: u64) -> Self {
                Self(value)
            }

            #[doc = concat!("The number of this ", $what, ".")]
            pub const fn get(self) -> u64 {
                self.0
            }

            #[doc = concat!("The ", $what, " after this one; `None` after [`Self::MAX`].")]
            #[must_use]
            pub const fn next(self) -> Option<Self> {
                self.checked_add(1)
            }

            #[doc = concat!("The ", $what, " `by` after this one; `None` past [`Self::MAX`].")]
            #[must_use]
            pub const fn checked_add(self, by: u64) -> Option<Self> {
                match self.0.checked_add(by) {
                    Some(value) => Some(Self(value)),
                    None => None,
                }
            }

            #[doc = concat!("The ", $what, " `by` after this one, or [`Self::MAX`].")]
            #[must_use]
            pub const fn saturating_add(self, by: u64) -> Self {
                Self(self.0.saturating_add(by))
            }

            #[doc = concat!("The ", $what, " `by` before this one; `None` below 0.")]
            #[must_use]
            pub const fn checked_sub(self, by: u64) -> Option<Self> {
                match self.0.checked_sub(by) {
                    Some(value) => Some(Self(value)),
                    None => None,
                }
            }

            #[doc = concat!("The ", $what, " `by` before this one, or 0.")]
            #[must_use]
            pub const fn saturating_sub(self, by: u64) -> Self {
                Self(self.0.saturating_sub(by))
            }

            #[doc = concat!("How many ", $what, "s `earlier` lies before this one; 0 if it does not.")]
            #[must_use]
            pub const fn saturating_since(self, earlier: Self) -> u64 {
                self.0.saturating_sub(earlier.0)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(&self.0, f)
            }
        }
    };
}

counter!(
    /// A height of the chain (= the beacon round decided with it; the first block
    /// is at height 1).
    Height,
    "height"
);

counter!(
    /// A view within a height (view 0 first; a view change moves to a later one).
    View,
    "view"
);

counter!(
    /// An epoch: one member set and its keys (epoch 0 for the genesis members;
    /// each change of members starts the next).
    Epoch,
    "epoch"
);

/// A party's index in the member directory ([`crate::epoch::Directory`]): the
/// member keys of every party the transport reaches, the genesis members
/// first. Drivers address members by it; it stays the same across epochs.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct DirectoryIndex(u32);

impl DirectoryIndex {
    /// The party at index `value`.
    pub const fn new(value: u32) -> Self {
        Self(value)
    }

    /// The index as a number.
    pub const fn get(self) -> u32 {
        self.0
    }

    /// The index as a `usize`, to index a list of the directory's parties.
    pub const fn as_usize(self) -> usize {
        self.0 as usize
    }

    /// The party's address for its driver: a [`crate::Member`]'s effects
    /// (`Effect::Send`'s `to`) and inputs (`MemberInput::Message`'s `from`)
    /// name parties by directory index in a `NodeIndex`.
    pub const fn address(self) -> NodeIndex {
        NodeIndex(self.0)
    }

    /// The party a driver's `address` names ([`DirectoryIndex::address`]).
    pub const fn of_address(address: NodeIndex) -> Self {
        Self(address.0)
    }
}

impl fmt::Display for DirectoryIndex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_of_max_is_none() {
        assert_eq!(Height::MAX.next(), None);
        assert_eq!(View::MAX.next(), None);
        assert_eq!(Height::new(41).next(), Some(Height::new(42)));
        assert_eq!(View::ZERO.next(), Some(View::new(1)));
    }

    #[test]
    fn arithmetic_is_checked_or_saturating() {
        assert_eq!(View::new(u64::MAX - 2).checked_add(2), Some(View::MAX));
        assert_eq!(View::new(u64::MAX - 2).checked_add(3), None);
        assert_eq!(View::MAX.saturating_add(1), View::MAX);
        assert_eq!(Height::new(3).checked_sub(3), Some(Height::ZERO));
        assert_eq!(Height::new(3).checked_sub(4), None);
        assert_eq!(Height::new(3).saturating_sub(10), Height::ZERO);
        assert_eq!(Height::new(10).saturating_since(Height::new(4)), 6);
        assert_eq!(Height::new(4).saturating_since(Height::new(10)), 0);
    }

    #[test]
    fn display_is_the_number() {
        assert_eq!(Epoch::new(3).to_string(), "3");
        assert_eq!(DirectoryIndex::new(5).to_string(), "5");
        assert_eq!(Height::new(7).to_string(), "7");
        assert_eq!(format!("{:>4}", View::new(12)), "  12");
    }

    #[test]
    fn wire_bytes_equal_the_u64() {
        for value in [0, 1, 2, 255, 256, 1 << 40, u64::MAX - 1, u64::MAX] {
            let bytes = beacon::wire::encode(&value).unwrap();
            assert_eq!(beacon::wire::encode(&Height::new(value)).unwrap(), bytes);
            assert_eq!(beacon::wire::encode(&View::new(value)).unwrap(), bytes);
            assert_eq!(
                beacon::wire::decode::<Height>(&bytes).unwrap(),
                Height::new(value)
            );
            assert_eq!(
                beacon::wire::decode::<View>(&bytes).unwrap(),
                View::new(value)
            );
        }
        // Inside a tuple too (messages hold them next to other fields).
        let pair = (Height::new(5), View::new(u64::MAX));
        assert_eq!(
            beacon::wire::encode(&pair).unwrap(),
            beacon::wire::encode(&(5u64, u64::MAX)).unwrap()
        );
    }
    #[test]
    fn epochs_and_directory_indices_encode_as_their_numbers() {
        for value in [0, 1, 255, 256, 1 << 40, u64::MAX] {
            let bytes = beacon::wire::encode(&value).unwrap();
            assert_eq!(beacon::wire::encode(&Epoch::new(value)).unwrap(), bytes);
            assert_eq!(
                beacon::wire::decode::<Epoch>(&bytes).unwrap(),
                Epoch::new(value)
            );
            assert_eq!(
                serde_json::to_string(&Epoch::new(value)).unwrap(),
                value.to_string()
            );
        }
        for value in [0, 1, 255, 256, u32::MAX] {
            let bytes = beacon::wire::encode(&value).unwrap();
            let index = DirectoryIndex::new(value);
            assert_eq!(beacon::wire::encode(&index).unwrap(), bytes);
            assert_eq!(
                beacon::wire::decode::<DirectoryIndex>(&bytes).unwrap(),
                index
            );
            assert_eq!(serde_json::to_string(&index).unwrap(), value.to_string());
        }
        assert_eq!(Epoch::MAX.next(), None);
        assert_eq!(Epoch::ZERO.next(), Some(Epoch::new(1)));
    }
}
