//! A report as corral's JSON (CS50 Check's shape plus points, timings, integrity, images and
//! runtimes) and as CS50 Check's own, and both printed with a readable key order.

use serde::Serialize;
use serde_json::{json, Map, Value};

use super::model::{CheckResult, Report, View, HIDDEN_ERROR};
use super::values::num;

impl CheckResult {
    fn cs50_json(&self, view: View) -> Map<String, Value> {
        let mut m = Map::new();
        m.insert("dependencies".into(), json!(self.dependencies));
        m.insert("description".into(), json!(self.description));
        m.insert("result".into(), json!(self.result));
        m.insert(
            "script".into(),
            serde_json::to_value(self.visible_script(view)).expect("serializable"),
        );
        m
    }
}

impl Report {
    /// corral's JSON: CS50 Check's `{"results": {...}}` with added fields per check (`points`,
    /// `max_points`, `time_ms`, `hidden`, `message`, `error`, `not_gradable` (when a grader
    /// refused the submission), `diagnostics` (staff view only),
    /// `image`, `runtime`) and at the top
    /// (`suite`, `score`, `max_score`, `passed`, `integrity`, `images`). `image` is `{"name",
    /// "digest"}` of the container image the check ran in (absent on the host root); `images`
    /// lists each once (absent when none); `runtime` is `native` or `gvisor`.
    pub fn to_json(&self, view: View) -> Value {
        let mut results = Map::new();
        for r in self.results.iter().filter(|r| !r.omitted(view)) {
            let mut m = r.cs50_json(view);
            m.insert("points".into(), num(r.points));
            m.insert("max_points".into(), num(r.max_points));
            m.insert("time_ms".into(), json!(r.time_ms));
            m.insert("hidden".into(), json!(r.hidden));
            if let Some(msg) = r.visible_message(view) {
                m.insert("message".into(), json!(msg));
            }
            if let Some(e) = &r.error {
                let hidden = r.hidden && view == View::Student;
                m.insert("error".into(), json!(if hidden { HIDDEN_ERROR } else { e }));
            }
            if r.not_gradable {
                m.insert("not_gradable".into(), json!(true));
            }
            if let Some(d) = r.visible_diagnostics(view) {
                m.insert("diagnostics".into(), json!(d));
            }
            if let Some(i) = self.images.get(&r.id) {
                m.insert("image".into(), json!(i));
            }
            if let Some(rt) = self.runtimes.get(&r.id) {
                m.insert("runtime".into(), json!(rt));
            }
            results.insert(r.id.clone(), Value::Object(m));
        }
        let mut v = json!({
            "suite": self.suite,
            "results": results,
            "score": num(self.score()),
            "max_score": num(self.max_score()),
            "passed": self.passed(),
            "integrity": self.integrity,
        });
        if let Some(s) = &self.safety {
            v["safety"] = serde_json::to_value(s).expect("serializable");
        }
        let images = self.used_images();
        if !images.is_empty() {
            v["images"] = json!(images);
        }
        v
    }

    /// Exactly CS50 Check's shape: `{"results": {id: {dependencies, description, result, script}}}`.
    pub fn to_cs50(&self, view: View) -> Value {
        let results: Map<String, Value> = self
            .results
            .iter()
            .filter(|r| !r.omitted(view))
            .map(|r| (r.id.clone(), Value::Object(r.cs50_json(view))))
            .collect();
        json!({ "results": results })
    }

    /// `value` (one of this report's exports) as indented JSON, keys in a readable order and the
    /// checks in suite order.
    pub fn pretty(&self, value: &Value) -> String {
        let ids: Vec<String> = self.results.iter().map(|r| r.id.clone()).collect();
        let ordered = Ordered {
            value,
            ids: &ids,
            top: false,
        };
        serde_json::to_string_pretty(&ordered).expect("JSON values serialize") + "\n"
    }
}

/// Keys printed first, in this order, at every level of a report's JSON; others follow sorted.
const KEY_ORDER: &[&str] = &[
    "suite",
    "results",
    "score",
    "max_score",
    "passed",
    "integrity",
    "safety",
    "images",
    "dependencies",
    "description",
    "result",
    "script",
    "type",
    "value",
    "match",
    "points",
    "max_points",
    "time_ms",
    "hidden",
    "message",
    "error",
    "not_gradable",
    "diagnostics",
    "image",
    "runtime",
    "runtimes",
    "name",
    "digest",
    "number",
    "status",
    "output",
    "visibility",
    "stdout_visibility",
    "tests",
    "extra_data",
    "leaderboard",
    "ok",
    "flagged",
    "path",
    "reason",
];

/// A JSON value printed with readable key order: [`KEY_ORDER`], and the checks of `results` in
/// suite order.
struct Ordered<'a> {
    value: &'a Value,
    ids: &'a [String],
    top: bool,
}

impl Serialize for Ordered<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::{SerializeMap, SerializeSeq};
        match self.value {
            Value::Object(m) => {
                let mut keys: Vec<&String> = m.keys().collect();
                let rank = |k: &str| -> (usize, usize) {
                    if self.top {
                        if let Some(i) = self.ids.iter().position(|id| id == k) {
                            return (0, i);
                        }
                    }
                    match KEY_ORDER.iter().position(|o| *o == k) {
                        Some(i) => (1, i),
                        None => (2, 0),
                    }
                };
                keys.sort_by(|a, b| rank(a).cmp(&rank(b)).then(a.cmp(b)));
                let mut map = s.serialize_map(Some(keys.len()))?;
                for k in keys {
                    let inner = Ordered {
                        value: &m[k],
                        ids: self.ids,
                        // The ids are the keys of the object under `results`.
                        top: k == "results",
                    };
                    map.serialize_entry(k, &inner)?;
                }
                map.end()
            }
            Value::Array(a) => {
                let mut seq = s.serialize_seq(Some(a.len()))?;
                for v in a {
                    seq.serialize_element(&Ordered {
                        value: v,
                        ids: self.ids,
                        top: false,
                    })?;
                }
                seq.end()
            }
            other => other.serialize(s),
        }
    }
}

#[cfg(test)]
mod tests {

    use crate::report::model::*;
    use crate::report::test_rows::report;
    use serde_json::Value;

    /// Reports list their checks in the suite's order, as check50 does (`exists` before
    /// `compiles`), not by name: the editor and a client showing the keys in order follow it.
    #[test]
    fn the_results_keep_the_suites_order() {
        let mut r = report();
        r.results.reverse();
        for v in [r.to_json(View::Staff), r.to_cs50(View::Staff)] {
            let keys: Vec<&str> = v["results"]
                .as_object()
                .unwrap()
                .keys()
                .map(String::as_str)
                .collect();
            assert_eq!(keys, ["c", "b", "a"], "{v}");
            let text = serde_json::to_string(&v).unwrap();
            assert!(text.find("\"c\"") < text.find("\"a\""), "{text}");
        }
    }

    #[test]
    fn cs50_shape_is_exact() {
        let v = report().to_cs50(View::Staff);
        let obj = v.as_object().unwrap();
        assert_eq!(obj.keys().collect::<Vec<_>>(), vec!["results"]);
        let a = v["results"]["a"].as_object().unwrap();
        assert_eq!(
            a.keys().collect::<Vec<_>>(),
            vec!["dependencies", "description", "result", "script"]
        );
        assert!(v["results"]["c"]["result"].is_null());
        let j = report().to_json(View::Student);
        assert_eq!(j["score"], 2);
        assert_eq!(j["max_score"], 6);
        assert_eq!(j["results"]["c"]["message"], SKIPPED);
    }

    #[test]
    fn pretty_json_keeps_suite_order() {
        let mut r = report();
        r.results.reverse(); // c, b, a
        let text = r.pretty(&r.to_json(View::Staff));
        let (c, b, a) = (
            text.find("\"c\": {").unwrap(),
            text.find("\"b\": {").unwrap(),
            text.find("\"a\": {").unwrap(),
        );
        assert!(c < b && b < a, "{text}");
        assert!(text.find("\"suite\"").unwrap() < text.find("\"results\"").unwrap());
        assert!(text.find("\"dependencies\"").unwrap() < text.find("\"script\"").unwrap());
        let back: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(back, r.to_json(View::Staff));
    }
}
