//! `forge` command builders for the CLI tests: the real binary with a hermetic environment (the
//! model and runtime variables a developer may have exported are removed, so a test sees only
//! what it sets). The binary's path comes from the calling test crate (`CARGO_BIN_EXE_forge` is
//! set only when compiling forge-cli's own tests), which the [`forge!`](crate::forge) and
//! [`forge_assert!`](crate::forge_assert) macros read at the call site.

use std::path::Path;

/// Variables removed from every `forge` a test starts (a test sets what it needs afterwards).
pub const HERMETIC_ENV: &[&str] = &[
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "FORGE_MODEL_PROVIDER",
    "FORGE_RUNTIME_TOKEN",
    "MODEL_NAME",
    "OPENAI_BASE_URL",
    "ANTHROPIC_BASE_URL",
    "OLLAMA_BASE_URL",
    "FORGE_CONFINEMENT_UNAVAILABLE",
    "SOURCE_DATE_EPOCH",
];

/// A `std::process::Command` running the binary at `bin` with [`HERMETIC_ENV`] removed.
pub fn command(bin: impl AsRef<Path>) -> std::process::Command {
    let mut c = std::process::Command::new(bin.as_ref());
    for v in HERMETIC_ENV {
        c.env_remove(v);
    }
    c
}

/// An `assert_cmd::Command` running the binary at `bin` with [`HERMETIC_ENV`] removed.
pub fn assert_command(bin: impl AsRef<Path>) -> assert_cmd::Command {
    let mut c = assert_cmd::Command::new(bin.as_ref());
    for v in HERMETIC_ENV {
        c.env_remove(v);
    }
    c
}

/// `forge!()`: a `std::process::Command` for the `forge` binary of the calling test crate, with a
/// hermetic environment ([`cli::command`](crate::cli::command)).
#[macro_export]
macro_rules! forge {
    () => {
        $crate::cli::command(env!("CARGO_BIN_EXE_forge"))
    };
}

/// `forge_assert!()`: the same as an `assert_cmd::Command`.
#[macro_export]
macro_rules! forge_assert {
    () => {
        $crate::cli::assert_command(env!("CARGO_BIN_EXE_forge"))
    };
}

/// The port of the first `http://host:port[/path]` URL in `line` (a line `forge run` or `forge
/// mcp serve` prints at start-up, such as `http://127.0.0.1:PORT/mcp`); panics naming the line
/// when it has none.
pub fn url_port(line: &str) -> u16 {
    line.split_whitespace()
        .find_map(|w| w.strip_prefix("http://"))
        .and_then(|rest| rest.split('/').next())
        .and_then(|authority| authority.rsplit(':').next())
        .and_then(|port| port.parse().ok())
        .unwrap_or_else(|| panic!("a URL with a port in {line:?}"))
}

/// A started `forge` (or other) process that is stopped when the test ends, however it ends:
/// SIGTERM first (so forge shuts its Chromium down and saves what it keeps, such as login
/// profiles), up to 15 s for it to exit, then SIGKILL.
pub struct Terminating(pub std::process::Child);

impl Drop for Terminating {
    fn drop(&mut self) {
        // Already ended and reaped: its pid may be another process's now.
        if let Ok(Some(_)) = self.0.try_wait() {
            return;
        }
        let _ = std::process::Command::new("kill")
            .arg("-TERM")
            .arg(self.0.id().to_string())
            .status();
        for _ in 0..150 {
            if let Ok(Some(_)) = self.0.try_wait() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
