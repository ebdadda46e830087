//! Diagnostics: every problem the loader and the validator find, with file, line,
//! column, the job concerned and, where one helps, a hint.

use std::fmt;
use std::sync::Arc;

use serde::Serialize;

use crate::yaml::Mark;

/// How bad a problem is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// The configuration cannot be used.
    Error,
    /// The configuration loads, but something is probably wrong (Prow's checkconfig warnings).
    Warning,
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
        })
    }
}

/// One problem.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Diagnostic {
    /// Error or warning.
    pub severity: Severity,
    /// The file, when the problem is in one.
    pub file: Option<Arc<str>>,
    /// Where in the file.
    pub mark: Option<Mark>,
    /// The job concerned, when there is one.
    pub job: Option<String>,
    /// What is wrong.
    pub message: String,
    /// What to do about it.
    pub hint: Option<String>,
    /// A field below `mark` (a job or preset) whose position the loader fills in.
    #[serde(skip)]
    pub(crate) field: Option<Box<str>>,
}

impl Diagnostic {
    /// An error.
    pub fn error(message: impl Into<String>) -> Self {
        Diagnostic {
            severity: Severity::Error,
            file: None,
            mark: None,
            job: None,
            message: message.into(),
            hint: None,
            field: None,
        }
    }

    /// A warning.
    pub fn warning(message: impl Into<String>) -> Self {
        Diagnostic {
            severity: Severity::Warning,
            ..Diagnostic::error(message)
        }
    }

    /// Sets the file and position.
    pub fn at(mut self, file: &Arc<str>, mark: Mark) -> Self {
        self.file = Some(file.clone());
        self.mark = Some(mark);
        self
    }

    /// Points at `field` below the definition starting at `mark`; the loader
    /// resolves it to the field's own position.
    pub(crate) fn at_field(mut self, file: &Arc<str>, mark: Mark, field: &str) -> Self {
        self.file = Some(file.clone());
        self.mark = Some(mark);
        self.field = (!field.is_empty()).then(|| field.into());
        self
    }

    /// Sets the file only.
    pub fn in_file(mut self, file: &Arc<str>) -> Self {
        self.file = Some(file.clone());
        self
    }

    /// Sets the job.
    pub fn job(mut self, job: impl Into<String>) -> Self {
        self.job = Some(job.into());
        self
    }

    /// Adds a hint.
    pub fn hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }

    /// True for errors.
    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }

    /// Sort key: file, position, then text, so output is stable.
    pub fn sort_key(&self) -> impl Ord + '_ {
        (
            self.file.as_deref().unwrap_or(""),
            self.mark.unwrap_or_default(),
            self.severity,
            self.job.as_deref().unwrap_or(""),
            self.message.as_str(),
        )
    }
}

impl fmt::Display for Diagnostic {
    /// `file:line:column: error|warning: job NAME: message`, then an indented hint.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.file, self.mark) {
            (Some(file), Some(mark)) => write!(f, "{file}:{}:{}: ", mark.line, mark.col)?,
            (Some(file), None) => write!(f, "{file}: ")?,
            _ => {}
        }
        write!(f, "{}: ", self.severity)?;
        match self.job.as_deref() {
            Some("") => f.write_str("job (unnamed): ")?,
            Some(job) => write!(f, "job {job}: ")?,
            None => {}
        }
        f.write_str(&self.message)?;
        if let Some(hint) = &self.hint {
            write!(f, "\n  hint: {hint}")?;
        }
        Ok(())
    }
}
