//! Errors in OpenAI's shape: `{"error": {"message", "type", "param", "code"}}`
//! with the HTTP status the OpenAI API (and vLLM / llama.cpp's server) use.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;

/// An error answered to a client. Every failure of a request ends as one of
/// these; nothing panics into a connection.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{status}: {message}")]
pub struct ApiError {
    /// The HTTP status of the answer.
    pub status: StatusCode,
    /// The human-readable explanation (OpenAI's `error.message`).
    pub message: String,
    /// OpenAI's `type`: `invalid_request_error`, `authentication_error`,
    /// `server_error`, ...
    pub kind: &'static str,
    /// The request field at fault, when there is one (`max_tokens`,
    /// `response_format.json_schema.schema`, ...).
    pub param: Option<String>,
    /// OpenAI's machine-readable `code` (`context_length_exceeded`, ...);
    /// `None` answers `null`.
    pub code: Option<&'static str>,
    /// Seconds for a `Retry-After` header (queue full).
    pub retry_after: Option<u64>,
    /// Answer with `Connection: close` (the request's body was not read to
    /// its end, so the connection cannot carry another request).
    pub close: bool,
}

impl ApiError {
    /// 400 `invalid_request_error` about `param`.
    pub fn bad(param: impl Into<Option<String>>, message: impl Into<String>) -> Self {
        ApiError {
            status: StatusCode::BAD_REQUEST,
            message: message.into(),
            kind: "invalid_request_error",
            param: param.into(),
            code: None,
            retry_after: None,
            close: false,
        }
    }

    /// 400 about the field `param` (a `&str` for brevity).
    pub fn field(param: &str, message: impl Into<String>) -> Self {
        Self::bad(Some(param.to_string()), message)
    }

    /// The same error with OpenAI's `code` set.
    pub fn with_code(mut self, code: &'static str) -> Self {
        self.code = Some(code);
        self
    }

    /// 401: a missing or wrong bearer token.
    pub fn unauthorized(message: impl Into<String>) -> Self {
        ApiError {
            status: StatusCode::UNAUTHORIZED,
            message: message.into(),
            kind: "authentication_error",
            param: None,
            code: Some("invalid_api_key"),
            retry_after: None,
            close: false,
        }
    }

    /// 413: the body is over the server's limit.
    pub fn too_large(limit: usize) -> Self {
        ApiError {
            status: StatusCode::PAYLOAD_TOO_LARGE,
            message: format!("the request body is over the server's limit of {limit} bytes"),
            kind: "invalid_request_error",
            param: None,
            code: Some("request_too_large"),
            retry_after: None,
            close: true,
        }
    }

    /// 400: the body could not be read as HTTP framed it (a bad chunk
    /// size, fewer bytes than `Content-Length` said, a connection error).
    pub fn malformed_body(why: impl std::fmt::Display) -> Self {
        ApiError {
            status: StatusCode::BAD_REQUEST,
            message: format!("the request body is malformed or incomplete: {why}"),
            kind: "invalid_request_error",
            param: None,
            code: Some("malformed_body"),
            retry_after: None,
            close: true,
        }
    }

    /// 408: the body did not arrive within the read timeout.
    pub fn body_timeout(timeout: std::time::Duration) -> Self {
        ApiError {
            status: StatusCode::REQUEST_TIMEOUT,
            message: format!(
                "the request body did not arrive within the server's read timeout of {} s (--read-timeout-s)",
                timeout.as_secs_f64()
            ),
            kind: "invalid_request_error",
            param: None,
            code: Some("request_timeout"),
            retry_after: None,
            close: true,
        }
    }

    /// 503 with `Retry-After`: every slot is busy and the queue is full.
    pub fn overloaded(queue: usize, retry_after: u64) -> Self {
        ApiError {
            status: StatusCode::SERVICE_UNAVAILABLE,
            message: format!(
                "the server is busy: every sequence slot is in use and {queue} requests are already waiting; retry later"
            ),
            kind: "server_error",
            param: None,
            code: Some("server_overloaded"),
            retry_after: Some(retry_after),
            close: false,
        }
    }

    /// 503 with `Retry-After`: the server holds `max` connections already
    /// (`--max-connections`).
    pub fn too_many_connections(max: usize) -> Self {
        ApiError {
            status: StatusCode::SERVICE_UNAVAILABLE,
            message: format!(
                "the server is busy: it holds its limit of {max} open connections (--max-connections); retry later"
            ),
            kind: "server_error",
            param: None,
            code: Some("too_many_connections"),
            retry_after: Some(1),
            close: true,
        }
    }

    /// 404 for an unknown route.
    pub fn not_found(what: impl Into<String>) -> Self {
        ApiError {
            status: StatusCode::NOT_FOUND,
            message: what.into(),
            kind: "invalid_request_error",
            param: None,
            code: Some("not_found"),
            retry_after: None,
            close: false,
        }
    }

    /// 500: something failed inside the server (the model, a worker).
    pub fn internal(message: impl Into<String>) -> Self {
        ApiError {
            status: StatusCode::INTERNAL_SERVER_ERROR,
            message: message.into(),
            kind: "server_error",
            param: None,
            code: None,
            retry_after: None,
            close: false,
        }
    }

    /// The JSON body.
    pub fn body(&self) -> serde_json::Value {
        json!({"error": {
            "message": self.message,
            "type": self.kind,
            "param": self.param,
            "code": self.code,
        }})
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut r = (self.status, axum::Json(self.body())).into_response();
        if let Some(s) = self.retry_after {
            if let Ok(v) = HeaderValue::from_str(&s.to_string()) {
                r.headers_mut().insert(header::RETRY_AFTER, v);
            }
        }
        if self.close {
            r.headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
        r
    }
}
