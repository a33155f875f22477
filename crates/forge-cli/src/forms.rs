//! `forge forms learn | run | list`: the form skills (docs/forms.md) from the command line, on
//! the agent's browser, egress policy and state store, without a model.
//!
//! Exit codes: 0 success (every row done); 1 a batch ended with rows failed or uncertain, or
//! stopped; 2 the agent, the input or the store could not be used.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Subcommand, ValueEnum};
use forge_runtime::{BatchRequest, FormEnv, LearnRequest, RowResult, SchemaRef};
use serde_json::{json, Map, Value};
use tokio_util::sync::CancellationToken;

use crate::tool::AgentArgs;

#[derive(Subcommand)]
pub(crate) enum FormsCommand {
    /// Learn the form on a page (read-only) and keep its schema in the state store.
    Learn {
        /// The page with the form.
        url: String,
        /// Which form when the page has several: its id, name, CSS selector or 0-based index.
        #[arg(long)]
        form: Option<String>,
        /// The name to keep it under (default: the form's id or name, else the path's end).
        #[arg(long)]
        slug: Option<String>,
        /// A host the browser may reach (repeatable; default: the URL's host). Must be allowed
        /// by the agent's egress policy.
        #[arg(long = "host", value_name = "HOST")]
        hosts: Vec<String>,
        /// Also write the schema to this file.
        #[arg(long, value_name = "FILE.json")]
        out: Option<PathBuf>,
        #[command(flatten)]
        agent: AgentArgs,
    },
    /// Submit the rows of a CSV (a header row of field keys) or JSONL file through a learned form.
    Run {
        /// A learned form's slug, or a FormSchema JSON file.
        schema: String,
        /// The rows: FILE.csv or FILE.jsonl.
        rows: PathBuf,
        /// A host the browser may reach (repeatable; default: the form's host).
        #[arg(long = "host", value_name = "HOST")]
        hosts: Vec<String>,
        /// The batch id; run again with the same id to resume (rows done are skipped).
        #[arg(long)]
        batch_id: Option<String>,
        /// Rows at once, each in its own browser context (capped by browser.max_sessions).
        #[arg(long, default_value_t = 1)]
        concurrency: u64,
        /// Where to write the results (.json for JSON, else CSV; default
        /// form-results-BATCH.csv).
        #[arg(long, value_name = "FILE")]
        results: Option<PathBuf>,
        #[command(flatten)]
        agent: AgentArgs,
    },
    /// List the learned forms in the state store.
    List {
        /// Output format.
        #[arg(long, value_enum, default_value_t = ListFormat::Text)]
        format: ListFormat,
        #[command(flatten)]
        agent: AgentArgs,
    },
}

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
pub(crate) enum ListFormat {
    Text,
    Json,
}

pub(crate) fn run(cmd: FormsCommand) -> ExitCode {
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: could not start the async runtime: {e}");
            return ExitCode::from(2);
        }
    };
    rt.block_on(run_async(cmd))
}

/// The form env of the agent `agent` names (and its runner, to shut down), or the exit code.
async fn env_of(agent: &AgentArgs) -> Result<(forge_runtime::Runner, FormEnv), ExitCode> {
    let (_, runner) = crate::tool::load(agent).await?;
    match runner.form_env().await {
        Ok(env) => Ok((runner, env)),
        Err(e) => {
            eprintln!("error: {e}");
            runner.shutdown().await;
            Err(ExitCode::from(2))
        }
    }
}

async fn run_async(cmd: FormsCommand) -> ExitCode {
    let agent = match &cmd {
        FormsCommand::Learn { agent, .. }
        | FormsCommand::Run { agent, .. }
        | FormsCommand::List { agent, .. } => agent,
    };
    let (runner, env) = match env_of(agent).await {
        Ok(x) => x,
        Err(code) => return code,
    };
    let code = match &cmd {
        FormsCommand::Learn {
            url,
            form,
            slug,
            hosts,
            out,
            ..
        } => learn(&env, url, form, slug, hosts, out.as_deref()).await,
        FormsCommand::Run {
            schema,
            rows,
            hosts,
            batch_id,
            concurrency,
            results,
            ..
        } => {
            batch(
                &env,
                schema,
                rows,
                hosts,
                batch_id.clone(),
                *concurrency,
                results.clone(),
            )
            .await
        }
        FormsCommand::List { format, .. } => list(&env, *format).await,
    };
    env.release().await;
    runner.shutdown().await;
    code
}

/// `host` or `host:port` of an http(s) `url` (the policy normalises it further).
fn host_of(url: &str) -> Option<String> {
    let rest = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))?;
    let authority = rest.split(['/', '?', '#']).next()?;
    let host = authority.rsplit('@').next()?.to_ascii_lowercase();
    (!host.is_empty()).then_some(host)
}

async fn learn(
    env: &FormEnv,
    url: &str,
    form: &Option<String>,
    slug: &Option<String>,
    hosts: &[String],
    out: Option<&Path>,
) -> ExitCode {
    let hosts = if hosts.is_empty() {
        match host_of(url) {
            Some(h) => vec![h],
            None => {
                eprintln!("error: {url:?} is not an absolute http(s) URL");
                return ExitCode::from(2);
            }
        }
    } else {
        hosts.to_vec()
    };
    let req = LearnRequest {
        url: url.to_string(),
        form: form.clone(),
        slug: slug.clone(),
        allowed_hosts: hosts,
    };
    let task = format!("cli-{}", std::process::id());
    match env.learn(&task, &req).await {
        Ok((schema, kept)) => {
            let text = serde_json::to_string_pretty(&schema).unwrap_or_default();
            if let Some(p) = out {
                if let Err(e) = std::fs::write(p, &text) {
                    eprintln!("error: cannot write {}: {e}", p.display());
                    return ExitCode::from(2);
                }
            }
            let _ = writeln!(std::io::stdout(), "{text}");
            eprintln!(
                "learned {} field(s) of form {} on {} (fingerprint {}){}",
                schema.fields.len(),
                schema.slug,
                schema.host,
                schema.fingerprint,
                if kept {
                    format!("; kept as sites/{}/forms/{}", schema.host, schema.slug)
                } else {
                    String::new()
                }
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

async fn list(env: &FormEnv, format: ListFormat) -> ExitCode {
    let Some(forms) = env.store.as_ref().and_then(|s| s.forms()) else {
        eprintln!("error: this agent has no state store");
        return ExitCode::from(2);
    };
    let all = match forms.forms().await {
        Ok(a) => a,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let mut stdout = std::io::stdout().lock();
    if format == ListFormat::Json {
        let v: Vec<Value> = all
            .iter()
            .map(|f| json!({"key": f.key(), "host": f.host, "slug": f.slug, "fingerprint": f.fingerprint, "fields": f.schema["fields"].as_array().map(Vec::len).unwrap_or(0), "learnedMs": f.updated_ms, "url": f.schema["url"]}))
            .collect();
        let _ = writeln!(stdout, "{}", Value::Array(v));
        return ExitCode::SUCCESS;
    }
    if all.is_empty() {
        let _ = writeln!(stdout, "no learned forms (forge forms learn URL)");
    }
    for f in &all {
        let fields = f.schema["fields"].as_array().map(Vec::len).unwrap_or(0);
        let _ = writeln!(
            stdout,
            "{}  {} fields  {}  {}",
            f.key(),
            fields,
            f.fingerprint,
            f.schema["url"].as_str().unwrap_or("")
        );
    }
    ExitCode::SUCCESS
}

/// One CSV record per line group (RFC 4180: quoted cells may hold commas, quotes doubled and
/// line breaks).
fn parse_csv(text: &str) -> Result<Vec<Vec<String>>, String> {
    let mut rows = Vec::new();
    let mut row = Vec::new();
    let mut cell = String::new();
    let mut quoted = false;
    let mut chars = text.chars().peekable();
    let mut line = 1;
    while let Some(c) = chars.next() {
        if quoted {
            match c {
                '"' if chars.peek() == Some(&'"') => {
                    chars.next();
                    cell.push('"');
                }
                '"' => quoted = false,
                '\n' => {
                    line += 1;
                    cell.push(c);
                }
                _ => cell.push(c),
            }
            continue;
        }
        match c {
            '"' if cell.is_empty() => quoted = true,
            ',' => row.push(std::mem::take(&mut cell)),
            '\r' if chars.peek() == Some(&'\n') => {}
            '\n' => {
                line += 1;
                row.push(std::mem::take(&mut cell));
                rows.push(std::mem::take(&mut row));
            }
            _ => cell.push(c),
        }
    }
    if quoted {
        return Err(format!(
            "a quoted cell is not closed (from before line {line})"
        ));
    }
    if !cell.is_empty() || !row.is_empty() {
        row.push(cell);
        rows.push(row);
    }
    rows.retain(|r| !(r.len() == 1 && r[0].trim().is_empty()));
    Ok(rows)
}

/// The rows of a `.csv` (header: field keys; empty cells left out) or `.jsonl` file.
fn read_rows(path: &Path) -> Result<Vec<Map<String, Value>>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or("")
        .to_ascii_lowercase();
    match ext.as_str() {
        "csv" => {
            let mut recs = parse_csv(&text).map_err(|e| format!("{}: {e}", path.display()))?.into_iter();
            let header = recs.next().ok_or_else(|| format!("{}: no header row (the field keys)", path.display()))?;
            let header: Vec<String> = header.into_iter().map(|h| h.trim().to_string()).collect();
            recs.enumerate()
                .map(|(i, r)| {
                    if r.len() != header.len() {
                        return Err(format!("{} row {}: {} cells, the header has {}", path.display(), i + 2, r.len(), header.len()));
                    }
                    Ok(header
                        .iter()
                        .zip(r)
                        .filter(|(_, v)| !v.is_empty())
                        .map(|(k, v)| (k.clone(), Value::String(v)))
                        .collect())
                })
                .collect()
        }
        "jsonl" | "ndjson" => text
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
            .map(|(i, l)| match serde_json::from_str::<Value>(l) {
                Ok(Value::Object(o)) => Ok(o),
                Ok(_) => Err(format!("{} line {}: not a JSON object", path.display(), i + 1)),
                Err(e) => Err(format!("{} line {}: {e}", path.display(), i + 1)),
            })
            .collect(),
        _ => Err(format!(
            "{}: give the rows as FILE.csv (a header row of field keys) or FILE.jsonl (one JSON object per line)",
            path.display()
        )),
    }
}

async fn batch(
    env: &FormEnv,
    schema: &str,
    rows: &Path,
    hosts: &[String],
    batch_id: Option<String>,
    concurrency: u64,
    results: Option<PathBuf>,
) -> ExitCode {
    let rows = match read_rows(rows) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let schema_ref = if schema.ends_with(".json") || Path::new(schema).is_file() {
        match std::fs::read_to_string(schema)
            .map_err(|e| e.to_string())
            .and_then(|t| serde_json::from_str(&t).map_err(|e| e.to_string()))
        {
            Ok(s) => SchemaRef::Inline(Box::new(s)),
            Err(e) => {
                eprintln!("error: {schema} is not a FormSchema file: {e}");
                return ExitCode::from(2);
            }
        }
    } else {
        SchemaRef::Slug(schema.to_string())
    };
    let hosts = if !hosts.is_empty() {
        hosts.to_vec()
    } else {
        match &schema_ref {
            SchemaRef::Inline(s) => vec![s.host.clone()],
            SchemaRef::Slug(slug) => {
                let forms = match env.store.as_ref().and_then(|s| s.forms()) {
                    Some(f) => f.forms().await.unwrap_or_default(),
                    None => vec![],
                };
                let found: Vec<String> = forms
                    .into_iter()
                    .filter(|f| &f.slug == slug)
                    .map(|f| f.host)
                    .collect();
                if found.len() != 1 {
                    eprintln!(
                        "error: give --host: {} learned form(s) are called {slug:?}",
                        found.len()
                    );
                    return ExitCode::from(2);
                }
                found
            }
        }
    };
    let req = BatchRequest {
        schema: schema_ref,
        rows,
        allowed_hosts: hosts,
        batch_id,
        concurrency: Some(concurrency.max(1)),
    };
    let cancel = CancellationToken::new();
    let stop = cancel.clone();
    tokio::spawn(async move {
        crate::signals::wait_for_shutdown().await;
        eprintln!("\nstopping after the rows in flight (re-run with the same --batch-id to go on)");
        stop.cancel();
    });
    let tty = std::io::stderr().is_terminal();
    let progress = move |r: &RowResult, n: usize, total: usize| {
        let mut err = std::io::stderr().lock();
        if tty {
            let width = 30usize;
            let filled = (n * width).checked_div(total).unwrap_or(0);
            let _ = write!(
                err,
                "\r[{}{}] {n}/{total} row {} {}   ",
                "#".repeat(filled),
                ".".repeat(width - filled),
                r.index + 1,
                r.status
            );
            if n == total {
                let _ = writeln!(err);
            }
        } else {
            let _ = writeln!(err, "row {n}/{total} {}: {}", r.status, r.message);
        }
    };
    let task = format!("cli-{}", std::process::id());
    let result = match env.run_batch(&task, &req, &cancel, &progress).await {
        Ok(r) => r,
        Err(e) => {
            eprintln!("\nerror: {e}");
            return ExitCode::from(2);
        }
    };
    let path =
        results.unwrap_or_else(|| PathBuf::from(format!("form-results-{}.csv", result.batch_id)));
    let body = if path.extension().and_then(|e| e.to_str()) == Some("json") {
        serde_json::to_string_pretty(&result.to_json()).unwrap_or_default()
    } else {
        result.to_csv()
    };
    if let Err(e) = std::fs::write(&path, body) {
        eprintln!("error: cannot write {}: {e}", path.display());
        return ExitCode::from(2);
    }
    let _ = writeln!(
        std::io::stdout(),
        "{}\nresults: {}",
        result.summary(),
        path.display()
    );
    if result.stopped.is_none() && result.rows.iter().all(|r| r.status == "done") {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_cells_keep_quotes_commas_and_line_breaks() {
        let rows =
            parse_csv("name,notes\r\n\"Lovelace, Ada\",\"said \"\"hi\"\"\nthen left\"\nBob,\n")
                .expect("csv");
        assert_eq!(
            rows,
            vec![
                vec!["name".to_string(), "notes".to_string()],
                vec![
                    "Lovelace, Ada".to_string(),
                    "said \"hi\"\nthen left".to_string()
                ],
                vec!["Bob".to_string(), String::new()],
            ]
        );
        assert!(parse_csv("a\n\"open").is_err());
    }
}
