//! `forge profile list | delete NAME`: the login profiles (forge.yaml `browser.profiles`) kept in
//! the agent's state store. Names, origins, size and times only: the cookies and storage are
//! sealed, and this command never opens them (it needs no key).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Subcommand;
use forge_state::StateStore;

/// `forge profile ...`
#[derive(Subcommand)]
pub(crate) enum ProfileCommand {
    /// List the login profiles: forge.yaml's, and any kept in the state store.
    List {
        /// The agent's forge.yaml.
        #[arg(long, short = 'c', default_value = "forge.yaml")]
        config: PathBuf,
        /// Print JSON (one array) instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Delete a saved login profile (its next task starts logged out).
    Delete {
        /// The profile's name.
        name: String,
        /// The agent's forge.yaml.
        #[arg(long, short = 'c', default_value = "forge.yaml")]
        config: PathBuf,
    },
}

pub(crate) fn run(cmd: ProfileCommand) -> ExitCode {
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("forge profile: cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    rt.block_on(run_async(cmd))
}

async fn open(
    config: &std::path::Path,
) -> Result<(forge_skills::ForgeConfig, forge_state::SqlStore), ExitCode> {
    let cfg = match forge_skills::ForgeConfig::load(config) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{:?}", forge_skills::miette::Report::new(e));
            return Err(ExitCode::from(2));
        }
    };
    let dir = config
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("."));
    let url = std::env::var("FORGE_STATE_URL")
        .ok()
        .filter(|u| !u.trim().is_empty())
        .or_else(|| cfg.state.url.clone());
    let store = match forge_state::StoreLocation::from_config(url.as_deref(), &dir) {
        Ok(loc) => forge_state::SqlStore::open(&loc).await,
        Err(e) => Err(e),
    };
    match store {
        Ok(s) => Ok((cfg, s)),
        Err(e) => {
            eprintln!("forge profile: {e}");
            Err(ExitCode::from(1))
        }
    }
}

fn when(ms: Option<i64>) -> String {
    match ms {
        Some(ms) if ms > 0 => forge_time::rfc3339(ms / 1000),
        _ => "never".into(),
    }
}

async fn run_async(cmd: ProfileCommand) -> ExitCode {
    match cmd {
        ProfileCommand::List { config, json } => {
            let (cfg, store) = match open(&config).await {
                Ok(v) => v,
                Err(code) => return code,
            };
            let saved = match store.profiles().await {
                Ok(p) => p,
                Err(e) => {
                    eprintln!("forge profile list: {e}");
                    return ExitCode::from(1);
                }
            };
            store.close().await;
            let mut rows = Vec::new();
            for spec in &cfg.browser.profiles {
                let rec = saved.iter().find(|r| r.name == spec.name);
                rows.push(serde_json::json!({
                    "name": spec.name,
                    "origins": spec.origins,
                    "configured": true,
                    "saved": rec.is_some(),
                    "size_bytes": rec.map(|r| r.size_bytes),
                    "updated": rec.map(|r| when(Some(r.updated_ms))),
                    "last_used": rec.map(|r| when(r.last_used_ms)),
                    "version": rec.map(|r| r.version),
                    "key": rec.map(|r| r.key_id.clone()),
                }));
            }
            for r in saved
                .iter()
                .filter(|r| !cfg.browser.profiles.iter().any(|s| s.name == r.name))
            {
                rows.push(serde_json::json!({
                    "name": r.name,
                    "origins": r.origins,
                    "configured": false,
                    "saved": true,
                    "size_bytes": r.size_bytes,
                    "updated": when(Some(r.updated_ms)),
                    "last_used": when(r.last_used_ms),
                    "version": r.version,
                    "key": r.key_id,
                }));
            }
            if json {
                println!("{}", serde_json::Value::from(rows));
                return ExitCode::SUCCESS;
            }
            if rows.is_empty() {
                println!("no login profiles (forge.yaml browser.profiles is empty, and the store keeps none)");
                return ExitCode::SUCCESS;
            }
            println!("NAME\tORIGINS\tSIZE\tLAST USED\tUPDATED\tKEY");
            for r in &rows {
                let origins = r["origins"]
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .filter_map(|o| o.as_str())
                            .collect::<Vec<_>>()
                            .join(",")
                    })
                    .unwrap_or_default();
                let mut name = r["name"].as_str().unwrap_or("").to_string();
                if r["configured"] == false {
                    name.push_str(" (not in forge.yaml)");
                }
                match r["saved"] == true {
                    true => println!(
                        "{name}\t{origins}\t{} bytes\t{}\t{}\t{}",
                        r["size_bytes"],
                        r["last_used"].as_str().unwrap_or(""),
                        r["updated"].as_str().unwrap_or(""),
                        r["key"].as_str().unwrap_or("")
                    ),
                    false => println!("{name}\t{origins}\tnot saved yet\t-\t-\t-"),
                }
            }
            ExitCode::SUCCESS
        }
        ProfileCommand::Delete { name, config } => {
            let (_, store) = match open(&config).await {
                Ok(v) => v,
                Err(code) => return code,
            };
            let done = store.delete_profile(&name).await;
            store.close().await;
            match done {
                Ok(true) => {
                    println!("deleted login profile {name}; its next task starts logged out");
                    ExitCode::SUCCESS
                }
                Ok(false) => {
                    eprintln!("forge profile delete: there is no saved login profile `{name}` in this agent's state store (`forge profile list` shows them)");
                    ExitCode::from(1)
                }
                Err(e) => {
                    eprintln!("forge profile delete: {e}");
                    ExitCode::from(1)
                }
            }
        }
    }
}
