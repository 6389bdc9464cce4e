//! Why a run of the phase machine (genesis DKG or resharing) ends without a
//! result.

use crate::Error;

/// Why a phase machine failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DkgFailure {
    /// Fewer dealers qualified than the output needs.
    #[error("only {qualified} qualified dealers, need {need}")]
    TooFewDealers {
        /// Dealers left after complaints.
        qualified: u32,
        /// How many the output needs.
        need: u32,
    },
    /// A qualified dealer's share to this member is missing.
    #[error("a qualified dealer's share is missing")]
    MissingShare,
    /// This member's share does not match the group polynomial of one
    /// threshold.
    #[error("threshold {threshold}: own share does not match the group polynomial")]
    ShareMismatch {
        /// The threshold.
        threshold: u32,
    },
    /// The combined polynomial of a resharing lost the group key.
    #[error("the combined polynomial does not keep the group key")]
    GroupKeyChanged,
    /// The interpolation of the qualified dealers' sub-shares failed.
    #[error("interpolation: {0}")]
    Interpolation(Error),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_read_as_before() {
        let few = DkgFailure::TooFewDealers {
            qualified: 2,
            need: 3,
        };
        assert_eq!(few.to_string(), "only 2 qualified dealers, need 3");
        assert_eq!(
            DkgFailure::ShareMismatch { threshold: 5 }.to_string(),
            "threshold 5: own share does not match the group polynomial"
        );
    }
}
