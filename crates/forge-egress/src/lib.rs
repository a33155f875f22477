//! forge-egress: Egress policy, SSRF-safe resolve-and-dial, the loopback proxy and the egress HTTP client.

pub mod client;
