//! No input panics the parsers or the policy: a deterministic stream of generated hosts, authorities
//! and URLs (biased towards the characters that matter: digits, dots, colons, brackets, `x`, `%`,
//! `@`, backslash, Unicode) goes through normalisation, authority splitting, URL parsing and the
//! policy. Every result must be either a value or an error; the count of each is checked so the test
//! cannot pass vacuously.

use forge_egress::client::parse_url;
use forge_egress::host::{normalize_host, split_authority};
use forge_egress::policy::{EgressPolicy, Kind};

const ALPHABET: &[&str] = &[
    "0",
    "1",
    "7",
    "9",
    "255",
    "256",
    "0x",
    "x",
    "f",
    "a",
    "z",
    "-",
    "_",
    ".",
    "..",
    ":",
    "::",
    "[",
    "]",
    "%",
    "%2e",
    "@",
    "\\",
    "/",
    "?",
    "#",
    " ",
    "\0",
    "ü",
    "。",
    "１",
    "xn--",
    "ffff",
    "127",
    "localhost",
    "example",
    "com",
    "*",
    "ﬀ",
    "\u{200b}",
];

struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

#[test]
fn generated_inputs_never_panic() {
    let policy = EgressPolicy::allowlist([
        "example.com",
        "*.example.org",
        "127.0.0.1:8080",
        "localhost:3000",
    ])
    .unwrap();
    let mut rng = XorShift(0x9e37_79b9_7f4a_7c15);
    let (mut ok, mut err) = (0usize, 0usize);
    for _ in 0..20_000 {
        let len = (rng.next() % 8) as usize;
        let mut s = String::new();
        for _ in 0..len {
            s.push_str(ALPHABET[(rng.next() % ALPHABET.len() as u64) as usize]);
        }
        for wire in [true, false] {
            match normalize_host(&s, !wire) {
                Ok(h) => {
                    ok += 1;
                    let _ = policy.check_host(&h, 443, Kind::Tls);
                    let _ = policy.check_host(&h, 8080, Kind::Http);
                }
                Err(_) => err += 1,
            }
        }
        let _ = split_authority(&s);
        let _ = policy.check(&s, 80, Kind::Http, true);
        let _ = parse_url(&format!("http://{s}/p"));
        let _ = parse_url(&format!("https://{s}"));
        let _ = parse_url(&s);
    }
    assert!(
        ok > 100 && err > 100,
        "both outcomes exercised: {ok} ok, {err} errors"
    );
}
