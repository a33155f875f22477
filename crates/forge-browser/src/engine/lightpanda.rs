//! Lightpanda as an [`Engine`]: a headless browser written for automation (no rendering, a
//! synthetic layout), spoken to over CDP like Chromium. Its binary is `FORGE_LIGHTPANDA_BIN`, else
//! `lightpanda` on PATH (the PyPI wheel's binary works). It is AGPL-3.0: forge runs it as a
//! separate, unmodified program and never links it (docs/browser.md).
//!
//! Launch ([`serve_args`], [`lightpanda_env`]): `serve` on a loopback port, every request through
//! forge's proxy with `--http-proxy` (a context-level proxy alone let WebSocket traffic out in a
//! probe), telemetry off, a cleared environment with a HOME inside its throwaway dir.

use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use super::{Capability, Engine, EngineKind};
use crate::binary::BrowserNotFound;

/// The variable naming the Lightpanda binary.
pub const LIGHTPANDA_BIN_VAR: &str = "FORGE_LIGHTPANDA_BIN";
/// The name looked up on PATH.
pub const LIGHTPANDA_NAME: &str = "lightpanda";

/// Lightpanda.
#[derive(Debug, Clone, Copy, Default)]
pub struct Lightpanda;

impl Engine for Lightpanda {
    fn kind(&self) -> EngineKind {
        EngineKind::Lightpanda
    }

    fn can(&self, c: Capability) -> bool {
        // Measured against Lightpanda 1.0.2 (issue 26's probe): its layout is synthetic (no
        // "in view", no cover checks, no real boxes to drag or select across), one tab per
        // context (`window.open` opens nothing), `alert()` does not block, screenshots show text
        // only, no screencast. File inputs are not offered until tested.
        match c {
            Capability::Screenshots
            | Capability::Drag
            | Capability::TextSelection
            | Capability::Layout
            | Capability::SeveralTabs
            | Capability::Dialogs
            | Capability::Screencast
            | Capability::FileUploads => false,
        }
    }

    fn find_binary_in(
        &self,
        explicit: Option<PathBuf>,
        path_var: Option<OsString>,
    ) -> Result<PathBuf, BrowserNotFound> {
        if let Some(bin) = explicit.filter(|p| !p.as_os_str().is_empty()) {
            if forge_which::is_executable(&bin) {
                return Ok(bin);
            }
            return Err(BrowserNotFound {
                searched: vec![format!(
                    "{LIGHTPANDA_BIN_VAR}={} (not an executable file; fix or unset {LIGHTPANDA_BIN_VAR})",
                    bin.display()
                )],
                engine: EngineKind::Lightpanda,
            });
        }
        let dirs: Vec<PathBuf> = path_var
            .map(|p| std::env::split_paths(&p).collect())
            .unwrap_or_default();
        forge_which::find_in(LIGHTPANDA_NAME, &dirs).ok_or_else(|| BrowserNotFound {
            searched: vec![format!("{LIGHTPANDA_NAME} on PATH")],
            engine: EngineKind::Lightpanda,
        })
    }

    fn find_binary(&self) -> Result<PathBuf, BrowserNotFound> {
        self.find_binary_in(
            std::env::var_os(LIGHTPANDA_BIN_VAR).map(PathBuf::from),
            std::env::var_os("PATH"),
        )
    }

    fn ping_means_dead(&self) -> bool {
        false
    }
}

/// Lightpanda's command line: `serve` on `cdp` (loopback), every request through `proxy`.
pub fn serve_args(cdp: SocketAddr, proxy: SocketAddr) -> Vec<String> {
    vec![
        "serve".into(),
        "--host".into(),
        cdp.ip().to_string(),
        "--port".into(),
        cdp.port().to_string(),
        // Every HTTP(S) and WebSocket request of every page goes to forge's proxy.
        "--http-proxy".into(),
        format!("http://{proxy}"),
        // No Prometheus endpoint on the CDP port: nothing but CDP is served.
        "--disable-metrics".into(),
        // One client: forge.
        "--cdp-max-connections".into(),
        "4".into(),
    ]
}

/// The CDP websocket URL in Lightpanda's `server running` log line (on stderr:
/// `$msg="server running" address=127.0.0.1:40303 ...`), or `None` for any other line.
pub fn cdp_url_from_log(line: &str) -> Option<String> {
    if !line.contains("msg=\"server running\"") {
        return None;
    }
    let addr = line
        .split_whitespace()
        .find_map(|w| w.strip_prefix("address="))?;
    let addr: SocketAddr = addr.parse().ok()?;
    addr.ip().is_loopback().then(|| format!("ws://{addr}/"))
}

/// What Lightpanda may see of forge's environment: a PATH, a HOME inside its throwaway dir, the
/// locale and time zone, and `LIGHTPANDA_DISABLE_TELEMETRY=true` (its telemetry is on by
/// default). Nothing else: API keys and tokens stay out.
pub fn lightpanda_env(
    home: &Path,
    get: impl Fn(&str) -> Option<OsString>,
) -> Vec<(String, OsString)> {
    let mut env = vec![
        (
            "PATH".to_string(),
            get("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into()),
        ),
        ("HOME".to_string(), home.as_os_str().to_owned()),
        (
            "XDG_CACHE_HOME".to_string(),
            home.join(".cache").into_os_string(),
        ),
        (
            "XDG_CONFIG_HOME".to_string(),
            home.join(".config").into_os_string(),
        ),
        ("LIGHTPANDA_DISABLE_TELEMETRY".to_string(), "true".into()),
    ];
    for k in ["LANG", "LC_ALL", "TZ"] {
        if let Some(v) = get(k) {
            env.push((k.to_string(), v));
        }
    }
    env
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_binary_is_the_variable_or_lightpanda_on_path() {
        let err = Lightpanda
            .find_binary_in(Some("/nonexistent/lp".into()), None)
            .expect_err("missing explicit binary");
        let msg = err.to_string();
        assert!(
            msg.contains("FORGE_LIGHTPANDA_BIN=/nonexistent/lp"),
            "{msg}"
        );
        assert!(msg.contains("no Lightpanda found"), "{msg}");
        let dir = tempfile::tempdir().expect("tempdir");
        let err = Lightpanda
            .find_binary_in(None, Some(dir.path().as_os_str().to_owned()))
            .expect_err("empty PATH dir");
        assert!(err.to_string().contains("pip install lightpanda"), "{err}");
        use std::os::unix::fs::PermissionsExt;
        let p = dir.path().join("lightpanda");
        std::fs::write(&p, "#!/bin/sh\n").expect("write");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        let found = Lightpanda
            .find_binary_in(None, Some(dir.path().as_os_str().to_owned()))
            .expect("found");
        assert_eq!(found, p);
    }

    #[test]
    fn the_cdp_address_is_read_from_the_log() {
        let line = r#"$time=1795854436527 $scope=note $level=note $msg="server running" address=127.0.0.1:40303 max_connections=16208"#;
        assert_eq!(
            cdp_url_from_log(line),
            Some("ws://127.0.0.1:40303/".to_string())
        );
        assert_eq!(cdp_url_from_log("$msg=\"other\" address=127.0.0.1:1"), None);
        let far = r#"$msg="server running" address=10.0.0.1:9222"#;
        assert_eq!(cdp_url_from_log(far), None, "loopback only");
    }

    #[test]
    fn the_environment_is_cleared_and_telemetry_is_off() {
        let home = Path::new("/x/home");
        let env = lightpanda_env(home, |k| match k {
            "PATH" => Some("/bin".into()),
            "OPENAI_API_KEY" => Some("sk-secret".into()),
            _ => None,
        });
        let get = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
        assert_eq!(get("LIGHTPANDA_DISABLE_TELEMETRY"), Some("true".into()));
        assert_eq!(get("HOME"), Some("/x/home".into()));
        assert_eq!(get("OPENAI_API_KEY"), None);
        let args = serve_args(
            "127.0.0.1:9222".parse().expect("addr"),
            "127.0.0.1:3128".parse().expect("addr"),
        );
        let joined = args.join(" ");
        assert!(
            joined.starts_with("serve --host 127.0.0.1 --port 9222"),
            "{joined}"
        );
        assert!(
            joined.contains("--http-proxy http://127.0.0.1:3128"),
            "{joined}"
        );
    }
}
