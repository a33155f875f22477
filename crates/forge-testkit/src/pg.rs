//! A PostgreSQL server of a test's own: Debian's `postgresql` binaries (scripts/install-deps.sh
//! installs them), `initdb` into a temp dir (as the `postgres` user when the test runs as root,
//! since initdb refuses root), `pg_ctl start` on a free loopback port with its unix socket in the
//! same temp dir; stopped (immediate mode) and removed when dropped. Moved here from
//! forge-runtime/tests/support (the state-store tests and forge-cli's load bench use it).

use std::path::{Path, PathBuf};
use std::process::Command;

/// A PostgreSQL server of the test's own, in a temp dir, on a loopback port.
pub struct PgServer {
    bin: PathBuf,
    data: PathBuf,
    /// `postgres://forge:PASSWORD@127.0.0.1:PORT/postgres`.
    pub url: String,
    /// The loopback port.
    pub port: u16,
    as_postgres: bool,
    _dir: tempfile::TempDir,
}

pub const PG_PASSWORD: &str = "pw-Forge-test-7x";

fn pg_bin_dir() -> PathBuf {
    let root = Path::new("/usr/lib/postgresql");
    let mut versions: Vec<PathBuf> = std::fs::read_dir(root)
        .map(|d| d.flatten().map(|e| e.path().join("bin")).collect())
        .unwrap_or_default();
    versions.retain(|p| p.join("initdb").is_file());
    versions.sort();
    versions.pop().unwrap_or_else(|| {
        panic!(
            "PostgreSQL server binaries not found under /usr/lib/postgresql/*/bin; \
             install Debian's postgresql (scripts/install-deps.sh postgres)"
        )
    })
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

fn run(cmd: &mut Command, what: &str) {
    let out = cmd.output().unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        out.status.success(),
        "{what} failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

impl PgServer {
    /// initdb into a temp dir and start the server on a free loopback port, with `fsync=off`
    /// (tests want speed, not durability).
    pub fn start() -> PgServer {
        Self::start_with(false)
    }

    /// [`PgServer::start`] with PostgreSQL's default `fsync=on`, for benchmarks that measure what
    /// a real server costs.
    pub fn start_durable() -> PgServer {
        Self::start_with(true)
    }

    fn start_with(fsync: bool) -> PgServer {
        let bin = pg_bin_dir();
        let dir = tempfile::tempdir().expect("tempdir");
        // initdb refuses to run as root: as root, the server runs as the `postgres` user.
        let as_postgres = is_root();
        if as_postgres {
            let uid = id_of("-u");
            let gid = id_of("-g");
            std::os::unix::fs::chown(dir.path(), Some(uid), Some(gid)).expect("chown");
        }
        let data = dir.path().join("data");
        let pwfile = dir.path().join("pw");
        std::fs::write(&pwfile, PG_PASSWORD).expect("pwfile");
        if as_postgres {
            std::os::unix::fs::chown(&pwfile, Some(id_of("-u")), Some(id_of("-g"))).expect("chown");
        }
        let port = free_port();
        let cmd = |prog: &str| {
            let mut c = if as_postgres {
                let mut c = Command::new("runuser");
                c.args(["-u", "postgres", "--"]).arg(bin.join(prog));
                c
            } else {
                Command::new(bin.join(prog))
            };
            c.env_clear()
                .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
                .env("LC_ALL", "C");
            c
        };
        run(
            cmd("initdb")
                .arg("-D")
                .arg(&data)
                .args([
                    "-U",
                    "forge",
                    "--auth=scram-sha-256",
                    "--no-sync",
                    "-E",
                    "UTF8",
                ])
                .arg(format!("--pwfile={}", pwfile.display())),
            "initdb",
        );
        run(
            cmd("pg_ctl")
                .arg("-D")
                .arg(&data)
                .arg("-l")
                .arg(dir.path().join("log"))
                .args(["-w", "-t", "60", "start", "-o"])
                .arg(format!(
                    "-p {port} -c listen_addresses=127.0.0.1 -c unix_socket_directories={} -c fsync={}",
                    dir.path().display(),
                    if fsync { "on" } else { "off" }
                )),
            "pg_ctl start",
        );
        PgServer {
            url: format!("postgres://forge:{PG_PASSWORD}@127.0.0.1:{port}/postgres"),
            bin,
            data,
            port,
            as_postgres,
            _dir: dir,
        }
    }
}

impl Drop for PgServer {
    fn drop(&mut self) {
        let mut c = if self.as_postgres {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"])
                .arg(self.bin.join("pg_ctl"));
            c
        } else {
            Command::new(self.bin.join("pg_ctl"))
        };
        let _ = c
            .arg("-D")
            .arg(&self.data)
            .args(["-m", "immediate", "-w", "-t", "30", "stop"])
            .output();
    }
}

fn is_root() -> bool {
    // Our effective uid, from /proc.
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(2).map(|u| u == "0"))
        })
        .unwrap_or(false)
}

fn id_of(flag: &str) -> u32 {
    let out = Command::new("id")
        .args([flag, "postgres"])
        .output()
        .expect("id postgres");
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .expect("the postgres user exists (Debian's postgresql package creates it)")
}
