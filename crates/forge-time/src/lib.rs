//! forge-time: UTC civil dates and RFC 3339 timestamps, the one copy forge's crates share (the
//! audit report, the build's declared timestamps, the audit log and task times, the `datetime`
//! tool). No dependencies: these crates have no other forge crate in common, and the few lines
//! below are all they need of a date library.
//!
//! - [`civil_from_days`]: a day number since 1970-01-01 to (year, month, day).
//! - [`rfc3339`], [`rfc3339_millis`]: seconds since the epoch as `YYYY-MM-DDTHH:MM:SSZ` or
//!   `YYYY-MM-DDTHH:MM:SS.mmmZ` (UTC; instants before 1970 too).
//! - [`now_rfc3339`], [`now_rfc3339_millis`]: the current time in those forms.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Day number `z` since 1970-01-01 (negative before it) to (year, month 1-12, day 1-31), in the
/// proleptic Gregorian calendar (Howard Hinnant's `civil_from_days`).
pub fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// The date and time of day (hours, minutes, seconds) of `secs` since the epoch, UTC.
fn civil(secs: i64) -> ((i64, u32, u32), (i64, i64, i64)) {
    let rem = secs.rem_euclid(86_400);
    (
        civil_from_days(secs.div_euclid(86_400)),
        (rem / 3600, (rem % 3600) / 60, rem % 60),
    )
}

/// `secs` since the epoch as RFC 3339 UTC text to the second: `2023-11-14T22:13:20Z`.
pub fn rfc3339(secs: i64) -> String {
    let ((y, m, d), (hh, mm, ss)) = civil(secs);
    format!("{y:04}-{m:02}-{d:02}T{hh:02}:{mm:02}:{ss:02}Z")
}

/// `secs` (+ `millis`) since the epoch as RFC 3339 UTC text with milliseconds:
/// `2026-11-21T17:45:07.123Z`.
pub fn rfc3339_millis(secs: i64, millis: u32) -> String {
    let ((y, m, d), (hh, mm, ss)) = civil(secs);
    format!("{y:04}-{m:02}-{d:02}T{hh:02}:{mm:02}:{ss:02}.{millis:03}Z")
}

/// Time since the epoch now (zero if the clock is set before 1970).
fn since_epoch() -> Duration {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
}

/// Now, as [`rfc3339`] text.
pub fn now_rfc3339() -> String {
    rfc3339(i64::try_from(since_epoch().as_secs()).unwrap_or(i64::MAX))
}

/// Now, as [`rfc3339_millis`] text.
pub fn now_rfc3339_millis() -> String {
    let d = since_epoch();
    rfc3339_millis(
        i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        d.subsec_millis(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_dates() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339(1_700_000_000), "2023-11-14T22:13:20Z");
        assert_eq!(rfc3339(-1), "1969-12-31T23:59:59Z");
    }

    #[test]
    fn rfc3339_known_instants() {
        assert_eq!(rfc3339_millis(0, 0), "1970-01-01T00:00:00.000Z");
        // 2000-02-29T12:34:56Z (a leap day)
        assert_eq!(rfc3339_millis(951_827_696, 7), "2000-02-29T12:34:56.007Z");
        assert_eq!(
            rfc3339_millis(1_795_283_107, 123),
            "2026-11-21T17:45:07.123Z"
        );
    }

    #[test]
    fn civil_dates_around_leap_days_and_the_epoch() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        assert_eq!(civil_from_days(11_017), (2000, 3, 1));
    }

    #[test]
    fn now_has_the_shape() {
        let s = now_rfc3339_millis();
        assert_eq!(s.len(), "2026-11-21T17:45:07.123Z".len(), "{s}");
        assert!(s.ends_with('Z'));
        assert_eq!(now_rfc3339().len(), "2023-11-14T22:13:20Z".len());
    }
}
