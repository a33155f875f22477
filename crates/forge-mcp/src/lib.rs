//! forge-mcp: MCP both ways, on the official Rust SDK (rmcp).
//!
//! - [`client::connect`] (`client.rs`): an MCP server's tools as forge [`forge_tools::Tool`]s named
//!   `<server>__<tool>`, reached over streamable HTTP through the egress client or spawned as a
//!   confined stdio child; [`client::ServerSpec`], [`client::McpConnection`].
//! - [`http_client::EgressHttp`] (`http_client.rs`): rmcp's streamable HTTP client backend over
//!   [`forge_egress::client::EgressClient`] (policy, SSRF checks, no redirects).
//! - [`child`] (`child.rs`): the stdio child: cleared environment, own process group, killed on
//!   drop, stderr to the log; [`child::stdio_env`].
//! - [`server`] (`server.rs`): the [`server::ToolHost`] trait forge-runtime implements, the rmcp
//!   handler over it, [`server::serve_stdio`] / [`server::serve_io`] and [`server::serve_http`]
//!   (bind, token, Host and Origin rules).
//! - [`error::McpError`] (`error.rs`).

pub mod child;
pub mod client;
pub mod error;
pub mod http_client;
pub mod server;

pub use client::{connect, EgressDeps, McpConnection, ServerSpec, ServerTransport, SkippedTool};
pub use error::McpError;
pub use server::{
    serve_http, serve_http_with, serve_io, serve_stdio, ExtraRoutes, HttpBody, HttpOptions,
    HttpServerHandle, Notices, ServeOptions, SessionKey, ToolHost, ToolInfo, UserNotice,
    MAX_NOTICES,
};
