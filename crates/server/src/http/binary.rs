//! How raw byte bodies (an image archive in, a blob out) appear in the OpenAPI document: a
//! `string` of format `binary`, as OpenAPI describes `application/octet-stream` (`Vec<u8>` would
//! document an array of integers, which no client sends).

use utoipa::ToSchema;

/// Raw bytes.
#[derive(ToSchema)]
#[schema(value_type = String, format = Binary)]
#[allow(dead_code)] // a documentation type: bodies are read as streams
pub struct BinaryBody(Vec<u8>);
