//! The builtin tools (to be written).
