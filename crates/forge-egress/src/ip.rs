//! The IP rule: which addresses forge never dials, which it dials only with a private-range exception,
//! and how IPv6 forms that embed an IPv4 address are judged.
//!
//! Invariants (tested by name below and in `tests/policy.rs`):
//! - Always blocked: loopback (except through an explicit `host:port` entry naming loopback, decided by
//!   the caller), unspecified, link-local (incl. 169.254.169.254), cloud metadata addresses,
//!   multicast, broadcast, reserved, documentation, 100.64/10, 192.0.0.0/24, 198.18/15, and every IPv6
//!   address outside global unicast 2000::/3 that is not one of the forms below.
//! - IPv6 forms embedding IPv4 (mapped `::ffff:0:0/96`, translated `::ffff:0:0:0/96`, compatible
//!   `::/96`, NAT64 `64:ff9b::/96`, 6to4 `2002::/16`, ISATAP interface ids) are unwrapped and the
//!   embedded IPv4 address is judged by the IPv4 rule; an embedded loopback is never allowed.
//!   Teredo (`2001::/32`, the client address is obfuscated) and the rest of `2001::/23`, and local-use
//!   NAT64 `64:ff9b:1::/48` are blocked outright.
//! - Private (10/8, 172.16/12, 192.168/16, fc00::/7) is blocked unless the policy allows private IPs
//!   or a configured private CIDR contains the address. The AWS IPv6 metadata address fd00:ec2::254 is
//!   inside fc00::/7 but always blocked.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::{IpNet, Ipv4Net, Ipv6Net};

/// The category of an always-blocked or private address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IpClass {
    Loopback,
    Unspecified,
    LinkLocal,
    CloudMetadata,
    Multicast,
    Broadcast,
    Reserved,
    Documentation,
    SharedAddressSpace,
    IetfProtocolAssignments,
    Benchmarking,
    Teredo,
    Private,
}

impl IpClass {
    /// A short phrase for messages.
    pub fn describe(self) -> &'static str {
        match self {
            IpClass::Loopback => "loopback",
            IpClass::Unspecified => "unspecified",
            IpClass::LinkLocal => "link-local",
            IpClass::CloudMetadata => "cloud metadata",
            IpClass::Multicast => "multicast",
            IpClass::Broadcast => "broadcast",
            IpClass::Reserved => "reserved",
            IpClass::Documentation => "documentation",
            IpClass::SharedAddressSpace => {
                "shared address space (100.64.0.0/10, carrier-grade NAT)"
            }
            IpClass::IetfProtocolAssignments => {
                "IETF protocol assignment (192.0.0.0/24, 2001::/23)"
            }
            IpClass::Benchmarking => "benchmarking (198.18.0.0/15)",
            IpClass::Teredo => "Teredo tunnel (2001::/32)",
            IpClass::Private => "private",
        }
    }
}

/// The IPv6 form an IPv4 address was found embedded in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Embedding {
    Mapped,
    Translated,
    Compatible,
    Nat64,
    SixToFour,
    Isatap,
}

impl Embedding {
    pub fn describe(self) -> &'static str {
        match self {
            Embedding::Mapped => "IPv4-mapped IPv6",
            Embedding::Translated => "IPv4-translated IPv6",
            Embedding::Compatible => "IPv4-compatible IPv6",
            Embedding::Nat64 => "NAT64 (64:ff9b::/96)",
            Embedding::SixToFour => "6to4 (2002::/16)",
            Embedding::Isatap => "ISATAP",
        }
    }
}

/// Why an address is blocked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IpBlock {
    /// The class of the (embedded, if any) address.
    pub class: IpClass,
    /// Set when the class applies to an IPv4 address embedded in the IPv6 address.
    pub embedded: Option<(Embedding, Ipv4Addr)>,
}

impl fmt::Display for IpBlock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.embedded {
            None => write!(f, "a {} address", self.class.describe()),
            Some((form, v4)) => write!(
                f,
                "an {} address embedding {v4}, a {} address",
                form.describe(),
                self.class.describe()
            ),
        }
    }
}

/// The classification before private exceptions: `Ok(())` public, `Err` with the class otherwise.
pub fn classify(ip: IpAddr) -> Result<(), IpBlock> {
    match ip {
        IpAddr::V4(v4) => classify_v4(v4).map_err(|class| IpBlock {
            class,
            embedded: None,
        }),
        IpAddr::V6(v6) => classify_v6(v6),
    }
}

fn in4(ip: Ipv4Addr, net: [u8; 4], len: u8) -> bool {
    // Invariant: `len` <= 32 at every call site below, so Ipv4Net::new cannot fail.
    Ipv4Net::new(Ipv4Addr::from(net), len)
        .map(|n| n.contains(&ip))
        .unwrap_or(false)
}

fn in6(ip: Ipv6Addr, net: &str, len: u8) -> bool {
    match (net.parse::<Ipv6Addr>(), len <= 128) {
        (Ok(addr), true) => Ipv6Net::new(addr, len)
            .map(|n| n.contains(&ip))
            .unwrap_or(false),
        _ => false,
    }
}

/// IPv4 classes.
pub fn classify_v4(ip: Ipv4Addr) -> Result<(), IpClass> {
    let o = ip.octets();
    let class = if in4(ip, [127, 0, 0, 0], 8) {
        IpClass::Loopback
    } else if in4(ip, [0, 0, 0, 0], 8) {
        IpClass::Unspecified
    } else if ip == Ipv4Addr::new(169, 254, 169, 254)
        || ip == Ipv4Addr::new(169, 254, 170, 2)
        || ip == Ipv4Addr::new(169, 254, 170, 23)
        || ip == Ipv4Addr::new(100, 100, 100, 200)
        || ip == Ipv4Addr::new(192, 0, 0, 192)
        || ip == Ipv4Addr::new(168, 63, 129, 16)
    {
        IpClass::CloudMetadata
    } else if in4(ip, [169, 254, 0, 0], 16) {
        IpClass::LinkLocal
    } else if in4(ip, [224, 0, 0, 0], 4) {
        IpClass::Multicast
    } else if o == [255, 255, 255, 255] {
        IpClass::Broadcast
    } else if in4(ip, [240, 0, 0, 0], 4) || in4(ip, [192, 88, 99, 0], 24) {
        IpClass::Reserved
    } else if in4(ip, [192, 0, 2, 0], 24)
        || in4(ip, [198, 51, 100, 0], 24)
        || in4(ip, [203, 0, 113, 0], 24)
    {
        IpClass::Documentation
    } else if in4(ip, [100, 64, 0, 0], 10) {
        IpClass::SharedAddressSpace
    } else if in4(ip, [192, 0, 0, 0], 24) {
        IpClass::IetfProtocolAssignments
    } else if in4(ip, [198, 18, 0, 0], 15) {
        IpClass::Benchmarking
    } else if in4(ip, [10, 0, 0, 0], 8)
        || in4(ip, [172, 16, 0, 0], 12)
        || in4(ip, [192, 168, 0, 0], 16)
    {
        IpClass::Private
    } else {
        return Ok(());
    };
    Err(class)
}

/// The IPv4 address embedded in an IPv6 transition form, if any.
pub fn embedded_v4(ip: Ipv6Addr) -> Option<(Embedding, Ipv4Addr)> {
    let s = ip.segments();
    let o = ip.octets();
    let tail = Ipv4Addr::new(o[12], o[13], o[14], o[15]);
    if s[..5] == [0, 0, 0, 0, 0] && s[5] == 0xffff {
        return Some((Embedding::Mapped, tail));
    }
    if s[..4] == [0, 0, 0, 0] && s[4] == 0xffff && s[5] == 0 {
        return Some((Embedding::Translated, tail));
    }
    if s[..6] == [0, 0, 0, 0, 0, 0] {
        return Some((Embedding::Compatible, tail));
    }
    if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return Some((Embedding::Nat64, tail));
    }
    if s[0] == 0x2002 {
        return Some((Embedding::SixToFour, Ipv4Addr::new(o[2], o[3], o[4], o[5])));
    }
    // ISATAP: interface identifier 0000:5efe or 0200:5efe (u/l bit set) followed by the IPv4 address.
    if (s[4] == 0 || s[4] == 0x0200) && s[5] == 0x5efe {
        return Some((Embedding::Isatap, tail));
    }
    None
}

/// IPv6 classes (with embedded IPv4 unwrapped).
pub fn classify_v6(ip: Ipv6Addr) -> Result<(), IpBlock> {
    let plain = |class| {
        Err(IpBlock {
            class,
            embedded: None,
        })
    };
    if ip == Ipv6Addr::LOCALHOST {
        return plain(IpClass::Loopback);
    }
    if ip == Ipv6Addr::UNSPECIFIED {
        return plain(IpClass::Unspecified);
    }
    if in6(ip, "64:ff9b:1::", 48) {
        return plain(IpClass::Reserved);
    }
    if in6(ip, "2001::", 32) {
        return plain(IpClass::Teredo);
    }
    let judge_embedded = |form, v4| {
        classify_v4(v4).map_err(|class| IpBlock {
            class,
            embedded: Some((form, v4)),
        })
    };
    match embedded_v4(ip) {
        Some((Embedding::Isatap, _)) | None => {}
        Some((form, v4)) => return judge_embedded(form, v4),
    }
    if ip == Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254) {
        return plain(IpClass::CloudMetadata);
    }
    if in6(ip, "fc00::", 7) {
        return plain(IpClass::Private);
    }
    if in6(ip, "fe80::", 10) {
        return plain(IpClass::LinkLocal);
    }
    if in6(ip, "ff00::", 8) {
        return plain(IpClass::Multicast);
    }
    if in6(ip, "2001:db8::", 32) || in6(ip, "3fff::", 20) {
        return plain(IpClass::Documentation);
    }
    if in6(ip, "2001::", 23) {
        return plain(IpClass::IetfProtocolAssignments);
    }
    if !in6(ip, "2000::", 3) {
        // Everything outside global unicast (fec0::/10 site-local, 100::/64 discard, ::/8 leftovers,
        // unassigned space) is reserved.
        return plain(IpClass::Reserved);
    }
    // ISATAP interface ids are only meaningful (and only unwrapped) under a global prefix; under
    // link-local or private prefixes the prefix class above already decided.
    if let Some((Embedding::Isatap, v4)) = embedded_v4(ip) {
        return judge_embedded(Embedding::Isatap, v4);
    }
    Ok(())
}

/// The private ranges a `allowed_private_cidrs` entry must lie within.
pub fn private_ranges() -> Vec<IpNet> {
    ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "fc00::/7"]
        .iter()
        .filter_map(|s| s.parse().ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(s: &str) -> Option<IpClass> {
        classify(s.parse().unwrap()).err().map(|b| b.class)
    }

    #[test]
    fn always_blocked_ipv4() {
        for (ip, c) in [
            ("127.0.0.1", IpClass::Loopback),
            ("127.255.0.9", IpClass::Loopback),
            ("0.0.0.0", IpClass::Unspecified),
            ("169.254.169.254", IpClass::CloudMetadata),
            ("169.254.1.1", IpClass::LinkLocal),
            ("100.100.100.200", IpClass::CloudMetadata),
            ("192.0.0.192", IpClass::CloudMetadata),
            ("224.0.0.1", IpClass::Multicast),
            ("255.255.255.255", IpClass::Broadcast),
            ("240.0.0.1", IpClass::Reserved),
            ("192.0.2.7", IpClass::Documentation),
            ("198.51.100.7", IpClass::Documentation),
            ("203.0.113.7", IpClass::Documentation),
            ("100.64.0.1", IpClass::SharedAddressSpace),
            ("192.0.0.8", IpClass::IetfProtocolAssignments),
            ("198.19.255.1", IpClass::Benchmarking),
            ("10.1.2.3", IpClass::Private),
            ("172.31.0.1", IpClass::Private),
            ("192.168.1.1", IpClass::Private),
        ] {
            assert_eq!(class(ip), Some(c), "{ip}");
        }
        for ip in [
            "93.184.216.34",
            "8.8.8.8",
            "172.32.0.1",
            "100.128.0.1",
            "1.1.1.1",
        ] {
            assert_eq!(class(ip), None, "{ip} is public");
        }
    }

    #[test]
    fn ipv6_embedding_forms_are_unwrapped() {
        for (ip, c) in [
            ("::ffff:127.0.0.1", IpClass::Loopback),
            ("::ffff:169.254.169.254", IpClass::CloudMetadata),
            ("::ffff:0:10.0.0.1", IpClass::Private),
            ("::127.0.0.1", IpClass::Loopback),
            ("64:ff9b::a9fe:a9fe", IpClass::CloudMetadata),
            ("2002:7f00:1::", IpClass::Loopback),
            ("2002:a00:1::1", IpClass::Private),
            ("2606:4700::5efe:7f00:1", IpClass::Loopback),
            ("2606:4700::200:5efe:a9fe:a9fe", IpClass::CloudMetadata),
        ] {
            let b = classify(ip.parse().unwrap()).unwrap_err();
            assert_eq!(b.class, c, "{ip}");
            assert!(b.embedded.is_some(), "{ip} is an embedding form");
        }
        assert_eq!(class("fe80::5efe:808:808"), Some(IpClass::LinkLocal));
        assert_eq!(class("::ffff:8.8.8.8"), None);
        assert_eq!(class("64:ff9b::808:808"), None);
    }

    #[test]
    fn ipv6_always_blocked() {
        for (ip, c) in [
            ("::1", IpClass::Loopback),
            ("::", IpClass::Unspecified),
            ("fe80::1", IpClass::LinkLocal),
            ("ff02::1", IpClass::Multicast),
            ("2001:db8::1", IpClass::Documentation),
            ("2001::1", IpClass::Teredo),
            ("2001:0:4136:e378:8000:63bf:3fff:fdd2", IpClass::Teredo),
            ("64:ff9b:1::1", IpClass::Reserved),
            ("fec0::1", IpClass::Reserved),
            ("100::1", IpClass::Reserved),
            ("fd00:ec2::254", IpClass::CloudMetadata),
            ("fd12::1", IpClass::Private),
        ] {
            assert_eq!(class(ip), Some(c), "{ip}");
        }
        assert_eq!(class("2606:4700:4700::1111"), None);
    }
}
