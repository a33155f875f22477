//! Chromium's lifeline: the browser process dies with forge, however forge ends (`kill -9`
//! included), so no Chromium outlives the process that started it.
//!
//! - The browser process gets a parent-death signal (`PR_SET_PDEATHSIG`, SIGKILL), set after the
//!   fork, just before the exec (after the confinement hook, when there is one).
//! - Linux sends that signal when the *thread* that forked the child ends, not the process; tokio's
//!   threads come and go (blocking-pool threads exit when idle, a runtime's workers end with it,
//!   a test's runtime with the test). So every Chromium is forked by one thread of its own,
//!   started on first use and never ended ([`spawn`]): it ends only with the process.
//! - Chromium's own children (zygotes, renderers, GPU and utility processes) and its two crashpad
//!   handlers (detached: parent 1, groups of their own) end when the browser process does (their
//!   IPC channel to it closes): seen all gone within 0.6 s of a SIGKILL of the browser process
//!   alone, Chromium 156.
//! - The confinement (forge-egress `confine`: a pre-exec hook, no process of its own) and the
//!   DevTools relay (`devtools_relay.rs`: a task in forge) live inside forge and end with it.

use std::io;
use std::os::unix::process::CommandExt;
use std::sync::mpsc;
use std::sync::OnceLock;

type Job = Box<dyn FnOnce() + Send>;

/// The spawner thread's queue (the thread is started with it and runs as long as the process).
fn spawner() -> io::Result<&'static mpsc::Sender<Job>> {
    static SPAWNER: OnceLock<Result<mpsc::Sender<Job>, String>> = OnceLock::new();
    SPAWNER
        .get_or_init(|| {
            let (tx, rx) = mpsc::channel::<Job>();
            std::thread::Builder::new()
                .name("forge-chromium-spawner".into())
                .spawn(move || {
                    // The sender lives in a static, so `recv` never fails: this thread never
                    // ends before the process does. A job that panics must not end it either
                    // (every Chromium it forked would get its parent-death signal).
                    while let Ok(job) = rx.recv() {
                        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
                    }
                })
                .map(|_| tx)
                .map_err(|e| format!("cannot start the thread that starts the browser: {e}"))
        })
        .as_ref()
        .map_err(|e| io::Error::other(e.clone()))
}

/// Make the child `cmd` starts die (SIGKILL) when the thread forking it ends. Hooks run in the
/// order they were added: add this one last, after the confinement's.
fn set_parent_death_signal(cmd: &mut std::process::Command) {
    // SAFETY: getpid has no preconditions.
    let parent = unsafe { libc::getpid() };
    // SAFETY: the hook runs only async-signal-safe syscalls (prctl, getppid) on copied values.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(
                libc::PR_SET_PDEATHSIG,
                libc::SIGKILL as libc::c_ulong,
                0 as libc::c_ulong,
                0 as libc::c_ulong,
                0 as libc::c_ulong,
            ) != 0
            {
                return Err(io::Error::last_os_error());
            }
            // forge ended between the fork and the prctl: the signal will not come, so do not
            // start at all.
            if libc::getppid() != parent {
                return Err(io::Error::from_raw_os_error(libc::ESRCH));
            }
            Ok(())
        });
    }
}

/// Start `cmd` from the spawner thread with a parent-death signal: the child is killed when
/// forge ends. The child is registered with the caller's tokio runtime (its `wait`, its
/// `kill_on_drop`), as a plain `spawn` there would.
pub(crate) async fn spawn(mut cmd: tokio::process::Command) -> io::Result<tokio::process::Child> {
    set_parent_death_signal(cmd.as_std_mut());
    let runtime = tokio::runtime::Handle::current();
    let (tx, rx) = tokio::sync::oneshot::channel();
    let job: Job = Box::new(move || {
        let _in_runtime = runtime.enter();
        let _ = tx.send(cmd.spawn());
    });
    spawner()?
        .send(job)
        .map_err(|_| io::Error::other("the thread that starts the browser has ended"))?;
    rx.await
        .map_err(|_| io::Error::other("the thread that starts the browser dropped the request"))?
}
