//! What a schema violation tells the caller: a small reason code and a sentence.

use jsonschema::error::{TypeKind, ValidationErrorKind};
use jsonschema::ValidationError;

use crate::telemetry::SCHEMA_REASONS;
use crate::wording::Words;

/// A violation, described without echoing the offending value.
#[derive(Debug)]
pub(crate) struct Violation {
    pub(crate) reason: &'static str,
    /// JSON Pointer of the field at fault (empty for the whole body).
    pub(crate) field: String,
    /// What is wrong with it, as the end of a sentence.
    pub(crate) problem: String,
}

impl Violation {
    /// What the layer says of it: the arguments break the operation's schema (`version`).
    pub(crate) fn told(&self, version: &str) -> Words {
        let place = if self.field.is_empty() {
            "the arguments".to_owned()
        } else {
            format!("the field `{}`", self.field)
        };
        Words::new(
            "invalid",
            "Invalid arguments",
            "invalid",
            false,
            format!(
                "The action was not executed: {place} {}. Calling again with the same \
                 arguments will be refused again; fix them first.",
                self.problem
            ),
        )
        .member("reason", self.reason)
        .member("field", self.field.as_str())
        .member("schema_version", version)
    }

    /// The violation as one line naming its field by JSON Pointer: `/count: is below the
    /// minimum of 1`.
    #[cfg(feature = "mcp")]
    pub(crate) fn pointed(&self) -> String {
        let field = if self.field.is_empty() {
            "the arguments"
        } else {
            self.field.as_str()
        };
        format!("{field}: {}", self.problem)
    }

    /// The body is not JSON at all.
    pub(crate) fn not_json() -> Self {
        Self {
            reason: "not_json",
            field: String::new(),
            problem: "are not a JSON document".to_owned(),
        }
    }

    pub(crate) fn of(error: &ValidationError<'_>) -> Self {
        let mut field = error.instance_path().as_str().to_owned();
        let (reason, problem) = match error.kind() {
            ValidationErrorKind::Required { property } => {
                let name = property.as_str().unwrap_or_default();
                field = format!("{field}/{}", name.replace('~', "~0").replace('/', "~1"));
                ("required", "is required but missing".to_owned())
            }
            ValidationErrorKind::Type { kind } => {
                let wanted: Vec<&str> = match kind {
                    TypeKind::Single(one) => vec![one.as_str()],
                    TypeKind::Multiple(set) => set.iter().map(|one| one.as_str()).collect(),
                };
                let wanted = wanted.join(" or ");
                (
                    "type",
                    format!("has the wrong type (the schema asks for {wanted})"),
                )
            }
            ValidationErrorKind::Format { format } => {
                ("format", format!("is not a valid {format}"))
            }
            ValidationErrorKind::AdditionalProperties { unexpected } => (
                "additional_properties",
                format!(
                    "has fields the schema does not allow: {}",
                    unexpected.join(", ")
                ),
            ),
            ValidationErrorKind::Enum { .. } | ValidationErrorKind::Constant { .. } => {
                ("enum", "is not one of the allowed values".to_owned())
            }
            ValidationErrorKind::Pattern { .. } => {
                ("pattern", "does not match the required pattern".to_owned())
            }
            ValidationErrorKind::MinLength { limit } => {
                ("length", format!("is shorter than {limit} characters"))
            }
            ValidationErrorKind::MaxLength { limit } => {
                ("length", format!("is longer than {limit} characters"))
            }
            ValidationErrorKind::Minimum { limit } => {
                ("range", format!("is below the minimum of {limit}"))
            }
            ValidationErrorKind::Maximum { limit } => {
                ("range", format!("is above the maximum of {limit}"))
            }
            ValidationErrorKind::ExclusiveMinimum { limit } => {
                ("range", format!("must be greater than {limit}"))
            }
            ValidationErrorKind::ExclusiveMaximum { limit } => {
                ("range", format!("must be less than {limit}"))
            }
            ValidationErrorKind::MultipleOf { multiple_of } => {
                ("range", format!("is not a multiple of {multiple_of}"))
            }
            ValidationErrorKind::MinItems { limit } => {
                ("items", format!("has fewer than {limit} items"))
            }
            ValidationErrorKind::MaxItems { limit } => {
                ("items", format!("has more than {limit} items"))
            }
            _ => ("schema", "does not match the schema".to_owned()),
        };
        debug_assert!(
            SCHEMA_REASONS.contains(&reason),
            "a reason with no series: {reason}"
        );
        Self {
            reason,
            field,
            problem,
        }
    }
}
