//! toxiproxy's routes: a method and a path, a body, and the answer, on
//! the [`Model`]. Plain data in and out, so that every route is tested
//! without a socket; the HTTP server hands each request here.

use super::model::{ApiError, Model, ProxyGiven};
use serde::Serialize;
use serde_json::{Map, Value};

/// The version the API reports: shape's, where toxiproxy says its own.
const VERSION: &str = env!("CARGO_PKG_VERSION");

/// What a request gets back.
#[derive(Debug, PartialEq)]
pub struct Answer {
    pub status: u16,
    /// JSON, or nothing for 204.
    pub body: Option<String>,
}

impl Answer {
    fn json(status: u16, value: &impl Serialize) -> Answer {
        Answer {
            status,
            body: Some(serde_json::to_string(value).expect("the model is plain data")),
        }
    }

    fn none() -> Answer {
        Answer {
            status: 204,
            body: None,
        }
    }

    fn error(error: ApiError) -> Answer {
        Answer::json(error.status, &error)
    }
}

/// Answers `method path` with `body` on `model`.
pub fn answer(model: &mut Model, method: &str, path: &str, body: &[u8]) -> Answer {
    route(model, method, path, body).unwrap_or_else(Answer::error)
}

fn route(model: &mut Model, method: &str, path: &str, body: &[u8]) -> Result<Answer, ApiError> {
    let path = path.split('?').next().unwrap_or(path);
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    match (method, parts.as_slice()) {
        ("GET", ["version"]) => Ok(Answer::json(
            200,
            &serde_json::json!({ "version": VERSION }),
        )),
        ("POST", ["reset"]) => {
            model.reset();
            Ok(Answer::none())
        }
        ("GET", ["proxies"]) => Ok(Answer::json(200, &model.proxies)),
        ("POST", ["proxies"]) => {
            let given: ProxyGiven = parse(body)?;
            Ok(Answer::json(201, model.create(given)?))
        }
        ("GET", ["proxies", name]) => Ok(Answer::json(200, model.proxy(name)?)),
        ("POST" | "PATCH", ["proxies", name]) => {
            let given: ProxyGiven = parse(body)?;
            Ok(Answer::json(200, model.update(name, given)?))
        }
        ("DELETE", ["proxies", name]) => {
            model.delete(name)?;
            Ok(Answer::none())
        }
        ("GET", ["proxies", name, "toxics"]) => Ok(Answer::json(200, &model.proxy(name)?.toxics)),
        ("POST", ["proxies", name, "toxics"]) => {
            let given: Map<String, Value> = parse(body)?;
            Ok(Answer::json(200, model.add_toxic(name, &given)?))
        }
        ("GET", ["proxies", name, "toxics", toxic]) => {
            let proxy = model.proxy(name)?;
            let found = proxy.toxics.iter().find(|t| t.name == *toxic);
            let toxic = found.ok_or_else(|| ApiError {
                error: "toxic not found".into(),
                status: 404,
            })?;
            Ok(Answer::json(200, toxic))
        }
        ("POST" | "PATCH", ["proxies", name, "toxics", toxic]) => {
            let given: Map<String, Value> = parse(body)?;
            Ok(Answer::json(200, model.update_toxic(name, toxic, &given)?))
        }
        ("DELETE", ["proxies", name, "toxics", toxic]) => {
            model.delete_toxic(name, toxic)?;
            Ok(Answer::none())
        }
        _ => Err(ApiError {
            error: "404 page not found".into(),
            status: 404,
        }),
    }
}

/// The body as `T`, or toxiproxy's 400.
fn parse<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    serde_json::from_slice(body).map_err(ApiError::bad_body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call(model: &mut Model, method: &str, path: &str, body: Value) -> (u16, Value) {
        let answer = answer(model, method, path, body.to_string().as_bytes());
        let body = answer
            .body
            .map(|text| serde_json::from_str(&text).unwrap())
            .unwrap_or(Value::Null);
        (answer.status, body)
    }

    #[test]
    fn every_route_answers_with_toxiproxys_status() {
        let mut model = Model::default();
        let m = &mut model;
        assert_eq!(call(m, "GET", "/version", json!(null)).0, 200);
        let proxy = json!({"name": "db", "upstream": "127.0.0.1:5432"});
        assert_eq!(call(m, "POST", "/proxies", proxy.clone()).0, 201);
        assert_eq!(call(m, "POST", "/proxies", proxy).0, 409);
        let (status, index) = call(m, "GET", "/proxies", json!(null));
        assert_eq!(
            (status, index["db"]["upstream"].clone()),
            (200, json!("127.0.0.1:5432"))
        );
        assert_eq!(call(m, "GET", "/proxies/db", json!(null)).0, 200);
        assert_eq!(
            call(m, "PATCH", "/proxies/db", json!({"enabled": false})).1["enabled"],
            json!(false)
        );
        assert_eq!(
            call(m, "POST", "/proxies/db", json!({"enabled": true})).0,
            200
        );
        let toxic = json!({"type": "slow_close", "attributes": {"delay": 10}});
        assert_eq!(call(m, "POST", "/proxies/db/toxics", toxic).0, 200);
        assert_eq!(
            call(m, "GET", "/proxies/db/toxics", json!(null)).1[0]["name"],
            json!("slow_close_downstream")
        );
        assert_eq!(
            call(
                m,
                "GET",
                "/proxies/db/toxics/slow_close_downstream",
                json!(null)
            )
            .0,
            200
        );
        assert_eq!(
            call(
                m,
                "PATCH",
                "/proxies/db/toxics/slow_close_downstream",
                json!({"attributes": {"delay": 20}})
            )
            .1["attributes"]["delay"],
            json!(20)
        );
        assert_eq!(
            call(
                m,
                "DELETE",
                "/proxies/db/toxics/slow_close_downstream",
                json!(null)
            ),
            (204, Value::Null)
        );
        assert_eq!(
            call(
                m,
                "DELETE",
                "/proxies/db/toxics/slow_close_downstream",
                json!(null)
            )
            .0,
            404
        );
        assert_eq!(call(m, "POST", "/reset", json!(null)).0, 204);
        assert_eq!(call(m, "DELETE", "/proxies/db", json!(null)).0, 204);
        assert_eq!(
            call(m, "GET", "/proxies/db", json!(null)),
            (404, json!({"error": "proxy not found", "status": 404}))
        );
        let bad = answer(m, "POST", "/proxies", b"{not json");
        assert_eq!(bad.status, 400);
        assert!(bad.body.unwrap().contains("bad request body"));
        assert_eq!(call(m, "GET", "/nowhere", json!(null)).0, 404);
    }
}
