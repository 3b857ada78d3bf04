//! Why a mapping pattern or template cannot be compiled. Each message names
//! the text as written and says what to write instead; the config reader
//! shows it under the key that holds the text (`match`, `match_regex`,
//! `rename`, `labels.*`), and `GET /api/v1/series?match=` in its 400.

use super::glob::{MAX_GLOB_BYTES, MAX_GLOB_WILDCARDS};

/// Why [`Glob::new`](super::Glob::new) refused a glob.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GlobError {
    /// The glob is empty.
    #[error("an empty glob matches nothing; use \"**\" to match every name")]
    Empty,
    /// The glob is longer than [`MAX_GLOB_BYTES`].
    #[error(
        "glob `{head}…` is {len} bytes; at most {MAX_GLOB_BYTES} are allowed: \
         shorten it, or split it into several rules"
    )]
    TooLong {
        /// Its first 24 characters, escaped.
        head: String,
        /// Its length in bytes.
        len: usize,
    },
    /// Three or more `*` in a row.
    #[error("`{0}`: use `*` (one component) or `**` (any depth), not `***`")]
    TripleStar(String),
    /// A control character.
    #[error("`{0}` contains a control character")]
    ControlCharacter(String),
    /// Two wildcards with no literal between them.
    #[error("`{0}`: two wildcards in a row are ambiguous; put a literal between them")]
    AdjacentWildcards(String),
    /// More than [`MAX_GLOB_WILDCARDS`] wildcards.
    #[error(
        "`{pattern}`: {count} wildcards; at most {MAX_GLOB_WILDCARDS} are allowed \
         (each is a capture); use match_regex for more complex patterns"
    )]
    TooManyWildcards {
        /// The glob.
        pattern: String,
        /// Its wildcards.
        count: usize,
    },
}

/// Why [`NameRegex::new`](super::NameRegex::new) refused a regex.
#[derive(Debug, Clone, thiserror::Error)]
pub enum RegexError {
    /// The regex is empty.
    #[error("an empty regex matches no name; use \".+\" to match every name")]
    Empty,
    /// The `regex` crate's message about the pattern as written (it may
    /// draw a caret under the pattern over several lines).
    #[error(transparent)]
    Invalid(#[from] regex::Error),
}

/// Why a template (`rename`, a label value) cannot be compiled against its
/// pattern's captures.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    /// `${` without its `}`.
    #[error("`{0}`: unclosed `${{`")]
    Unclosed(String),
    /// `$` followed by neither a number, `{`, nor `$`.
    #[error("`{0}`: `$` must be followed by a capture number, e.g. $1 (write $$ for a literal $)")]
    MissingNumber(String),
    /// A capture number the pattern does not have.
    #[error("`{template}` uses ${number} but the {pattern} has {captures} capture(s)")]
    NoSuchNumber {
        /// The template.
        template: String,
        /// The number it uses.
        number: usize,
        /// `glob` or `regex`.
        pattern: &'static str,
        /// How many captures the pattern has.
        captures: usize,
    },
    /// A capture name the pattern does not have.
    #[error("`{template}` uses ${{{name}}} but the {pattern} has no capture named `{name}`")]
    NoSuchName {
        /// The template.
        template: String,
        /// The name it uses.
        name: String,
        /// `glob` or `regex`.
        pattern: &'static str,
    },
}
