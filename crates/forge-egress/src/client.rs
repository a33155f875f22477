//! The egress HTTP client (placeholder until the egress issue fills it).

/// The HTTP client that applies the egress policy.
pub struct EgressClient {
    _private: (),
}
