//! The Lightpanda binary an image ships when an agent uses `browser.engine: lightpanda`: found on
//! the build host the way forge finds it at run time (`FORGE_LIGHTPANDA_BIN`, else `lightpanda`
//! on PATH), checked to be the program itself (an ELF executable, not pip's console script that
//! starts it), asked its version, hashed, and copied unmodified into the build context next to its
//! licence (AGPL-3.0, the text embedded from `licenses/lightpanda/`) and a note saying where its
//! source is. It stays a separate program in the image: forge starts it and speaks CDP to it,
//! never links it (docs/browser.md, "Licence").

use std::ffi::OsString;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::error::BuildError;

/// The variable naming the Lightpanda binary (the same one forge reads at run time).
pub const LIGHTPANDA_BIN_VAR: &str = "FORGE_LIGHTPANDA_BIN";
/// Where the image keeps Lightpanda, its licence and its source note.
pub const LIGHTPANDA_IMAGE_DIR: &str = "/opt/lightpanda";
/// The binary in the image; the image sets `FORGE_LIGHTPANDA_BIN` to it.
pub const LIGHTPANDA_IMAGE_BIN: &str = "/opt/lightpanda/lightpanda";
/// Lightpanda's licence (SPDX), as its repository's LICENSING.md states it.
pub const LIGHTPANDA_LICENSE_ID: &str = "AGPL-3.0-only";
/// The text of that licence, shipped next to the binary (the PyPI wheel's dist-info carries only
/// the Python client's Apache-2.0 licence, not the browser's).
pub const LIGHTPANDA_LICENSE_TEXT: &str = include_str!("../licenses/lightpanda/AGPL-3.0.txt");
/// Where Lightpanda's source is published.
pub const LIGHTPANDA_SOURCE_URL: &str = "https://github.com/lightpanda-io/browser";
/// How long `lightpanda version` may take before the build gives up on it.
const VERSION_TIMEOUT: Duration = Duration::from_secs(20);
/// The fix for a binary that cannot be used, for the wheel's install layout.
const WHEEL_FIX: &str = "point FORGE_LIGHTPANDA_BIN (or --lightpanda-bin) at the Lightpanda \
     binary itself; for the PyPI wheel: FORGE_LIGHTPANDA_BIN=\"$(python3 -c 'from lightpanda.client \
     import find_binary; print(find_binary())')\" forge build";

/// The Lightpanda binary going into the image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LightpandaBinary {
    /// Where it is on the build host.
    pub path: PathBuf,
    /// What `lightpanda version` prints (e.g. `1.0.2`).
    pub version: String,
    /// SHA-256 of the file, hex.
    pub sha256: String,
}

fn problem(problem: impl Into<String>, fix: impl Into<String>) -> BuildError {
    BuildError::Lightpanda {
        problem: problem.into(),
        fix: fix.into(),
    }
}

/// The binary to ship: `explicit` (`--lightpanda-bin` or `FORGE_LIGHTPANDA_BIN`) when given (it
/// must exist; no fallback then), else `lightpanda` in `path_var`'s directories.
pub fn find_lightpanda(
    explicit: Option<PathBuf>,
    path_var: Option<OsString>,
) -> Result<PathBuf, BuildError> {
    if let Some(bin) = explicit.filter(|p| !p.as_os_str().is_empty()) {
        if forge_which::is_executable(&bin) {
            return Ok(bin);
        }
        return Err(problem(
            format!(
                "{} (from {LIGHTPANDA_BIN_VAR} or --lightpanda-bin) is not an executable file",
                bin.display()
            ),
            WHEEL_FIX,
        ));
    }
    let dirs: Vec<PathBuf> = path_var
        .map(|p| {
            std::env::split_paths(&p)
                .filter(|d| d.is_absolute())
                .collect()
        })
        .unwrap_or_default();
    forge_which::find_in("lightpanda", &dirs).ok_or_else(|| {
        problem(
            format!(
                "the agent uses browser.engine: lightpanda, but no Lightpanda binary was found \
                 (looked at {LIGHTPANDA_BIN_VAR}, then `lightpanda` on PATH)"
            ),
            format!("install it (`pip install lightpanda==1.0.2`; scripts/install-deps.sh browser does this), then {WHEEL_FIX}"),
        )
    })
}

/// Checks `path` is the Lightpanda program (an ELF executable: pip's `lightpanda` command and
/// pyenv's shim are scripts that start it and cannot run in the image), runs `path version`
/// (a cleared environment, telemetry off, at most [`VERSION_TIMEOUT`]) and hashes it.
pub fn inspect_lightpanda(path: &Path) -> Result<LightpandaBinary, BuildError> {
    let mut head = [0u8; 4];
    let read = std::fs::File::open(path)
        .and_then(|mut f| f.read(&mut head))
        .map_err(|e| BuildError::io(path, "reading the Lightpanda binary", e))?;
    if read < 4 || head != *b"\x7fELF" {
        let what = if head.starts_with(b"#!") {
            "a script (pip's `lightpanda` command or a pyenv shim, which start the real binary), \
             not the Lightpanda binary; the image has no Python to run it"
        } else {
            "not a Linux executable (no ELF header)"
        };
        return Err(problem(format!("{}: {what}", path.display()), WHEEL_FIX));
    }
    let version = lightpanda_version(path)?;
    let sha256 = crate::digest::sha256_file(path)?;
    Ok(LightpandaBinary {
        path: path.to_path_buf(),
        version,
        sha256,
    })
}

/// `path version`'s first line, checked to be a plain version (it becomes a label value).
fn lightpanda_version(path: &Path) -> Result<String, BuildError> {
    let asked = format!("`{} version`", path.display());
    let mut child = Command::new(path)
        .arg("version")
        .env_clear()
        .env("LIGHTPANDA_DISABLE_TELEMETRY", "true")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| problem(format!("{asked} could not start: {e}"), WHEEL_FIX))?;
    let started = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if started.elapsed() < VERSION_TIMEOUT => {
                std::thread::sleep(Duration::from_millis(20))
            }
            Ok(None) => {
                // Best effort: the child is ours and is abandoned either way.
                let _ = child.kill();
                let _ = child.wait();
                return Err(problem(
                    format!("{asked} did not finish in {} s", VERSION_TIMEOUT.as_secs()),
                    WHEEL_FIX,
                ));
            }
            Err(e) => return Err(problem(format!("{asked}: {e}"), WHEEL_FIX)),
        }
    };
    let mut out = String::new();
    if let Some(mut stdout) = child.stdout.take() {
        // Bounded: the version is one short line.
        let _ = stdout.by_ref().take(4096).read_to_string(&mut out);
    }
    let version = out.lines().next().unwrap_or("").trim().to_string();
    if !status.success() || !is_plain_version(&version) {
        return Err(problem(
            format!("{asked} exited with {status} and printed {version:?}, not a version"),
            WHEEL_FIX,
        ));
    }
    Ok(version)
}

/// A version safe to paste into a Dockerfile label and a file name: 1 to 64 of
/// `[0-9A-Za-z.+-]`, starting with a letter or digit.
pub(crate) fn is_plain_version(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.starts_with(|c: char| c.is_ascii_alphanumeric())
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '+' | '-'))
}

/// The machine (`e_machine`) an ELF file is built for, when `path` starts with a well-formed
/// ELF identification (class 32/64-bit, either byte order, version 1); `None` otherwise.
pub(crate) fn elf_machine(path: &Path) -> Option<u16> {
    let mut head = [0u8; 20];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut head))
        .ok()?;
    let well_formed = head[..4] == *b"\x7fELF"
        && matches!(head[4], 1 | 2)
        && matches!(head[5], 1 | 2)
        && head[6] == 1;
    if !well_formed {
        return None;
    }
    let bytes = [head[18], head[19]];
    Some(if head[5] == 1 {
        u16::from_le_bytes(bytes)
    } else {
        u16::from_be_bytes(bytes)
    })
}

/// A name for an ELF machine number (the ones forge images run on, else the number).
pub(crate) fn machine_name(m: u16) -> String {
    match m {
        0x3E => "x86-64".to_string(),
        0xB7 => "arm64 (aarch64)".to_string(),
        0x03 => "x86 (32-bit)".to_string(),
        0x28 => "arm (32-bit)".to_string(),
        other => format!("ELF machine {other:#x}"),
    }
}

/// `SOURCE.md` next to the binary in the image: what it is, its hash, its licence, where its
/// Corresponding Source is.
pub(crate) fn source_note(bin: &LightpandaBinary) -> String {
    format!(
        "# Lightpanda {version}\n\
         \n\
         `lightpanda` in this directory is the Lightpanda browser, version {version}, copied\n\
         unmodified by `forge build` from the build host.\n\
         sha256: {sha}\n\
         \n\
         forge runs it as a separate program and talks to it over the Chrome DevTools\n\
         Protocol; it is not linked into forge.\n\
         \n\
         Licence: {license} (the full text is in `LICENSE` in this directory).\n\
         \n\
         Source: Lightpanda's source is published at {url};\n\
         this binary's Corresponding Source is its release for version {version} (the version\n\
         `lightpanda version` prints). Whoever conveys this image must offer that source to\n\
         the image's recipients (AGPL-3.0 section 6); see forge's docs/browser.md, \"Licence\".\n",
        version = bin.version,
        sha = bin.sha256,
        license = LIGHTPANDA_LICENSE_ID,
        url = LIGHTPANDA_SOURCE_URL,
    )
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn exe(dir: &Path, name: &str, body: &[u8]) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, body).expect("write");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        p
    }

    #[test]
    fn an_explicit_binary_must_exist_and_path_is_the_fallback() {
        let err = find_lightpanda(Some("/nonexistent/lp".into()), None)
            .expect_err("a missing explicit binary is an error")
            .to_string();
        assert!(
            err.contains("/nonexistent/lp (from FORGE_LIGHTPANDA_BIN"),
            "{err}"
        );
        assert!(err.contains("fix:"), "{err}");
        let dir = tempfile::tempdir().expect("tempdir");
        let none = find_lightpanda(None, Some(dir.path().as_os_str().to_owned()))
            .expect_err("an empty PATH dir has no lightpanda")
            .to_string();
        assert!(none.contains("pip install lightpanda"), "{none}");
        let found = exe(dir.path(), "lightpanda", b"#!/bin/sh\n");
        assert_eq!(
            find_lightpanda(None, Some(dir.path().as_os_str().to_owned())).expect("found"),
            found
        );
    }

    #[test]
    fn a_script_wrapper_is_refused_with_the_wheel_fix() {
        let dir = tempfile::tempdir().expect("tempdir");
        let script = exe(
            dir.path(),
            "lightpanda",
            b"#!/usr/bin/python3\nfrom lightpanda.cli import main\nmain()\n",
        );
        let err = inspect_lightpanda(&script)
            .expect_err("a script is not the binary")
            .to_string();
        assert!(err.contains("a script"), "{err}");
        assert!(err.contains("find_binary"), "{err}");
        let text = exe(dir.path(), "notes", b"hello");
        let err = inspect_lightpanda(&text).expect_err("not ELF").to_string();
        assert!(err.contains("no ELF header"), "{err}");
    }

    #[test]
    fn elf_machines_are_read_from_well_formed_headers_only() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut x86 = vec![0x7f, b'E', b'L', b'F', 2, 1, 1];
        x86.resize(18, 0);
        x86.extend([0x3E, 0x00]);
        let mut arm = x86.clone();
        arm[18] = 0xB7;
        let a = exe(dir.path(), "x86", &x86);
        let b = exe(dir.path(), "arm", &arm);
        let c = exe(
            dir.path(),
            "standin",
            b"\x7fELF stand-in for a release build\n",
        );
        assert_eq!(elf_machine(&a), Some(0x3E));
        assert_eq!(elf_machine(&b), Some(0xB7));
        assert_eq!(elf_machine(&c), None, "not a well-formed identification");
        assert_eq!(machine_name(0xB7), "arm64 (aarch64)");
    }

    #[test]
    fn versions_pasted_into_labels_are_plain() {
        for ok in ["1.0.2", "0.3.7", "v1.2.3-rc.1", "1.0.2+abc", "nightly"] {
            assert!(is_plain_version(ok), "{ok}");
        }
        for bad in ["", "nightly build", "1.0\"", "$(id)", "-1", &"1".repeat(65)] {
            assert!(!is_plain_version(bad), "{bad}");
        }
    }
}
