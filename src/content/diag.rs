//! Diagnostics: every problem found in a mod, with the file, line and column to fix.

use std::fmt;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Severity {
    Error,
    Warning,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    pub severity: Severity,
    pub mod_id: Option<String>,
    pub file: Option<String>,
    pub line: Option<usize>,
    pub col: Option<usize>,
    pub message: String,
}

impl Diagnostic {
    pub fn error(mod_id: Option<&str>, file: Option<&str>, message: impl Into<String>) -> Self {
        Diagnostic {
            severity: Severity::Error,
            mod_id: mod_id.map(str::to_string),
            file: file.map(str::to_string),
            line: None,
            col: None,
            message: message.into(),
        }
    }

    pub fn warning(mod_id: Option<&str>, file: Option<&str>, message: impl Into<String>) -> Self {
        Diagnostic { severity: Severity::Warning, ..Self::error(mod_id, file, message) }
    }

    pub fn at(mut self, pos: Option<(usize, usize)>) -> Self {
        if let Some((l, c)) = pos {
            self.line = Some(l);
            self.col = Some(c);
        }
        self
    }

    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sev = match self.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        write!(f, "{sev}: ")?;
        if let Some(file) = &self.file {
            write!(f, "{}", escape_text(file))?;
            if let Some(l) = self.line {
                write!(f, ":{l}")?;
                if let Some(c) = self.col {
                    write!(f, ":{c}")?;
                }
            }
            write!(f, ": ")?;
        }
        if let Some(m) = &self.mod_id {
            write!(f, "[mod {m}] ")?;
        }
        write!(f, "{}", escape_text(&self.message))
    }
}

/// Text from a script made safe to print: control characters (newlines, escape codes)
/// are shown escaped, so nothing a mod writes can forge a log line or a tool's output.
pub fn escape_text(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

/// 1-based line and column of a byte offset.
/// Line and column of many offsets in one text: the line starts are found once, so a
/// file with thousands of entries is located in linear time.
pub struct LineIndex<'a> {
    text: &'a str,
    starts: Vec<usize>,
}

impl<'a> LineIndex<'a> {
    pub fn new(text: &'a str) -> Self {
        let starts = std::iter::once(0).chain(text.match_indices('\n').map(|(i, _)| i + 1)).collect();
        LineIndex { text, starts }
    }

    pub fn line_col(&self, offset: usize) -> (usize, usize) {
        let offset = self.text.floor_char_boundary(offset.min(self.text.len()));
        let line = self.starts.partition_point(|&s| s <= offset);
        let start = self.starts[line - 1];
        (line, self.text[start..offset].chars().count() + 1)
    }
}

pub fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = &text[..text.floor_char_boundary(offset)];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, col)
}
