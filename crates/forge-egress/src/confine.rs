//! Network confinement (Linux): a child process that can reach only forge's egress proxy.
//!
//! The wall: the child, after fork and before exec, enters a network namespace of its own
//! (a user + network namespace when forge is not root, a plain network namespace as root), brings
//! up its `lo`, binds TCP listeners on 127.0.0.1 there (3128 for the proxy, more on request) and
//! creates unconnected TCP sockets, and hands all of them to forge over a socketpair
//! (SCM_RIGHTS). forge serves the listeners with the same proxy ([`crate::proxy::ProxyEntry`]):
//! the sockets stay in the child's namespace, so the only thing the child can reach is a listener
//! that forge's proxy answers, with forge's one policy. Nothing else exists there: no other
//! interface, no route, not even the host's loopback.
//!
//! Invariants kept here:
//! - The pre-exec hook is async-signal-safe: every path, byte string and buffer is prepared before
//!   the fork; after it only raw syscalls run (no allocation, no locks).
//! - Every descriptor made inside the namespace is close-on-exec: the program never holds the
//!   proxy's listening sockets or the socketpair.
//! - A child that fails to enter the namespace is never started (the hook's error fails the spawn,
//!   naming the step); there is no silent fallback per child. The fallback (proxy-only) is decided
//!   once per process from [`availability`] and shown to the user.
//! - [`FORCE_ENV`] (`FORGE_CONFINEMENT_UNAVAILABLE=<reason>`) forces proxy-only mode, for tests and
//!   for users whose platform misbehaves.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::OnceLock;

use crate::proxy::{ListenerGuard, ProxyEntry};

/// The port of the proxy listener inside a confined child's namespace.
pub const CHILD_PROXY_PORT: u16 = 3128;
/// The proxy URL a confined child gets in `HTTP(S)_PROXY`.
pub const CHILD_PROXY_URL: &str = "http://127.0.0.1:3128";
/// Setting this variable (to a reason) forces proxy-only mode.
pub const FORCE_ENV: &str = "FORGE_CONFINEMENT_UNAVAILABLE";
/// Most descriptors handed over in one message (the kernel's SCM_MAX_FD is 253).
const MAX_FDS: usize = 64;

/// How a confined child enters its namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NsKind {
    /// A plain network namespace (forge runs with CAP_SYS_ADMIN, e.g. as root).
    Net,
    /// A user namespace (mapping only forge's own uid and gid) with a network namespace in it;
    /// needs no privilege where unprivileged user namespaces are allowed.
    UserNet,
}

impl NsKind {
    /// A short name for messages.
    pub fn describe(&self) -> &'static str {
        match self {
            NsKind::Net => "network namespace",
            NsKind::UserNet => "user + network namespace",
        }
    }
}

/// Whether confinement can be had in this process, and why not when it cannot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Availability {
    /// Children can be confined this way.
    Namespace(NsKind),
    /// Only the proxy variables keep children on the proxy; the reason says why.
    ProxyOnly(String),
}

/// What this process can do: [`FORCE_ENV`] when set (read on every call), else the probe's cached
/// result (the probe runs once per process).
pub fn availability() -> Availability {
    if let Some(reason) = std::env::var_os(FORCE_ENV).filter(|v| !v.is_empty()) {
        return Availability::ProxyOnly(format!(
            "{FORCE_ENV} is set: {}",
            reason.to_string_lossy()
        ));
    }
    static PROBED: OnceLock<Availability> = OnceLock::new();
    PROBED
        .get_or_init(|| match probe() {
            Ok(kind) => Availability::Namespace(kind),
            Err(reason) => Availability::ProxyOnly(reason),
        })
        .clone()
}

/// Try, in a forked child that exits at once, what a confined spawn does: enter the namespace,
/// bring `lo` up, bind 127.0.0.1:3128. Root tries a plain network namespace first, then (as
/// everyone else) a user + network namespace. Not cached: see [`availability`].
pub fn probe() -> Result<NsKind, String> {
    #[cfg(not(target_os = "linux"))]
    {
        return Err("network namespaces exist only on Linux".into());
    }
    #[cfg(target_os = "linux")]
    {
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        let kinds: &[NsKind] = if root {
            &[NsKind::Net, NsKind::UserNet]
        } else {
            &[NsKind::UserNet]
        };
        let mut why = Vec::new();
        for kind in kinds {
            match probe_kind(*kind) {
                Ok(()) => return Ok(*kind),
                Err(e) => why.push(e),
            }
        }
        Err(why.join("; "))
    }
}

/// What to make inside a child's namespace.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Ports to listen on at 127.0.0.1 (the first is normally [`CHILD_PROXY_PORT`]).
    pub listen_ports: Vec<u16>,
    /// Unconnected TCP sockets created in the namespace: forge can later `connect` one of them to
    /// a port inside (e.g. Chromium's DevTools), from outside, without entering the namespace.
    pub dial_sockets: usize,
}

impl Plan {
    /// Only the proxy listener (cli_execute, skill scripts).
    pub fn proxy_only() -> Self {
        Plan {
            listen_ports: vec![CHILD_PROXY_PORT],
            dial_sockets: 0,
        }
    }
}

/// What a confined child handed over: its listeners (port, socket) and dial sockets, all living in
/// its namespace.
#[derive(Debug)]
pub struct Inside {
    pub listeners: Vec<(u16, std::net::TcpListener)>,
    /// Unconnected TCP sockets of the namespace (see [`Plan::dial_sockets`]).
    pub dial: Vec<OwnedFd>,
}

/// Why confining a child failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfineError {
    #[error("the plan asks for {0} descriptors; at most {MAX_FDS} can be handed over")]
    TooManyFds(usize),
    #[error("cannot prepare the confinement of a child: {0}")]
    Prepare(io::Error),
    #[error("the confined child did not hand over its sockets: {0}")]
    Handover(String),
    #[error("confining the child failed at {step}: {error}")]
    Step {
        step: &'static str,
        error: io::Error,
    },
}

/// The steps of entering a namespace, for error messages (index = step code).
const STEPS: &[&str] = &[
    "(none)",
    "unshare(CLONE_NEWNET)",
    "unshare(CLONE_NEWUSER|CLONE_NEWNET)",
    "writing /proc/self/setgroups",
    "writing /proc/self/uid_map",
    "writing /proc/self/gid_map",
    "bringing lo up (SIOCSIFFLAGS)",
    "binding a listener on 127.0.0.1",
    "creating a socket",
    "handing the sockets over (sendmsg SCM_RIGHTS)",
];
const STEP_UNSHARE_NET: u8 = 1;
const STEP_UNSHARE_USER: u8 = 2;
const STEP_SETGROUPS: u8 = 3;
const STEP_UID_MAP: u8 = 4;
const STEP_GID_MAP: u8 = 5;
const STEP_LO: u8 = 6;
const STEP_BIND: u8 = 7;
const STEP_SOCKET: u8 = 8;
const STEP_SEND: u8 = 9;

fn step_name(code: u8) -> &'static str {
    STEPS
        .get(code as usize)
        .copied()
        .unwrap_or("an unknown step")
}

/// Everything the child needs, prepared before the fork (no allocation after it).
struct Prep {
    kind: NsKind,
    setgroups: CString,
    uid_map: CString,
    gid_map: CString,
    uid_line: Vec<u8>,
    gid_line: Vec<u8>,
    ports: Vec<u16>,
    dial: usize,
    /// Descriptors made in the child (filled after the fork; capacity reserved before).
    fds: Vec<RawFd>,
    /// The control-message buffer for sendmsg (u64 for cmsghdr alignment).
    cmsg: Vec<u64>,
}

impl Prep {
    fn new(kind: NsKind, plan: &Plan) -> Result<Prep, ConfineError> {
        let n = plan.listen_ports.len() + plan.dial_sockets;
        if n > MAX_FDS {
            return Err(ConfineError::TooManyFds(n));
        }
        // SAFETY: getuid/getgid have no preconditions.
        let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
        let c = |s: &str| CString::new(s).map_err(|e| ConfineError::Prepare(io::Error::other(e)));
        // SAFETY: CMSG_SPACE is a pure size computation.
        let space = unsafe { libc::CMSG_SPACE((MAX_FDS * std::mem::size_of::<RawFd>()) as u32) };
        Ok(Prep {
            kind,
            setgroups: c("/proc/self/setgroups")?,
            uid_map: c("/proc/self/uid_map")?,
            gid_map: c("/proc/self/gid_map")?,
            uid_line: format!("{uid} {uid} 1\n").into_bytes(),
            gid_line: format!("{gid} {gid} 1\n").into_bytes(),
            ports: plan.listen_ports.clone(),
            dial: plan.dial_sockets,
            fds: Vec::with_capacity(MAX_FDS),
            cmsg: vec![0u64; (space as usize).div_ceil(8)],
        })
    }
}

/// The last errno (async-signal-safe).
fn errno() -> i32 {
    io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// Write `bytes` to the file at `path` (async-signal-safe).
fn write_file(path: &CString, bytes: &[u8]) -> Result<(), i32> {
    // SAFETY: path is a valid NUL-terminated string; the fd is closed on every path.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return Err(errno());
        }
        let n = libc::write(fd, bytes.as_ptr().cast(), bytes.len());
        let e = errno();
        libc::close(fd);
        if n != bytes.len() as isize {
            return Err(if e == 0 { libc::EIO } else { e });
        }
    }
    Ok(())
}

/// Enter the namespace, bring `lo` up, make the listeners and sockets (pushed to `prep.fds`).
/// Runs in a forked child: async-signal-safe only. Returns (step, errno) on failure.
fn enter(prep: &mut Prep) -> Result<(), (u8, i32)> {
    // SAFETY (whole function): raw syscalls on values prepared before the fork; every pointer
    // handed to the kernel points into `prep` or the stack and outlives the call.
    unsafe {
        match prep.kind {
            NsKind::Net => {
                if libc::unshare(libc::CLONE_NEWNET) != 0 {
                    return Err((STEP_UNSHARE_NET, errno()));
                }
            }
            NsKind::UserNet => {
                if libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNET) != 0 {
                    return Err((STEP_UNSHARE_USER, errno()));
                }
                write_file(&prep.setgroups, b"deny").map_err(|e| (STEP_SETGROUPS, e))?;
                write_file(&prep.uid_map, &prep.uid_line).map_err(|e| (STEP_UID_MAP, e))?;
                write_file(&prep.gid_map, &prep.gid_line).map_err(|e| (STEP_GID_MAP, e))?;
            }
        }
        // lo up.
        let s = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        if s < 0 {
            return Err((STEP_LO, errno()));
        }
        let mut req: libc::ifreq = std::mem::zeroed();
        for (d, b) in req.ifr_name.iter_mut().zip(b"lo\0") {
            *d = *b as libc::c_char;
        }
        if libc::ioctl(s, libc::SIOCGIFFLAGS as _, &mut req) != 0 {
            let e = errno();
            libc::close(s);
            return Err((STEP_LO, e));
        }
        req.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
        if libc::ioctl(s, libc::SIOCSIFFLAGS as _, &req) != 0 {
            let e = errno();
            libc::close(s);
            return Err((STEP_LO, e));
        }
        libc::close(s);
        for i in 0..prep.ports.len() {
            let port = prep.ports[i];
            let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
            if fd < 0 {
                return Err((STEP_BIND, errno()));
            }
            prep.fds.push(fd);
            let one: libc::c_int = 1;
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_REUSEADDR,
                (&one as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            );
            let mut addr: libc::sockaddr_in = std::mem::zeroed();
            addr.sin_family = libc::AF_INET as libc::sa_family_t;
            addr.sin_port = port.to_be();
            addr.sin_addr.s_addr = u32::from(std::net::Ipv4Addr::LOCALHOST).to_be();
            if libc::bind(
                fd,
                (&addr as *const libc::sockaddr_in).cast(),
                std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
            ) != 0
                || libc::listen(fd, 512) != 0
            {
                return Err((STEP_BIND, errno()));
            }
        }
        for _ in 0..prep.dial {
            let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
            if fd < 0 {
                return Err((STEP_SOCKET, errno()));
            }
            prep.fds.push(fd);
        }
    }
    Ok(())
}

/// Send `fds` over `sock` with SCM_RIGHTS (async-signal-safe; `cmsg` prepared before the fork).
fn send_fds(sock: RawFd, fds: &[RawFd], cmsg: &mut [u64]) -> Result<(), i32> {
    // SAFETY: the control buffer is large enough for MAX_FDS descriptors (Prep::new) and
    // fds.len() <= MAX_FDS; all pointers outlive the call.
    unsafe {
        let mut byte = [b'F'];
        let mut iov = libc::iovec {
            iov_base: byte.as_mut_ptr().cast(),
            iov_len: 1,
        };
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        let data_len = std::mem::size_of_val(fds);
        if !fds.is_empty() {
            msg.msg_control = cmsg.as_mut_ptr().cast();
            msg.msg_controllen = libc::CMSG_SPACE(data_len as u32) as _;
            let hdr = libc::CMSG_FIRSTHDR(&msg);
            if hdr.is_null() {
                return Err(libc::EINVAL);
            }
            (*hdr).cmsg_level = libc::SOL_SOCKET;
            (*hdr).cmsg_type = libc::SCM_RIGHTS;
            (*hdr).cmsg_len = libc::CMSG_LEN(data_len as u32) as _;
            std::ptr::copy_nonoverlapping(
                fds.as_ptr().cast::<u8>(),
                libc::CMSG_DATA(hdr),
                data_len,
            );
        }
        if libc::sendmsg(sock, &msg, libc::MSG_NOSIGNAL) < 0 {
            return Err(errno());
        }
    }
    Ok(())
}

/// Receive one message with up to MAX_FDS descriptors, without waiting. Returns the payload's
/// first byte (0 for EOF) and the descriptors.
fn recv_fds(sock: RawFd) -> io::Result<(u8, Vec<OwnedFd>)> {
    let mut out = Vec::new();
    // SAFETY: buffers sized for MAX_FDS; the kernel writes within msg_controllen; each received
    // descriptor is new and owned by this process, wrapped once in an OwnedFd.
    unsafe {
        let space = libc::CMSG_SPACE((MAX_FDS * std::mem::size_of::<RawFd>()) as u32) as usize;
        let mut cmsg = vec![0u64; space.div_ceil(8)];
        let mut byte = [0u8; 1];
        let mut iov = libc::iovec {
            iov_base: byte.as_mut_ptr().cast(),
            iov_len: 1,
        };
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = cmsg.as_mut_ptr().cast();
        msg.msg_controllen = space as _;
        let n = libc::recvmsg(sock, &mut msg, libc::MSG_DONTWAIT | libc::MSG_CMSG_CLOEXEC);
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut hdr = libc::CMSG_FIRSTHDR(&msg);
        while !hdr.is_null() {
            if (*hdr).cmsg_level == libc::SOL_SOCKET && (*hdr).cmsg_type == libc::SCM_RIGHTS {
                let data = libc::CMSG_DATA(hdr);
                let len = ((*hdr).cmsg_len as usize).saturating_sub(data as usize - hdr as usize);
                let count = len / std::mem::size_of::<RawFd>();
                for i in 0..count {
                    let fd = std::ptr::read_unaligned(data.cast::<RawFd>().add(i));
                    out.push(OwnedFd::from_raw_fd(fd));
                }
            }
            hdr = libc::CMSG_NXTHDR(&msg, hdr);
        }
        if msg.msg_flags & libc::MSG_CTRUNC != 0 {
            return Err(io::Error::other("descriptors were truncated (MSG_CTRUNC)"));
        }
        Ok((if n == 0 { 0 } else { byte[0] }, out))
    }
}

fn socketpair() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: fds has room for the two descriptors socketpair writes.
    let r = unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just created and are owned here.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// The parent's side of a confined spawn: after `spawn()` returned, [`Handover::receive`] takes
/// what the child made in its namespace.
pub struct Handover {
    parent: OwnedFd,
    child: Option<OwnedFd>,
    plan: Plan,
}

/// Install the pre-exec hook that confines the child `cmd` will start, as `kind` says. Call
/// [`Handover::receive`] right after a successful spawn, [`Handover::failure`] after a failed one.
pub fn install(
    cmd: &mut std::process::Command,
    kind: NsKind,
    plan: &Plan,
) -> Result<Handover, ConfineError> {
    use std::os::unix::process::CommandExt;
    let mut prep = Prep::new(kind, plan)?;
    let (parent, child) = socketpair().map_err(ConfineError::Prepare)?;
    let child_fd = child.as_raw_fd();
    let hook = move || -> io::Result<()> {
        prep.fds.clear();
        let r = enter(&mut prep).and_then(|()| {
            let Prep { fds, cmsg, .. } = &mut prep;
            send_fds(child_fd, fds, cmsg).map_err(|e| (STEP_SEND, e))
        });
        // The descriptors are the parent's now (or useless): close them here so the program never
        // holds them, close-on-exec notwithstanding.
        for fd in prep.fds.iter() {
            // SAFETY: descriptors this child created above.
            unsafe {
                libc::close(*fd);
            }
        }
        match r {
            Ok(()) => Ok(()),
            Err((step, e)) => {
                // Tell the parent which step failed (one byte, no descriptors), then fail the spawn.
                let code = [step];
                // SAFETY: plain send on the socketpair with a stack buffer.
                unsafe {
                    libc::send(child_fd, code.as_ptr().cast(), 1, libc::MSG_NOSIGNAL);
                }
                Err(io::Error::from_raw_os_error(e))
            }
        }
    };
    // SAFETY: the hook only runs async-signal-safe code (see `enter`, `send_fds`): everything it
    // touches was allocated before the fork, and `prep.fds` never grows past its capacity
    // (MAX_FDS, checked in Prep::new).
    unsafe {
        cmd.pre_exec(hook);
    }
    Ok(Handover {
        parent,
        child: Some(child),
        plan: plan.clone(),
    })
}

impl Handover {
    /// After a successful spawn: the child's listeners and sockets. The child sent them before
    /// its exec, and `spawn` returns only after the exec, so nothing is waited for.
    pub fn receive(mut self) -> Result<Inside, ConfineError> {
        self.child.take();
        let (code, fds) =
            recv_fds(self.parent.as_raw_fd()).map_err(|e| ConfineError::Handover(e.to_string()))?;
        let want = self.plan.listen_ports.len() + self.plan.dial_sockets;
        if code != b'F' || fds.len() != want {
            return Err(ConfineError::Handover(format!(
                "expected {want} descriptors, got {} (message {code})",
                fds.len()
            )));
        }
        let mut fds = fds.into_iter();
        let mut listeners = Vec::new();
        for port in &self.plan.listen_ports {
            let Some(fd) = fds.next() else { break };
            let l = std::net::TcpListener::from(fd);
            l.set_nonblocking(true)
                .map_err(|e| ConfineError::Handover(e.to_string()))?;
            listeners.push((*port, l));
        }
        Ok(Inside {
            listeners,
            dial: fds.collect(),
        })
    }

    /// After a failed spawn: the spawn error, with the confinement step that failed when it was
    /// the hook that failed it.
    pub fn failure(mut self, spawn_error: io::Error) -> ConfineError {
        self.child.take();
        match recv_fds(self.parent.as_raw_fd()) {
            Ok((code, _)) if code != 0 && code != b'F' => ConfineError::Step {
                step: step_name(code),
                error: spawn_error,
            },
            _ => ConfineError::Prepare(spawn_error),
        }
    }
}

/// Fork a child that tries `kind` (enter, lo up, bind 3128) and exits; report why it failed.
#[cfg(target_os = "linux")]
fn probe_kind(kind: NsKind) -> Result<(), String> {
    let mut prep = Prep::new(kind, &Plan::proxy_only()).map_err(|e| e.to_string())?;
    let mut pipe = [0 as RawFd; 2];
    // SAFETY: pipe has room for two descriptors.
    if unsafe { libc::pipe2(pipe.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(format!(
            "cannot probe: pipe2: {}",
            io::Error::last_os_error()
        ));
    }
    // SAFETY: both descriptors were just created and are owned here.
    let (rd, wr) = unsafe { (OwnedFd::from_raw_fd(pipe[0]), OwnedFd::from_raw_fd(pipe[1])) };
    // SAFETY: the child runs only async-signal-safe code on memory prepared before the fork
    // (`enter`, write, _exit) and never returns.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(format!(
            "cannot probe: fork: {}",
            io::Error::last_os_error()
        ));
    }
    if pid == 0 {
        let code = match enter(&mut prep) {
            Ok(()) => 0,
            Err((step, e)) => {
                let mut msg = [0u8; 5];
                msg[0] = step;
                msg[1..].copy_from_slice(&e.to_ne_bytes());
                // SAFETY: write to the pipe from a stack buffer; _exit never returns.
                unsafe {
                    libc::write(wr.as_raw_fd(), msg.as_ptr().cast(), msg.len());
                }
                1
            }
        };
        // SAFETY: leaves the forked child without running any destructor or atexit handler.
        unsafe { libc::_exit(code) };
    }
    drop(wr);
    let mut status = 0;
    // SAFETY: waits for the child forked above.
    unsafe { while libc::waitpid(pid, &mut status, 0) < 0 && errno() == libc::EINTR {} }
    let mut msg = [0u8; 5];
    // SAFETY: reads at most msg.len() bytes into the stack buffer.
    let n = unsafe { libc::read(rd.as_raw_fd(), msg.as_mut_ptr().cast(), msg.len()) };
    if libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0 {
        return Ok(());
    }
    if n == 5 {
        let e = i32::from_ne_bytes([msg[1], msg[2], msg[3], msg[4]]);
        return Err(format!(
            "{} failed for a {}: {}",
            step_name(msg[0]),
            kind.describe(),
            io::Error::from_raw_os_error(e)
        ));
    }
    Err(format!(
        "the {} probe child ended with status {status}",
        kind.describe()
    ))
}

/// The fix to print when confinement is required but unavailable.
pub const FIX: &str = "run forge as root or with CAP_SYS_ADMIN, or allow unprivileged user \
     namespaces (sysctl kernel.unprivileged_userns_clone=1 / user.max_user_namespaces > 0; in a \
     container: a seccomp profile that allows unshare and clone with CLONE_NEWUSER, or Kubernetes \
     `hostUsers: false`), or set forge.yaml `security.confinement: auto` to run proxy-only";

/// Connect a dial socket (from [`Inside::dial`]) to 127.0.0.1:`port` inside its namespace.
pub async fn connect_inside(sock: OwnedFd, port: u16) -> io::Result<tokio::net::TcpStream> {
    let std = std::net::TcpStream::from(sock);
    std.set_nonblocking(true)?;
    let s = tokio::net::TcpSocket::from_std_stream(std);
    s.connect((std::net::Ipv4Addr::LOCALHOST, port).into())
        .await
}

/// Confines children on one proxy: each child's 127.0.0.1:3128 is served by that proxy's
/// [`ProxyEntry`] (same policy, limits and caps as the main listener).
#[derive(Clone)]
pub struct Confiner {
    entry: ProxyEntry,
    kind: NsKind,
}

impl std::fmt::Debug for Confiner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Confiner")
            .field("kind", &self.kind)
            .finish()
    }
}

impl Confiner {
    /// Children confined as `kind` (from [`availability`]), their proxy listener served by `entry`.
    pub fn new(entry: ProxyEntry, kind: NsKind) -> Self {
        Confiner { entry, kind }
    }

    /// How children enter their namespace.
    pub fn kind(&self) -> NsKind {
        self.kind
    }

    /// Make the child `cmd` will start a confined one (see [`install`]). Keep the returned value
    /// until `spawn` has returned, then call [`PendingChild::attach`] (or
    /// [`PendingChild::failure`] with the spawn error).
    pub fn prepare(
        &self,
        cmd: &mut std::process::Command,
        plan: &Plan,
    ) -> Result<PendingChild, ConfineError> {
        Ok(PendingChild {
            handover: install(cmd, self.kind, plan)?,
            entry: self.entry.clone(),
        })
    }
}

/// A confined child between `prepare` and `spawn`.
pub struct PendingChild {
    handover: Handover,
    entry: ProxyEntry,
}

impl PendingChild {
    /// After a successful spawn: serve the child's 127.0.0.1:3128 with the proxy; the other
    /// listeners and the dial sockets are handed to the caller.
    pub fn attach(self) -> Result<ConfinedChild, ConfineError> {
        let inside = self.handover.receive()?;
        let mut guards = Vec::new();
        let mut spare = Vec::new();
        for (port, l) in inside.listeners {
            if port == CHILD_PROXY_PORT {
                guards.push(
                    self.entry
                        .serve_listener(l)
                        .map_err(|e| ConfineError::Handover(e.to_string()))?,
                );
            } else {
                spare.push((port, l));
            }
        }
        Ok(ConfinedChild {
            guards,
            spare,
            dial: inside.dial,
            entry: self.entry,
        })
    }

    /// After a failed spawn: why (naming the confinement step when the hook failed).
    pub fn failure(self, spawn_error: io::Error) -> ConfineError {
        self.handover.failure(spawn_error)
    }
}

/// A running confined child's end in forge: while it lives, the proxy serves the child's
/// 127.0.0.1:3128. Drop it when the child has ended.
pub struct ConfinedChild {
    guards: Vec<ListenerGuard>,
    /// Listeners other than 3128 (see [`Plan::listen_ports`]), not served yet.
    pub spare: Vec<(u16, std::net::TcpListener)>,
    /// Unconnected sockets of the child's namespace (see [`Plan::dial_sockets`]).
    pub dial: Vec<OwnedFd>,
    entry: ProxyEntry,
}

impl std::fmt::Debug for ConfinedChild {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConfinedChild")
            .field("served", &self.guards.len())
            .field("spare", &self.spare.len())
            .field("dial", &self.dial.len())
            .finish()
    }
}

impl ConfinedChild {
    /// Serve one of the spare listeners with the proxy (the same policy for now); returns its port
    /// inside the namespace, or `None` when none is left.
    pub fn serve_spare(&mut self) -> Result<Option<u16>, ConfineError> {
        let Some((port, l)) = self.spare.pop() else {
            return Ok(None);
        };
        self.guards.push(
            self.entry
                .serve_listener(l)
                .map_err(|e| ConfineError::Handover(e.to_string()))?,
        );
        Ok(Some(port))
    }
}
