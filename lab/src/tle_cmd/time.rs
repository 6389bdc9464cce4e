//! Time for `tle`: now, durations as drand's `tle` reads them (calendar
//! months and years included), the round due at a time, and UTC dates.

use anyhow::{anyhow, bail, Context, Result};
use beacon::ChainInfo;

/// Unix time now, in whole seconds rounded up (a round due at or after
/// `now_ceil() + d` is due at or after the real now + d).
pub(super) fn now_ceil() -> Result<i64> {
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .context("the system clock is before 1970")?;
    let s = i64::try_from(d.as_secs()).context("the system clock is past year 292e9")?;
    Ok(s + i64::from(d.subsec_nanos() > 0))
}

/// Days since 1970-01-01 of the proleptic Gregorian date `y-m-d`; `d` may
/// exceed the month's length (it is added as days, as Go's `AddDate` does).
pub(super) fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The date `(y, m, d)` of day `z` since 1970-01-01.
pub(super) fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// `unix` as `YYYY-MM-DD HH:MM:SS UTC`.
pub(super) fn fmt_utc(unix: i64) -> String {
    let (y, m, d) = civil_from_days(unix.div_euclid(86_400));
    let s = unix.rem_euclid(86_400);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02} UTC",
        s / 3600,
        s / 60 % 60,
        s % 60
    )
}

/// `in N s` or `N s ago` (with days/hours/minutes past two minutes).
pub(super) fn fmt_from_now(t: i64, now: i64) -> String {
    let delta = t.saturating_sub(now);
    let secs = delta.unsigned_abs();
    let human = if secs >= 120 {
        let (d, h, m, s) = (secs / 86_400, secs / 3600 % 24, secs / 60 % 60, secs % 60);
        let mut parts = Vec::new();
        if d > 0 {
            parts.push(format!("{d}d"));
        }
        if d > 0 || h > 0 {
            parts.push(format!("{h}h"));
        }
        parts.push(format!("{m}m{s}s"));
        format!(" = {}", parts.join(""))
    } else {
        String::new()
    };
    if delta >= 0 {
        format!("in {secs} s{human}")
    } else {
        format!("{secs} s{human} ago")
    }
}

/// `unix` plus `months` calendar months in UTC, normalized as Go's `AddDate`
/// (Jan 31 + 1 month = Mar 3 or 2).
pub(super) fn add_months(unix: i64, months: i64) -> Option<i64> {
    let (y, m, d) = civil_from_days(unix.div_euclid(86_400));
    let total = (y.checked_mul(12)?)
        .checked_add(m - 1)?
        .checked_add(months)?;
    let (y2, m2) = (total.div_euclid(12), total.rem_euclid(12) + 1);
    if y2.unsigned_abs() > 1_000_000_000 {
        return None;
    }
    days_from_civil(y2, m2, d)
        .checked_mul(86_400)?
        .checked_add(unix.rem_euclid(86_400))
}

/// Seconds from `start` (Unix time) to `start + duration`, with drand `tle`'s
/// duration syntax: one or more `<number><unit>`, units `s m h d w M y`, each
/// at most once (`M` and `y` are calendar months and years from `start`, UTC).
pub(crate) fn parse_duration(input: &str, start: i64) -> Result<u64> {
    const UNITS: &str = "smhdwMy";
    let malformed = || {
        anyhow!(
            "malformed duration {input:?}: expected a number and a unit, or several \
             (units s, m, h, d, w, M = months, y = years; e.g. 30s, 5m, 2h, 1d12h)"
        )
    };
    let mut seen = String::new();
    let mut total: i64 = 0;
    let mut rest = input;
    if rest.is_empty() {
        return Err(malformed());
    }
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        let unit = rest[digits..].chars().next().ok_or_else(malformed)?;
        if digits == 0 || !UNITS.contains(unit) {
            return Err(malformed());
        }
        if seen.contains(unit) {
            bail!("malformed duration {input:?}: unit {unit:?} appears twice");
        }
        seen.push(unit);
        let too_large = || anyhow!("duration {input:?} is too large");
        let n: i64 = rest[..digits].parse().map_err(|_| too_large())?;
        let secs = match unit {
            's' => Some(n),
            'm' => n.checked_mul(60),
            'h' => n.checked_mul(3600),
            'd' => n.checked_mul(86_400),
            'w' => n.checked_mul(7 * 86_400),
            'M' => add_months(start, n).and_then(|t| t.checked_sub(start)),
            'y' => n
                .checked_mul(12)
                .and_then(|months| add_months(start, months))
                .and_then(|t| t.checked_sub(start)),
            _ => unreachable!("checked against UNITS"),
        };
        total = secs
            .and_then(|s| total.checked_add(s))
            .ok_or_else(too_large)?;
        rest = &rest[digits + unit.len_utf8()..];
    }
    if total <= 0 {
        bail!("duration {input:?} is zero: give a time in the future");
    }
    u64::try_from(total).map_err(|_| anyhow!("duration {input:?} is too large"))
}

/// The first round of `info` due at or after Unix time `t`.
pub(super) fn round_at_or_after(info: &ChainInfo, t: i64) -> Result<u64> {
    if info.period == 0 {
        bail!(
            "chain {} has period 0 (back-to-back rounds): its rounds have no due time, \
             so it cannot be used for timelock encryption",
            hex::encode(info.hash())
        );
    }
    info.schedule()
        .round_at_or_after(i128::from(t))
        .context("round out of range (u64)")
}
