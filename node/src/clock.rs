//! The node's clocks: the wall clock as protocol time, and the CPU time of a
//! thread or of the process (what the node and the calibration measure).

use beacon::Time;

/// For tests only: the environment variable that offsets this node's wall
/// clock by a signed number of milliseconds (`chaos` skews a node's clock
/// with it). Never set it in production.
pub const TEST_CLOCK_OFFSET_ENV: &str = "SBFT_BEACON_TEST_CLOCK_OFFSET_MS";

/// The wall clock as protocol time: microseconds since the Unix epoch (moved
/// by [`TEST_CLOCK_OFFSET_ENV`] where a test set it).
pub fn now() -> Time {
    let micros = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64);
    Time(skewed(micros, test_offset_us()))
}

/// `micros` moved by `offset_us` (never below 0).
fn skewed(micros: u64, offset_us: i64) -> u64 {
    micros.saturating_add_signed(offset_us)
}

/// The test clock offset in microseconds, read once (0 when unset or not a
/// number).
fn test_offset_us() -> i64 {
    static OFFSET: std::sync::OnceLock<i64> = std::sync::OnceLock::new();
    *OFFSET.get_or_init(|| {
        std::env::var(TEST_CLOCK_OFFSET_ENV)
            .ok()
            .and_then(|v| v.trim().parse::<i64>().ok())
            .map_or(0, |ms| ms.saturating_mul(beacon::time::US_PER_MS as i64))
    })
}

/// CPU time of the calling thread, in nanoseconds.
pub fn thread_cpu_ns() -> u64 {
    cpu_clock(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// CPU time of the whole process, in nanoseconds.
pub fn process_cpu_ns() -> u64 {
    cpu_clock(libc::CLOCK_PROCESS_CPUTIME_ID)
}

fn cpu_clock(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; the clock ids are constants.
    let rc = unsafe { libc::clock_gettime(clock, &mut ts) };
    if rc != 0 {
        return 0;
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_test_offset_moves_the_clock_both_ways_and_never_below_zero() {
        assert_eq!(skewed(10_000_000, 2_500_000), 12_500_000);
        assert_eq!(skewed(10_000_000, -2_500_000), 7_500_000);
        assert_eq!(skewed(1_000, -2_000), 0);
    }
}
