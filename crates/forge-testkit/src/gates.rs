//! Require-or-skip gates: a test that needs something this machine may lack (Chromium, a Python
//! SDK, npx, ...) skips with a note on stderr, and fails instead when `FORGE_REQUIRE_BROWSER=1`
//! (CI installs everything and sets it, so nothing is silently skipped there).

/// The variable that turns every skip into a failure.
pub const REQUIRE_ENV: &str = "FORGE_REQUIRE_BROWSER";

/// True when `FORGE_REQUIRE_BROWSER=1`: every optional-dependency test must run.
pub fn required() -> bool {
    std::env::var(REQUIRE_ENV).as_deref() == Ok("1")
}

/// Skip with `SKIPPED: {why}` on stderr; panics instead under `FORGE_REQUIRE_BROWSER=1`.
pub fn skip(why: &str) {
    if required() {
        panic!("{why}; {REQUIRE_ENV}=1 requires this test to run");
    }
    eprintln!("SKIPPED: {why}");
}

/// [`skip`], failing as well when the gate's own switch `var` is `1` (e.g.
/// `FORGE_REQUIRE_MCP_SDK`): for a dependency one suite can demand without demanding them all.
pub fn skip_unless_required_by(var: &str, why: &str) {
    if std::env::var(var).as_deref() == Ok("1") {
        panic!("{why}; {var}=1 requires this test to run");
    }
    skip(why);
}

/// `true` when `available`; otherwise [`skip`] with `why` (a panic under
/// `FORGE_REQUIRE_BROWSER=1`) and `false`.
pub fn require(available: bool, why: &str) -> bool {
    if !available {
        skip(why);
    }
    available
}

/// True when `python3 -c "<import>"` succeeds (e.g. `"import mcp"`), the probe for a Python SDK.
pub fn python_has(import: &str) -> bool {
    std::process::Command::new("python3")
        .args(["-c", import])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

/// True when `program args...` runs and exits 0 (e.g. `npx --version`), the probe for a tool.
pub fn program_runs(program: &str, args: &[&str]) -> bool {
    std::process::Command::new(program)
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// The Chromium binary forge would launch (`forge_browser::find_browser_binary`: FORGE_BROWSER_BIN,
/// then PATH), or `None` after a skip note naming `test`; panics under `FORGE_REQUIRE_BROWSER=1`.
#[cfg(feature = "browser")]
pub fn require_browser(test: &str) -> Option<std::path::PathBuf> {
    match forge_browser::find_browser_binary() {
        Ok(p) => Some(p),
        Err(e) => {
            skip(&format!(
                "{test}: no Chromium found ({e}); install it with scripts/install-deps.sh browser"
            ));
            None
        }
    }
}

/// The Lightpanda binary (`FORGE_LIGHTPANDA_BIN`, then `lightpanda` on PATH), or `None` after a
/// skip note naming `test`; panics under `FORGE_REQUIRE_BROWSER=1` (CI installs it with
/// scripts/install-deps.sh).
#[cfg(feature = "browser")]
pub fn require_lightpanda(test: &str) -> Option<std::path::PathBuf> {
    use forge_browser::engine::Engine;
    match forge_browser::engine::Lightpanda.find_binary() {
        Ok(p) => Some(p),
        Err(e) => {
            skip(&format!(
                "{test}: no Lightpanda found ({e}); install it with scripts/install-deps.sh browser"
            ));
            None
        }
    }
}

/// The network-namespace kind this machine offers for confinement, or `None` after a skip note
/// naming `test`. A skip, not a failure (CI machines may forbid namespaces), unless
/// `FORGE_REQUIRE_CONFINEMENT` is set: then a missing namespace fails the test.
#[cfg(feature = "egress")]
pub fn require_namespace(test: &str) -> Option<forge_egress::confine::NsKind> {
    match forge_egress::confine::availability() {
        forge_egress::confine::Availability::Namespace(k) => Some(k),
        forge_egress::confine::Availability::ProxyOnly(why) => {
            assert!(
                std::env::var_os("FORGE_REQUIRE_CONFINEMENT").is_none(),
                "{test}: FORGE_REQUIRE_CONFINEMENT is set but confinement is unavailable: {why}"
            );
            eprintln!("SKIP {test}: no network namespace on this machine: {why}");
            None
        }
    }
}

/// The Lightpanda program itself, the ELF file `forge build` ships (pip's `lightpanda` command
/// is a Python script that starts it): `FORGE_LIGHTPANDA_BIN` when it names an ELF file, else
/// what the PyPI wheel reports (`python3 -c 'from lightpanda.client import find_binary; ...'`,
/// the fix `forge build`'s error names). `None` after a skip note naming `test`; panics under
/// `FORGE_REQUIRE_BROWSER=1`.
pub fn require_lightpanda_program(test: &str) -> Option<std::path::PathBuf> {
    use std::io::Read;
    let is_elf = |p: &std::path::Path| {
        let mut magic = [0u8; 4];
        std::fs::File::open(p)
            .and_then(|mut f| f.read_exact(&mut magic))
            .is_ok()
            && magic == *b"\x7fELF"
    };
    if let Some(p) = std::env::var_os("FORGE_LIGHTPANDA_BIN").map(std::path::PathBuf::from) {
        if is_elf(&p) {
            return Some(p);
        }
    }
    let asked = std::process::Command::new("python3")
        .args([
            "-c",
            "from lightpanda.client import find_binary; print(find_binary())",
        ])
        .stderr(std::process::Stdio::null())
        .output();
    let found = asked
        .ok()
        .filter(|o| o.status.success())
        .map(|o| std::path::PathBuf::from(String::from_utf8_lossy(&o.stdout).trim().to_string()))
        .filter(|p| is_elf(p));
    if found.is_none() {
        skip(&format!(
            "{test}: no Lightpanda binary (FORGE_LIGHTPANDA_BIN naming an ELF file, or the PyPI \
             wheel's); install it with scripts/install-deps.sh browser"
        ));
    }
    found
}
