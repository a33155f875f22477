//! The browser tool family's `tools/list` size stays under its byte budget.
//!
//! Every MCP client and every model turn pays the bytes of the browser tools' entries (name,
//! description, input schema). The goal (at most 6 KiB for the family) and each trim pass, with
//! per-tool bytes, are recorded in docs/benchmarks.md, section "MCP (`forge mcp serve`)";
//! `cargo bench -p forge-runtime --bench mcp` measures the same JSON through a real MCP server.
//! This is a size limit, not a timing assert. No browser is launched or needed: the tools are
//! built over a manager that has not started one.

use std::sync::Arc;

use forge_browser::{browser_tools, BrowserConfig, BrowserManager, BrowserToolOptions};
use serde_json::{json, Value};

/// The family's `tools/list` bytes after the last trim, rounded up to the next 64 bytes. Raise
/// it only with a new measurement and its reason recorded in docs/benchmarks.md ("MCP").
const BUDGET: usize = 6144;

#[test]
fn browser_family_tools_list_fits_its_byte_budget() {
    let manager = Arc::new(BrowserManager::new(BrowserConfig::default()));
    let tools = browser_tools(manager, BrowserToolOptions::default());
    let names: Vec<&str> = tools.iter().map(|t| t.name()).collect();
    assert_eq!(
        names,
        forge_skills::BROWSER_TOOLS,
        "the whole family is measured (Chromium serves every browser tool)"
    );

    // Each entry as forge's MCP server sends it (forge-mcp's list_tools builds rmcp's Tool from
    // name, description and the schema object) and as the client receives it.
    let entries: Vec<rmcp::model::Tool> = tools
        .iter()
        .map(|t| {
            let schema = match t.input_schema() {
                Value::Object(m) => m,
                other => panic!("{}: the input schema is not an object: {other}", t.name()),
            };
            rmcp::model::Tool::new(t.name().to_string(), t.description().to_string(), schema)
        })
        .collect();
    let per_tool: Vec<(String, usize)> = entries
        .iter()
        .map(|e| {
            let bytes = serde_json::to_vec(e).map(|v| v.len()).unwrap_or(usize::MAX);
            (e.name.to_string(), bytes)
        })
        .collect();
    for (name, bytes) in &per_tool {
        assert!(*bytes < usize::MAX, "{name} does not serialize");
    }
    let family = serde_json::to_vec(&json!({ "tools": entries }))
        .expect("tools serialize (each one did above)")
        .len();

    assert!(
        family <= BUDGET,
        "the browser tools' tools/list JSON is {family} bytes, over its budget of {BUDGET} \
         (the goal, at most 6 KiB for the family, and the trim rules are recorded in \
         docs/benchmarks.md, section \"MCP (`forge mcp serve`)\"). Shorten descriptions and \
         schemas by those rules rather than raising the budget. Per tool: {per_tool:?}"
    );
}
