//! What a request gets back, as plain data: a status, a body and its
//! content type. The API's routes answer with it, the dashboard's files
//! are served as it, and the HTTP server writes it out. It belongs to
//! none of them, so that none of them depends on another for it.

use crate::model::ApiError;
use serde::Serialize;

/// What a request gets back.
#[derive(Debug, PartialEq)]
pub struct Reply {
    pub status: u16,
    /// JSON (or Prometheus text for /metrics), or nothing for 204.
    pub body: Option<String>,
    pub content_type: &'static str,
}

impl Reply {
    pub fn json(status: u16, value: &impl Serialize) -> Reply {
        Reply {
            status,
            body: Some(serde_json::to_string(value).expect("the model is plain data")),
            content_type: "application/json",
        }
    }

    /// 204: done, nothing to say.
    pub(crate) fn none() -> Reply {
        Reply {
            status: 204,
            body: None,
            content_type: "text/plain",
        }
    }

    pub fn error(error: ApiError) -> Reply {
        Reply::json(error.status, &error)
    }
}
