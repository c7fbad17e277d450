//! What the map knows about one file (cached as JSON in the PC store).

use serde::{Deserialize, Serialize};

/// Bump when extraction changes: cached entries of another version are re-parsed.
/// It covers the rendered section kept in the cache too: 4 made the section
/// compact (members counted, not listed), so a row of 3 holds the long form.
pub const EXTRACT_VERSION: i64 = 4;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Lang {
    Rust,
    Python,
    TypeScript,
    Tsx,
    JavaScript,
    Go,
}

impl Lang {
    /// The language of a file name, by extension; None: not mapped.
    pub fn of_path(path: &str) -> Option<Lang> {
        let ext = path.rsplit_once('.')?.1;
        Some(match ext {
            "rs" => Lang::Rust,
            "py" | "pyi" => Lang::Python,
            "ts" | "mts" | "cts" => Lang::TypeScript,
            "tsx" => Lang::Tsx,
            "js" | "mjs" | "cjs" | "jsx" => Lang::JavaScript,
            "go" => Lang::Go,
            _ => return None,
        })
    }

    /// The name shown in summaries (TSX counts as TypeScript).
    pub fn label(self) -> &'static str {
        match self {
            Lang::Rust => "Rust",
            Lang::Python => "Python",
            Lang::TypeScript | Lang::Tsx => "TypeScript",
            Lang::JavaScript => "JavaScript",
            Lang::Go => "Go",
        }
    }
}

/// One declaration: a module, type, trait/interface, function or method.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Item {
    /// `fn`, `struct`, `class`, `def`, `interface`, `func`, `method`, …
    pub kind: String,
    pub name: String,
    /// The declaration up to its body, whitespace collapsed.
    pub sig: String,
    /// First line of its doc comment / docstring.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub doc: Option<String>,
    /// Methods of a type or impl, items of an inline module.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub children: Vec<Item>,
}

/// A mapped file as parsed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileEntry {
    pub lang: Lang,
    /// First line of the file's own doc (`//!`, module docstring, package comment).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub doc: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub items: Vec<Item>,
    /// Why the file did not parse cleanly (items may then be partial).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// A NUL byte near the start: not text, not mapped.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub binary: bool,
}

impl FileEntry {
    pub fn binary(lang: Lang) -> FileEntry {
        FileEntry { lang, doc: None, items: vec![], error: None, binary: true }
    }

    pub fn failed(lang: Lang, reason: impl Into<String>) -> FileEntry {
        FileEntry { lang, doc: None, items: vec![], error: Some(reason.into()), binary: false }
    }
}

/// What the outputs need of a file, and what the cache keeps: the file's
/// rendered part of code-map.md and the few fields llms.txt uses. Keeping the
/// rendered part (not the items) makes an unchanged file cost one string.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Summary {
    pub lang: Lang,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub binary: bool,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub failed: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub doc: Option<String>,
    /// Top-level item names, one per line.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub names: String,
    /// The file's part of code-map.md, below its heading.
    pub section: String,
}
