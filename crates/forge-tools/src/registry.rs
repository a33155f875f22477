//! The [`Registry`]: the tools an agent has, in registration order.

use std::sync::Arc;

use crate::tool::Tool;

/// The set of tools an agent can call, kept in registration order.
#[derive(Default, Clone)]
pub struct Registry {
    tools: Vec<Arc<dyn Tool>>,
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Add `tool`, replacing any tool of the same name (the later registration wins).
    pub fn register(&mut self, tool: Arc<dyn Tool>) {
        self.tools.retain(|t| t.name() != tool.name());
        self.tools.push(tool);
    }

    /// The tool called `name`, if registered.
    pub fn get(&self, name: &str) -> Option<Arc<dyn Tool>> {
        self.tools.iter().find(|t| t.name() == name).cloned()
    }

    /// Remove the tool called `name`; returns whether it was there.
    pub fn remove(&mut self, name: &str) -> bool {
        let before = self.tools.len();
        self.tools.retain(|t| t.name() != name);
        before != self.tools.len()
    }

    /// All tools, in registration order.
    pub fn list(&self) -> &[Arc<dyn Tool>] {
        &self.tools
    }
}
