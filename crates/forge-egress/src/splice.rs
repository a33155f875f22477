//! Zero-copy tunnel relay for Linux: moves bytes socket -> pipe -> socket with `splice(2)`, so the
//! proxy does not copy tunnel payload through user space. Used for CONNECT tunnels whose client side
//! is a plain TCP socket; everything else uses `tokio::io::copy_bidirectional`.
//!
//! Semantics match the portable relay: each direction runs until EOF, then shuts down the write half
//! of the other socket (half-close); an error in either direction ends the tunnel. Readiness comes
//! from tokio (`readable`/`writable` + `try_io`), so the sockets stay in tokio's reactor.
//!
//! Memory: a direction's pipe exists only while bytes flow (made on the first readable event, closed
//! after a second without traffic), so an idle tunnel costs its sockets and its task, no pipes.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::io::Interest;
use tokio::net::TcpStream;

/// Bytes a pipe buffer is asked to hold (the kernel may grant less; that only means more rounds).
const PIPE_SIZE: usize = 1 << 20;

struct Pipe {
    read: OwnedFd,
    write: OwnedFd,
}

fn pipe() -> io::Result<Pipe> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: `fds` is a valid, writable array of two c_ints as pipe2 requires.
    let r = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: pipe2 succeeded, so both descriptors are open and owned by nobody else.
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // Best effort: a larger pipe means fewer splice rounds. Failure (limit lowered) is harmless.
    // SAFETY: F_SETPIPE_SZ on an open pipe descriptor; no memory is passed.
    unsafe {
        libc::fcntl(
            write.as_raw_fd(),
            libc::F_SETPIPE_SZ,
            PIPE_SIZE as libc::c_int,
        );
    }
    Ok(Pipe { read, write })
}

fn splice(from: RawFd, to: RawFd, len: usize) -> io::Result<usize> {
    // SAFETY: both descriptors are open for the duration of the call (owned by the caller's
    // TcpStream/OwnedFd); null offsets are valid for sockets and pipes.
    let n = unsafe {
        libc::splice(
            from,
            std::ptr::null_mut(),
            to,
            std::ptr::null_mut(),
            len,
            libc::SPLICE_F_MOVE | libc::SPLICE_F_NONBLOCK,
        )
    };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

fn shutdown_write(s: &TcpStream) {
    // SAFETY: shutdown(2) on an open socket descriptor; no memory is passed.
    unsafe {
        libc::shutdown(s.as_raw_fd(), libc::SHUT_WR);
    }
}

/// A pipe idle for this long is closed (and made again when data comes): an idle tunnel then holds
/// no pipe, only its two sockets.
const PIPE_IDLE: Duration = Duration::from_secs(1);

/// Relay `from` -> `to` until EOF on `from`; counts bytes and records activity. The pipe is created
/// when the first bytes arrive and dropped after [`PIPE_IDLE`] without traffic.
async fn one_way(
    from: &TcpStream,
    to: &TcpStream,
    count: &AtomicU64,
    last: &AtomicU64,
    epoch: Instant,
) -> io::Result<()> {
    let mut pipe_slot: Option<Pipe> = None;
    loop {
        let n = loop {
            if pipe_slot.is_some() {
                if tokio::time::timeout(PIPE_IDLE, from.readable())
                    .await
                    .is_err()
                {
                    // Empty here: every byte spliced in was spliced out before reading again.
                    pipe_slot = None;
                    continue;
                }
            } else {
                from.readable().await?;
            }
            if pipe_slot.is_none() {
                pipe_slot = Some(pipe()?);
            }
            // Invariant: set just above.
            let Some(p) = &pipe_slot else { continue };
            match from.try_io(Interest::READABLE, || {
                splice(from.as_raw_fd(), p.write.as_raw_fd(), PIPE_SIZE)
            }) {
                Ok(n) => break n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) => return Err(e),
            }
        };
        if n == 0 {
            shutdown_write(to);
            return Ok(());
        }
        // Invariant: a pipe exists, the splice that returned n > 0 filled it.
        let Some(p) = &pipe_slot else {
            return Err(io::Error::other("splice relay lost its pipe"));
        };
        count.fetch_add(n as u64, Ordering::Relaxed);
        last.store(epoch.elapsed().as_millis() as u64, Ordering::Relaxed);
        let mut left = n;
        while left > 0 {
            to.writable().await?;
            match to.try_io(Interest::WRITABLE, || {
                splice(p.read.as_raw_fd(), to.as_raw_fd(), left)
            }) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(m) => left -= m,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) => return Err(e),
            }
        }
    }
}

/// Relay both ways until both directions reached EOF, or either failed.
pub(crate) async fn relay(
    client: &TcpStream,
    upstream: &TcpStream,
    up: &AtomicU64,
    down: &AtomicU64,
    last: &AtomicU64,
    epoch: Instant,
) -> io::Result<()> {
    tokio::try_join!(
        one_way(client, upstream, up, last, epoch),
        one_way(upstream, client, down, last, epoch),
    )
    .map(|_| ())
}
