//! Which interpreter an executor runs.

/// JavaScript and TypeScript share Node executors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    Python,
    Node,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Self::Python => "python",
            Self::Node => "node",
        }
    }
}
