//! `TCP_NODELAY` on forge's own CDP connections ([`on_connections_to`]).
//!
//! chromiumoxide opens its DevTools websocket itself (`connect_async`, Nagle left on) and gives
//! no way to reach the socket. With Nagle on, the tail of a large command (the page library,
//! about 100 KB, in one `Runtime.evaluate`) waits for the engine's delayed ACK of the part sent
//! before it: about 40 ms on Linux, on every fresh document's first observation. So after
//! connecting, forge finds its own TCP sockets whose peer is the DevTools address (in
//! `/proc/self/fd`) and turns Nagle off on them. Only sockets of this process connected to that
//! exact address are touched; a socket that went away meanwhile makes `setsockopt` fail, which
//! is ignored (the connection is then gone anyway).

use std::net::{IpAddr, SocketAddr};
use std::os::fd::RawFd;

/// At most this many descriptors are looked at (bounded work however many are open).
const MAX_FDS: usize = 65_536;

/// The host and port of a `ws://host:port/...` URL, when the host is an IP address.
pub(crate) fn ws_peer(ws: &str) -> Option<SocketAddr> {
    let u = url::Url::parse(ws).ok()?;
    let ip: IpAddr = match u.host()? {
        url::Host::Ipv4(a) => a.into(),
        url::Host::Ipv6(a) => a.into(),
        url::Host::Domain("localhost") => std::net::Ipv4Addr::LOCALHOST.into(),
        url::Host::Domain(_) => return None,
    };
    Some(SocketAddr::new(ip, u.port_or_known_default()?))
}

/// Turn Nagle off on every TCP socket of this process connected to `peer`. Returns how many
/// sockets were set.
pub(crate) fn on_connections_to(peer: SocketAddr) -> usize {
    connections_to(peer)
        .into_iter()
        .filter(|fd| set_nodelay(*fd))
        .count()
}

/// Whether Nagle is off on every TCP socket of this process connected to `peer`; `None` when
/// there is none.
pub(crate) fn all_off_to(peer: SocketAddr) -> Option<bool> {
    let fds = connections_to(peer);
    (!fds.is_empty()).then(|| fds.into_iter().all(nodelay_of))
}

/// The TCP sockets of this process connected to `peer`.
fn connections_to(peer: SocketAddr) -> Vec<RawFd> {
    let Ok(dir) = std::fs::read_dir("/proc/self/fd") else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for entry in dir.flatten().take(MAX_FDS) {
        let Some(fd) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<RawFd>().ok())
        else {
            continue;
        };
        let is_socket = std::fs::read_link(entry.path())
            .map(|t| t.to_string_lossy().starts_with("socket:"))
            .unwrap_or(false);
        if is_socket && peer_of(fd) == Some(peer) {
            found.push(fd);
        }
    }
    found
}

/// The peer address of socket `fd`, if it is a connected TCP (stream, IPv4/IPv6) socket.
fn peer_of(fd: RawFd) -> Option<SocketAddr> {
    let mut ty: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `ty` and `len` are valid for writes of the sizes given; a stale or non-socket fd
    // makes the call fail, which is checked.
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_TYPE,
            (&mut ty as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    if r != 0 || ty != libc::SOCK_STREAM {
        return None;
    }
    // SAFETY: an all-zero sockaddr_storage is a valid value of the type.
    let mut ss: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    // SAFETY: `ss` is large enough for any address and `len` says so; failure is checked.
    let r = unsafe {
        libc::getpeername(
            fd,
            (&mut ss as *mut libc::sockaddr_storage).cast(),
            &mut len,
        )
    };
    if r != 0 {
        return None;
    }
    match ss.ss_family as libc::c_int {
        libc::AF_INET => {
            // SAFETY: the family says the storage holds a sockaddr_in.
            let a: libc::sockaddr_in =
                unsafe { *(&ss as *const libc::sockaddr_storage).cast::<libc::sockaddr_in>() };
            let ip = std::net::Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr));
            Some(SocketAddr::new(ip.into(), u16::from_be(a.sin_port)))
        }
        libc::AF_INET6 => {
            // SAFETY: the family says the storage holds a sockaddr_in6.
            let a: libc::sockaddr_in6 =
                unsafe { *(&ss as *const libc::sockaddr_storage).cast::<libc::sockaddr_in6>() };
            let ip = std::net::Ipv6Addr::from(a.sin6_addr.s6_addr);
            Some(SocketAddr::new(ip.into(), u16::from_be(a.sin6_port)))
        }
        _ => None,
    }
}

fn set_nodelay(fd: RawFd) -> bool {
    let on: libc::c_int = 1;
    // SAFETY: `on` is a valid c_int for the size given; a stale fd makes the call fail.
    unsafe {
        libc::setsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_NODELAY,
            (&on as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        ) == 0
    }
}

/// Whether Nagle is off on socket `fd`.
fn nodelay_of(fd: RawFd) -> bool {
    let mut v: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `v` and `len` are valid for writes of the sizes given.
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_NODELAY,
            (&mut v as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    r == 0 && v != 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    #[test]
    fn only_connections_to_the_peer_get_nodelay() {
        let a = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a");
        let b = std::net::TcpListener::bind("127.0.0.1:0").expect("bind b");
        let to_a = std::net::TcpStream::connect(a.local_addr().expect("addr")).expect("to a");
        let to_b = std::net::TcpStream::connect(b.local_addr().expect("addr")).expect("to b");
        assert!(!nodelay_of(to_a.as_raw_fd()), "Nagle is on by default");
        let n = on_connections_to(a.local_addr().expect("addr"));
        assert_eq!(n, 1, "one socket is connected to a");
        assert!(nodelay_of(to_a.as_raw_fd()));
        assert_eq!(all_off_to(a.local_addr().expect("addr")), Some(true));
        assert_eq!(all_off_to(b.local_addr().expect("addr")), Some(false));
        assert!(
            !nodelay_of(to_b.as_raw_fd()),
            "a socket to another peer is left alone"
        );
        assert!(!nodelay_of(a.as_raw_fd()), "a listener is not a connection");
    }

    #[test]
    fn the_peer_is_read_from_the_websocket_url() {
        assert_eq!(
            ws_peer("ws://127.0.0.1:9222/devtools/browser/x"),
            Some("127.0.0.1:9222".parse().expect("addr"))
        );
        assert_eq!(
            ws_peer("ws://localhost:9/"),
            Some("127.0.0.1:9".parse().expect("addr"))
        );
        assert_eq!(ws_peer("ws://example.com:9/"), None);
    }
}
