//! Results of a graded submission and their exports:
//!
//! - [`model`]: the report itself, its rows and what they add up to;
//! - [`json`]: corral's JSON and CS50 Check's, printed in a readable order;
//! - [`gradescope`]: Gradescope's `results.json`;
//! - [`text`]: check50-style text for a terminal;
//! - [`values`]: how numbers and values are written, shared by the exports.

mod gradescope;
mod json;
mod model;
#[cfg(test)]
mod test_rows;
mod text;
mod values;

pub use gradescope::AUTOGRADER_EXTRA_DATA;
pub use model::{
    CheckResult, Finding, GradescopeExtras, Integrity, IntegrityFlag, Observation, Report,
    SafetyReport, ScanError, ScriptEntry, View, HIDDEN_ERROR, HIDDEN_FAILED, SKIPPED,
};
pub use text::inert;
pub use values::{cut_text, show};

#[cfg(test)]
mod tests {

    use crate::image_root::UsedImage;
    use crate::report::model::*;
    use crate::report::test_rows::report;
    use corral_sandbox::Runtime;
    use serde_json::json;

    #[test]
    fn hidden_details_never_reach_students() {
        let r = report();
        for text in [
            r.to_json(View::Student).to_string(),
            r.to_cs50(View::Student).to_string(),
            r.to_gradescope(View::Student).to_string(),
        ] {
            // "a" is visible, so its copy of the secret shows; count exactly that one.
            assert_eq!(text.matches("secret answer 42").count(), 1, "{text}");
        }
        // Text shows expected/actual only for failures, and "b" (the failure) is hidden.
        let text = r.render_text(View::Student, false);
        assert!(!text.contains("secret answer 42"), "{text}");
        assert!(r
            .render_text(View::Staff, false)
            .contains("secret answer 42"));
        assert_eq!(
            r.to_json(View::Staff)["results"]["b"]["script"][0]["expected"]["value"],
            "secret answer 42"
        );
        let gs = r.to_gradescope(View::Student);
        assert_eq!(gs["tests"][1]["visibility"], "after_published");
        assert_eq!(gs["tests"][0]["visibility"], "visible");
        assert_eq!(gs["score"], 2);
    }

    /// What a program wrote when its check could not be judged (pytest's standard error) may
    /// quote hidden tests: every staff view has it, no student view does.
    #[test]
    fn diagnostics_are_for_staff_only() {
        let mut r = report();
        r.results[0].result = Some(false);
        r.results[0].diagnostics = Some("pytest's standard error:\nsecret hidden source".into());
        for text in [
            r.to_json(View::Student).to_string(),
            r.to_cs50(View::Student).to_string(),
            r.to_gradescope(View::Student).to_string(),
            r.render_text(View::Student, false),
            r.to_cs50(View::Staff).to_string(),
        ] {
            assert!(!text.contains("secret hidden source"), "{text}");
        }
        assert_eq!(
            r.to_json(View::Staff)["results"]["a"]["diagnostics"],
            "pytest's standard error:\nsecret hidden source"
        );
        let gs = r.to_gradescope(View::Staff);
        assert!(
            gs["tests"][0]["output"]
                .as_str()
                .unwrap()
                .ends_with("pytest's standard error:\nsecret hidden source"),
            "{gs}"
        );
        let t = r.render_text(View::Staff, false);
        assert!(t.contains("      secret hidden source\n"), "{t}");
    }

    #[test]
    fn reports_record_the_image_each_check_ran_in() {
        let mut r = report();
        let j = r.to_json(View::Student);
        assert!(j.get("images").is_none() && j["results"]["a"].get("image").is_none());
        assert!(!r.render_text(View::Student, false).contains("image:"));
        let img = UsedImage {
            name: "python:3.12-slim".into(),
            digest: format!("sha256:{}", "ab".repeat(32)),
        };
        r.images.insert("a".into(), img.clone());
        r.images.insert("b".into(), img.clone());
        let j = r.to_json(View::Student);
        assert_eq!(j["results"]["a"]["image"]["digest"], img.digest.as_str());
        assert_eq!(j["results"]["b"]["image"]["name"], "python:3.12-slim");
        assert!(j["results"]["c"].get("image").is_none());
        assert_eq!(j["images"], json!([img]));
        assert_eq!(
            r.to_gradescope(View::Student)["extra_data"]["images"],
            json!([img])
        );
        let t = r.render_text(View::Student, false);
        assert!(
            t.contains(&format!("image: python:3.12-slim ({})", img.digest)),
            "{t}"
        );
    }

    #[test]
    fn every_row_says_which_runtime_graded_it() {
        let mut r = report();
        let j = r.to_json(View::Student);
        for id in ["a", "b", "c"] {
            assert_eq!(j["results"][id]["runtime"], "native", "{j}");
        }
        assert!(!r.render_text(View::Student, false).contains("runtime:"));
        r.runtimes.insert("b".into(), Runtime::Gvisor);
        let j = r.to_json(View::Student);
        assert_eq!(j["results"]["b"]["runtime"], "gvisor", "{j}");
        assert_eq!(j["results"]["a"]["runtime"], "native", "{j}");
        let gs = r.to_gradescope(View::Student);
        assert_eq!(gs["extra_data"]["runtimes"]["b"], "gvisor", "{gs}");
        // CS50's exact shape has no runtime.
        assert!(r.to_cs50(View::Student)["results"]["b"]
            .get("runtime")
            .is_none());
        let t = r.render_text(View::Student, false);
        assert!(
            t.contains("runtime: gvisor for b; native for the rest"),
            "{t}"
        );
        for id in ["a", "c"] {
            r.runtimes.insert(id.into(), Runtime::Gvisor);
        }
        let t = r.render_text(View::Student, false);
        assert!(t.contains("runtime: gvisor\n"), "{t}");
    }
}
