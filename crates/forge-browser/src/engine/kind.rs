//! [`EngineKind`]: the name of an engine (Chromium or Lightpanda), kept apart from the trait so
//! that `binary.rs`'s not-found error can name the engine without an import circle.

use super::{Chromium, Engine, Lightpanda};

/// Which engine (forge.yaml `browser.engine`, `FORGE_BROWSER_ENGINE`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum EngineKind {
    /// Chromium: every capability.
    #[default]
    Chromium,
    /// Lightpanda: no layout, one tab, no dialogs that block, text-only screenshots.
    Lightpanda,
}

impl EngineKind {
    /// The names accepted, as written.
    pub const NAMES: [&'static str; 2] = ["chromium", "lightpanda"];

    /// The engine named `s` (case-insensitive, trimmed); `None` for anything else.
    pub fn parse(s: &str) -> Option<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "chromium" => Some(Self::Chromium),
            "lightpanda" => Some(Self::Lightpanda),
            _ => None,
        }
    }

    /// Its name as written in forge.yaml.
    pub fn name(self) -> &'static str {
        match self {
            Self::Chromium => "chromium",
            Self::Lightpanda => "lightpanda",
        }
    }

    /// Its name in messages (`Chromium`, `Lightpanda`).
    pub fn title(self) -> &'static str {
        match self {
            Self::Chromium => "Chromium",
            Self::Lightpanda => "Lightpanda",
        }
    }

    /// The engine's implementation.
    pub fn engine(self) -> &'static dyn Engine {
        match self {
            Self::Chromium => &Chromium,
            Self::Lightpanda => &Lightpanda,
        }
    }
}

impl std::fmt::Display for EngineKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
