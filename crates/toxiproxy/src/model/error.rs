//! An answer other than success, as toxiproxy words and numbers it, with
//! the few that more than one change gives.

use crate::toxics::BadAttribute;
use serde::Serialize;

/// An answer other than success, as toxiproxy words and numbers it:
/// `{"error": "...", "status": N}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ApiError {
    pub error: String,
    pub status: u16,
}

impl ApiError {
    pub fn new(error: impl Into<String>, status: u16) -> ApiError {
        ApiError {
            error: error.into(),
            status,
        }
    }

    /// toxiproxy's words first, then the detail, as it joins them.
    pub fn bad_body(why: impl std::fmt::Display) -> ApiError {
        ApiError::new(format!("bad request body: {why}"), 400)
    }

    pub fn missing(field: &str) -> ApiError {
        ApiError::new(format!("missing required field: {field}"), 400)
    }

    pub(super) fn proxy_not_found() -> ApiError {
        ApiError::new("proxy not found", 404)
    }

    pub fn toxic_not_found() -> ApiError {
        ApiError::new("toxic not found", 404)
    }
}

impl From<BadAttribute> for ApiError {
    fn from(bad: BadAttribute) -> ApiError {
        ApiError::bad_body(format!("attribute {} must be {}", bad.name, bad.wanted))
    }
}
