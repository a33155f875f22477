//! forge.yaml `tools[].config`: the configuration of a builtin tool, parsed here so forge.yaml is
//! read in one crate. Today only `cli_execute` takes one ([`parse_cli_tool_config`]); its
//! `timeout` uses the one duration grammar ([`crate::parse_duration`]) through
//! [`parse_duration_value`].

use std::time::Duration;

use serde_json::Value;

use crate::duration::parse_duration;

/// forge.yaml `tools[{name: cli_execute, config}]`; keys left out are `None`/empty (the tool's
/// defaults apply).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CliToolConfig {
    /// `allowed_binaries`: the programs the agent may run.
    pub allowed_binaries: Vec<String>,
    /// `env_passthrough`: environment variables handed to them.
    pub env_passthrough: Vec<String>,
    /// `timeout` per command.
    pub timeout: Option<Duration>,
    /// `max_output_bytes` kept per stream.
    pub max_output_bytes: Option<usize>,
}

/// Parse forge.yaml `tools[{name: cli_execute, config}]` (a list of strings may also be one
/// comma-separated string).
pub fn parse_cli_tool_config(v: &Value) -> Result<CliToolConfig, String> {
    let mut cfg = CliToolConfig::default();
    let obj = match v {
        Value::Null => return Ok(cfg),
        Value::Object(m) => m,
        _ => return Err("config must be a mapping with allowed_binaries, env_passthrough, timeout, max_output_bytes".into()),
    };
    let strings = |key: &str, v: &Value| -> Result<Vec<String>, String> {
        match v {
            Value::Null => Ok(Vec::new()),
            Value::Array(items) => items
                .iter()
                .map(|i| {
                    i.as_str()
                        .map(str::to_string)
                        .ok_or_else(|| format!("config.{key} must be a list of strings"))
                })
                .collect(),
            Value::String(s) => Ok(s
                .split(',')
                .map(|p| p.trim().to_string())
                .filter(|p| !p.is_empty())
                .collect()),
            _ => Err(format!("config.{key} must be a list of strings")),
        }
    };
    for (k, val) in obj {
        match k.as_str() {
            "allowed_binaries" => cfg.allowed_binaries = strings(k, val)?,
            "env_passthrough" => cfg.env_passthrough = strings(k, val)?,
            "timeout" => cfg.timeout = Some(parse_duration_value(val).map_err(|e| format!("config.timeout: {e}"))?),
            "max_output_bytes" => {
                cfg.max_output_bytes = Some(val
                    .as_u64()
                    .filter(|n| *n > 0)
                    .map(|n| n as usize)
                    .ok_or_else(|| "config.max_output_bytes must be a positive integer".to_string())?)
            }
            other => {
                return Err(format!(
                    "unknown key config.{other} (known: allowed_binaries, env_passthrough, timeout, max_output_bytes)"
                ))
            }
        }
    }
    Ok(cfg)
}

/// A positive duration in a tool's config: a number of seconds (`30`, `1.5`, also as a string,
/// `"30"`), or a duration in the one grammar (`"30s"`, `"2m"`, `"500ms"`, `"1m30s"`).
pub fn parse_duration_value(v: &Value) -> Result<Duration, String> {
    let bad = || "use seconds (30) or a duration like \"30s\", \"2m\", \"500ms\"".to_string();
    let secs = match v {
        Value::Number(n) => n.as_f64().ok_or_else(bad)?,
        Value::String(s) => {
            let s = s.trim();
            match s.parse::<f64>() {
                // A bare number is seconds here (the text grammar asks for a unit).
                Ok(f) => f,
                Err(_) => parse_duration(s).map_err(|_| bad())?.as_secs_f64(),
            }
        }
        _ => return Err(bad()),
    };
    if !(secs > 0.0 && secs.is_finite()) {
        return Err(bad());
    }
    Ok(Duration::from_secs_f64(secs))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn config_durations_keep_every_spelling_they_accepted() {
        let ok = |v: Value, d: Duration| assert_eq!(parse_duration_value(&v), Ok(d), "{v}");
        ok(json!(30), Duration::from_secs(30));
        ok(json!(1.5), Duration::from_millis(1500));
        ok(json!("30"), Duration::from_secs(30));
        ok(json!(" 30s "), Duration::from_secs(30));
        ok(json!("2m"), Duration::from_secs(120));
        ok(json!("500ms"), Duration::from_millis(500));
        ok(json!("1h"), Duration::from_secs(3600));
        ok(json!("+5s"), Duration::from_secs(5));
        ok(json!("5 s"), Duration::from_secs(5));
        ok(json!("1e3"), Duration::from_secs(1000));
        // New with the one grammar: compound durations.
        ok(json!("1m30s"), Duration::from_secs(90));
        for bad in [
            json!(-1),
            json!(0),
            json!("0"),
            json!("0s"),
            json!("-5s"),
            json!("soon"),
            json!("inf"),
            json!(""),
            json!(true),
        ] {
            assert!(parse_duration_value(&bad).is_err(), "{bad}");
        }
    }
}
