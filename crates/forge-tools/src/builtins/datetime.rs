//! `datetime_now`: the current date and time, in UTC or at a fixed UTC offset.
//!
//! Formatting is done here from `SystemTime` (days-to-civil conversion), so the crate needs no
//! calendar dependency. IANA zone names (`Europe/Paris`) are not supported: pass an offset such as
//! `+01:00` instead; the error says so.

use std::time::{SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use serde_json::{json, Value};

use crate::tool::{Tool, ToolContext, ToolError, ToolOutput};

/// The `datetime_now` tool.
#[derive(Debug, Default, Clone, Copy)]
pub struct DatetimeNow;

#[async_trait]
impl Tool for DatetimeNow {
    fn name(&self) -> &str {
        "datetime_now"
    }

    fn description(&self) -> &str {
        "The current date and time (RFC 3339), with weekday and Unix timestamp. Optional \
         `utc_offset` such as \"+02:00\" or \"-05:30\"; default UTC."
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "utc_offset": {
                    "type": "string",
                    "description": "\"Z\"/\"UTC\" (default) or an offset like \"+02:00\", \"-0530\""
                }
            },
            "additionalProperties": false
        })
    }

    async fn execute(&self, _ctx: &ToolContext, input: Value) -> Result<ToolOutput, ToolError> {
        let offset = match input.get("utc_offset") {
            None | Some(Value::Null) => 0,
            Some(Value::String(s)) => parse_offset(s).map_err(ToolError::InvalidInput)?,
            Some(_) => {
                return Err(ToolError::InvalidInput(
                    "`utc_offset` must be a string".into(),
                ))
            }
        };
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_err(|_| ToolError::Failed("the system clock is before 1970".into()))?;
        Ok(ToolOutput::json(describe(
            now.as_secs() as i64,
            now.subsec_millis(),
            offset,
        )))
    }
}

/// Parse `Z`, `UTC`, `+HH:MM`, `+HHMM` or `+HH` into seconds east of UTC.
pub fn parse_offset(s: &str) -> Result<i64, String> {
    let t = s.trim();
    if t.eq_ignore_ascii_case("z") || t.eq_ignore_ascii_case("utc") || t.eq_ignore_ascii_case("gmt")
    {
        return Ok(0);
    }
    let bad = || {
        format!(
            "`utc_offset` {s:?} is not an offset; use \"UTC\" or \"+HH:MM\" / \"-HH:MM\" \
             (zone names like Europe/Paris are not supported)"
        )
    };
    let (sign, rest) = match t.as_bytes().first() {
        Some(b'+') => (1, &t[1..]),
        Some(b'-') => (-1, &t[1..]),
        _ => return Err(bad()),
    };
    let digits: String = rest.chars().filter(|c| *c != ':').collect();
    if !digits.chars().all(|c| c.is_ascii_digit()) || !(digits.len() == 2 || digits.len() == 4) {
        return Err(bad());
    }
    let h: i64 = digits[..2].parse().map_err(|_| bad())?;
    let m: i64 = if digits.len() == 4 {
        digits[2..].parse().map_err(|_| bad())?
    } else {
        0
    };
    if h > 14 || m > 59 {
        return Err(bad());
    }
    Ok(sign * (h * 3600 + m * 60))
}

/// The JSON result for Unix time `secs` (+`millis`) shown at `offset` seconds east of UTC.
pub fn describe(secs: i64, millis: u32, offset: i64) -> Value {
    let local = secs + offset;
    let days = local.div_euclid(86_400);
    let sod = local.rem_euclid(86_400);
    let (y, mo, d) = forge_time::civil_from_days(days);
    let (hh, mm, ss) = (sod / 3600, (sod % 3600) / 60, sod % 60);
    let off = if offset == 0 {
        "Z".to_string()
    } else {
        let a = offset.abs();
        format!(
            "{}{:02}:{:02}",
            if offset < 0 { '-' } else { '+' },
            a / 3600,
            (a % 3600) / 60
        )
    };
    const WEEKDAYS: [&str; 7] = [
        "Thursday",
        "Friday",
        "Saturday",
        "Sunday",
        "Monday",
        "Tuesday",
        "Wednesday",
    ];
    let weekday = WEEKDAYS[days.rem_euclid(7) as usize];
    json!({
        "datetime": format!("{y:04}-{mo:02}-{d:02}T{hh:02}:{mm:02}:{ss:02}.{millis:03}{off}"),
        "date": format!("{y:04}-{mo:02}-{d:02}"),
        "time": format!("{hh:02}:{mm:02}:{ss:02}"),
        "weekday": weekday,
        "utc_offset": off,
        "unix": secs,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_instants() {
        // 2000-02-29T12:34:56Z was a Tuesday (a leap day in a century leap year).
        let v = describe(951_827_696, 0, 0);
        assert_eq!(v["datetime"], "2000-02-29T12:34:56.000Z");
        assert_eq!(v["weekday"], "Tuesday");
        // The epoch, and one second before it.
        assert_eq!(describe(0, 0, 0)["datetime"], "1970-01-01T00:00:00.000Z");
        assert_eq!(describe(-1, 0, 0)["datetime"], "1969-12-31T23:59:59.000Z");
        // Offsets move the wall clock, not the instant.
        let v = describe(951_827_696, 5, -(5 * 3600 + 30 * 60));
        assert_eq!(v["datetime"], "2000-02-29T07:04:56.005-05:30");
        assert_eq!(v["unix"], 951_827_696);
    }

    #[test]
    fn offsets() {
        assert_eq!(parse_offset("UTC"), Ok(0));
        assert_eq!(parse_offset("+02:00"), Ok(7200));
        assert_eq!(parse_offset("-0530"), Ok(-19_800));
        assert_eq!(parse_offset("+09"), Ok(32_400));
        assert!(parse_offset("Europe/Paris")
            .unwrap_err()
            .contains("not supported"));
        assert!(parse_offset("+25:00").is_err());
        assert!(parse_offset("+1:00").is_err());
    }
}
