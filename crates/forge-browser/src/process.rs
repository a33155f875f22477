//! Chromium as an OS process: its command line ([`launch_args`]: every flag and why) and
//! environment ([`browser_env`]), spawning it (confined in a network namespace or not, always
//! through the lifeline: `lifeline.rs`), cleaning up a half-started one, and its process group:
//! registered so that process exit kills it as a last resort, and watched ([`group_alive`]) until
//! a kill has taken effect, with its crash handlers outside the group ([`end_strays`]). The
//! manager (`manager.rs`) launches through these and keeps the live browser.

use std::path::PathBuf;
use std::sync::{Arc, Mutex as StdMutex};
use std::time::{Duration, Instant};

use crate::config::BrowserConfig;
use crate::error::BrowserError;

/// Browsers alive in this process (group id, throwaway dir), killed and removed at process exit
/// as a last resort when nobody called `shutdown` (a static in a test binary, `process::exit`).
static LIVE: StdMutex<Vec<(i32, PathBuf)>> = StdMutex::new(Vec::new());
static EXIT_HOOK: std::sync::Once = std::sync::Once::new();

extern "C" fn kill_live_browsers() {
    let live: Vec<(i32, PathBuf)> = match LIVE.lock() {
        Ok(mut l) => l.drain(..).collect(),
        Err(p) => p.into_inner().drain(..).collect(),
    };
    for (pgid, _) in &live {
        if *pgid > 0 {
            // SAFETY: plain syscall on a process group this process created.
            unsafe {
                libc::killpg(*pgid, libc::SIGKILL);
            }
        }
    }
    let deadline = Instant::now() + Duration::from_secs(2);
    for (pgid, dir) in &live {
        while group_alive(*pgid) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        end_strays(dir, deadline);
        let _ = std::fs::remove_dir_all(dir);
    }
}

pub(crate) fn register_live(pgid: i32, dir: PathBuf) {
    EXIT_HOOK.call_once(|| {
        // SAFETY: registers a plain extern "C" function without captured state.
        unsafe {
            libc::atexit(kill_live_browsers);
        }
    });
    LIVE.lock()
        .unwrap_or_else(|p| p.into_inner())
        .push((pgid, dir));
}

pub(crate) fn unregister_live(pgid: i32) {
    LIVE.lock()
        .unwrap_or_else(|p| p.into_inner())
        .retain(|(g, _)| *g != pgid);
}

/// Whether any process of group `pgid` still exists (zombies excluded).
pub(crate) fn group_alive(pgid: i32) -> bool {
    if pgid <= 0 {
        return false;
    }
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return unsafe { libc::killpg(pgid, 0) == 0 };
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name.to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // Fields after the ")" that ends the command name: state ppid pgrp ...
        let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
            continue;
        };
        let mut f = rest.split_whitespace();
        let state = f.next().unwrap_or("");
        let _ppid = f.next();
        let pgrp = f.next().and_then(|s| s.parse::<i32>().ok()).unwrap_or(0);
        if pgrp == pgid && state != "Z" && state != "X" {
            return true;
        }
    }
    false
}

/// Processes of a browser outside its process group: Chromium's crashpad handlers (Debian's
/// build starts two despite `--disable-breakpad`; `--disable-crashpad-for-testing`, which would
/// start none, makes Chromium 156's network service crash). They run detached (parent 1, groups
/// of their own), outlive a killed browser by up to a second, and are found by their command line,
/// which names the browser's throwaway `dir` (`--database=<dir>/home/.config/chromium/...`).
fn strays(dir: &std::path::Path) -> Vec<i32> {
    let mut needle = dir.as_os_str().as_encoded_bytes().to_vec();
    needle.push(b'/');
    let me = std::process::id() as i32;
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in entries.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        if pid == me {
            continue;
        }
        let Ok(cmd) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        if !cmd.windows(needle.len()).any(|w| w == needle.as_slice()) {
            continue;
        }
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let state = stat
            .rsplit_once(')')
            .and_then(|(_, r)| r.split_whitespace().next())
            .unwrap_or("");
        if state != "Z" && state != "X" {
            out.push(pid);
        }
    }
    out
}

/// Kill the processes of the browser whose throwaway dir is `dir` that are outside its group
/// ([`strays`]) and wait until none is left (or `deadline`). Call after the group is gone.
pub(crate) fn end_strays(dir: &std::path::Path, deadline: Instant) {
    if dir.as_os_str().is_empty() {
        return;
    }
    loop {
        let left = strays(dir);
        if left.is_empty() || Instant::now() > deadline {
            return;
        }
        for pid in left {
            // SAFETY: plain syscall; the pid was just seen running a command line that names
            // this browser's own throwaway dir (a fresh random name).
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Cleans up a half-started browser when launch fails.
pub(crate) struct ProvisionalCleanup {
    pub(crate) pgid: i32,
    pub(crate) pid: u32,
    pub(crate) dir: Option<tempfile::TempDir>,
    pub(crate) tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for ProvisionalCleanup {
    fn drop(&mut self) {
        if self.pgid > 0 {
            unregister_live(self.pgid);
            unsafe {
                libc::killpg(self.pgid, libc::SIGKILL);
                let mut status = 0;
                libc::waitpid(self.pid as i32, &mut status, 0);
            }
            let deadline = Instant::now() + Duration::from_secs(2);
            while group_alive(self.pgid) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            if let Some(d) = &self.dir {
                end_strays(d.path(), deadline);
            }
        }
        for t in self.tasks.drain(..) {
            t.abort();
        }
        if let Some(d) = self.dir.take() {
            let p = d.path().to_path_buf();
            if d.close().is_err() {
                let _ = std::fs::remove_dir_all(p);
            }
        }
    }
}

/// Spawn Chromium from the lifeline's thread with a parent-death signal (`lifeline.rs`: it dies
/// with forge), confined in a network namespace of its own when `confine` is given (its spare
/// proxy listeners and dial sockets are returned then).
pub(crate) async fn spawn_browser(
    cmd: tokio::process::Command,
    confine: Option<&forge_egress::confine::Confiner>,
) -> Result<
    (
        tokio::process::Child,
        Option<Arc<crate::devtools_relay::SpareProxies>>,
    ),
    String,
> {
    match confine {
        Some(c) => {
            let (child, confined) = crate::devtools_relay::spawn_confined(cmd, c).await?;
            Ok((
                child,
                Some(Arc::new(crate::devtools_relay::SpareProxies::new(confined))),
            ))
        }
        None => crate::lifeline::spawn(cmd)
            .await
            .map(|c| (c, None))
            .map_err(|e| format!("cannot execute it: {e}")),
    }
}

pub(crate) fn launch_err(binary: &std::path::Path, reason: String) -> BrowserError {
    BrowserError::Launch {
        binary: binary.display().to_string(),
        reason,
    }
}

/// What Chromium may see of forge's environment: a PATH, a HOME (and XDG dirs) inside its own
/// throwaway dir, the locale, the time zone and fontconfig's settings; a display only when it is
/// not headless. Nothing else: API keys, tokens and the rest of forge's environment stay out.
pub fn browser_env(
    home: &std::path::Path,
    headless: bool,
    get: impl Fn(&str) -> Option<std::ffi::OsString>,
) -> Vec<(String, std::ffi::OsString)> {
    let mut env = vec![
        (
            "PATH".to_string(),
            get("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into()),
        ),
        ("HOME".to_string(), home.as_os_str().to_owned()),
        (
            "XDG_CONFIG_HOME".to_string(),
            home.join(".config").into_os_string(),
        ),
        (
            "XDG_CACHE_HOME".to_string(),
            home.join(".cache").into_os_string(),
        ),
    ];
    let mut pass = vec![
        "LANG",
        "LANGUAGE",
        "LC_ALL",
        "LC_CTYPE",
        "TZ",
        "FONTCONFIG_FILE",
        "FONTCONFIG_PATH",
    ];
    if !headless {
        pass.extend([
            "DISPLAY",
            "WAYLAND_DISPLAY",
            "XAUTHORITY",
            "XDG_RUNTIME_DIR",
        ]);
    }
    for k in pass {
        if let Some(v) = get(k) {
            env.push((k.to_string(), v));
        }
    }
    env
}

/// The command line Chromium gets (see docs/browser.md for why each flag is there).
pub fn launch_args(
    config: &BrowserConfig,
    proxy: std::net::SocketAddr,
    profile: &std::path::Path,
) -> Vec<String> {
    let mut args: Vec<String> = vec![
        format!("--proxy-server=http://{proxy}"),
        // Without this Chromium sends localhost, 127/8, [::1] and 169.254/16 around the proxy.
        "--proxy-bypass-list=<-loopback>".into(),
        "--no-first-run".into(),
        "--no-default-browser-check".into(),
        "--disable-extensions".into(),
        "--disable-background-networking".into(),
        "--disable-component-update".into(),
        "--disable-sync".into(),
        "--disable-default-apps".into(),
        "--disable-quic".into(),
        "--disable-domain-reliability".into(),
        "--disable-breakpad".into(),
        "--disable-client-side-phishing-detection".into(),
        "--no-pings".into(),
        "--dns-prefetch-disable".into(),
        "--force-webrtc-ip-handling-policy=disable_non_proxied_udp".into(),
        "--webrtc-ip-handling-policy=disable_non_proxied_udp".into(),
        // NetworkTimeServiceQuerying: the network-time tracker polls clients2.google.com at start;
        // the proxy refuses it anyway, but it would show up as noise in every audit log.
        // WebUIOmniboxPopup, WebUIOmniboxAimPopup: headless Chromium 156 otherwise preloads the
        // omnibox popup's WebUI pages (two `browser_ui` targets) in a renderer of their own, about
        // 150 MB that nothing headless ever shows.
        "--disable-features=HttpsUpgrades,HttpsFirstBalancedModeAutoEnable,MediaRouter,OptimizationHints,Translate,AutofillServerCommunication,InterestFeedContentSuggestions,NetworkTimeServiceQuerying,WebUIOmniboxPopup,WebUIOmniboxAimPopup".into(),
        // What would go to /dev/shm goes to /tmp; Chromium 156 uses memfd anyway, and a 64 MiB
        // /dev/shm does not crash it, so images and pods need no larger one (docs/benchmarks.md,
        // "Chromium and /dev/shm").
        "--disable-dev-shm-usage".into(),
        // Two requests Chromium 156 makes at every start even with the flags above: the
        // reconcilor's accounts.google.com/ListAccounts and an on-demand component update (the
        // on-device model manifest, which --disable-component-update does not cover). No flag,
        // feature or profile pref turns either off (docs/browser.md lists what was tried), so
        // both are pointed at port 1, which Chromium itself refuses (ERR_UNSAFE_PORT): nothing
        // leaves the browser, not even to the proxy. Test: a_quiet_start_asks_google_for_nothing.
        "--gaia-url=https://127.0.0.1:1/".into(),
        "--component-updater=url-source=https://127.0.0.1:1/".into(),
        "--disable-hang-monitor".into(),
        "--disable-prompt-on-repost".into(),
        "--password-store=basic".into(),
        "--use-mock-keychain".into(),
        "--mute-audio".into(),
        "--hide-scrollbars".into(),
        "--remote-debugging-port=0".into(),
        "--remote-debugging-address=127.0.0.1".into(),
        format!("--window-size={},{}", config.viewport.0, config.viewport.1),
        format!("--user-data-dir={}", profile.display()),
    ];
    if config.headless {
        args.push("--headless=new".into());
    }
    if needs_no_sandbox() {
        args.push("--no-sandbox".into());
    }
    // No default tab: every page forge uses lives in a session's own browser context, so a
    // startup tab would only cost a renderer process (and its attach and set-up at connect).
    args.push("--no-startup-window".into());
    args
}

/// Chromium's sandbox cannot run as root or (usually) inside a container.
fn needs_no_sandbox() -> bool {
    let root = unsafe { libc::geteuid() } == 0;
    let container = std::path::Path::new("/.dockerenv").exists()
        || std::path::Path::new("/run/.containerenv").exists()
        || std::env::var_os("container").is_some();
    root || container
}
