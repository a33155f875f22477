//! Errors of forge-mcp. Each names the server or address, the rule and the fix.

use std::net::SocketAddr;

/// Why connecting to an MCP server, or serving MCP, failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum McpError {
    /// A server could not be reached, refused the credentials, or its tool listing failed.
    #[error("MCP server {server} ({location}): {cause}")]
    Connect {
        server: String,
        location: String,
        cause: String,
    },
    /// `forge mcp serve --transport http` on a non-loopback address without a bearer token.
    #[error("refusing to serve MCP on {addr} without a bearer token: only loopback addresses (127.0.0.1, [::1]) may be served without one; set FORGE_RUNTIME_TOKEN (or .forge/runtime.token) or bind 127.0.0.1")]
    TokenRequired { addr: SocketAddr },
    /// Binding or serving failed.
    #[error("MCP server on {addr}: {message}")]
    Io { addr: String, message: String },
}
