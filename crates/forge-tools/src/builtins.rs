//! The builtin tools.
//!
//! Always registered ([`always`]): `http_request` and `web_fetch` ([`http`]), `file_create`
//! ([`file_create`], which also holds the artifact writer other tools use), `datetime_now`
//! ([`datetime`]), `json_parse` ([`json_parse`]), `math_calculate` ([`math`]).
//! Registered on conditions decided by the runtime's assembly: `cli_execute` ([`cli_execute`]) and
//! skill script tools ([`script`]). [`process`] runs their child processes; [`html_text`] turns
//! HTML into readable text for `web_fetch`.

use std::sync::Arc;

use crate::tool::Tool;

pub mod cli_execute;
pub mod datetime;
pub mod file_create;
pub mod html_text;
pub mod http;
pub mod json_parse;
pub mod math;
pub mod process;
pub mod script;

/// Names of the builtins every agent gets, in registration order.
pub const ALWAYS: &[&str] = &[
    "http_request",
    "web_fetch",
    "file_create",
    "datetime_now",
    "json_parse",
    "math_calculate",
];

/// The builtins every agent gets, in the order of [`ALWAYS`].
pub fn always() -> Vec<Arc<dyn Tool>> {
    vec![
        Arc::new(http::HttpRequest),
        Arc::new(http::WebFetch),
        Arc::new(file_create::FileCreate),
        Arc::new(datetime::DatetimeNow),
        Arc::new(json_parse::JsonParse),
        Arc::new(math::MathCalculate),
    ]
}
