//! pytest's JUnit XML report, read strictly: one `<testsuite>`, its counts matching its test
//! cases, and the names pytest gives each test there.

/// `test_x.py::TestC::test_m[p]` → (`test_x.TestC`, `test_m[p]`): pytest's `mangle_test_address`.
pub(super) fn junit_name(nodeid: &str) -> (String, String) {
    let (path, params) = match nodeid.find('[') {
        Some(i) => (&nodeid[..i], &nodeid[i..]),
        None => (nodeid, ""),
    };
    let mut names: Vec<String> = path.split("::").map(str::to_string).collect();
    let first = names[0].replace('/', ".");
    names[0] = first.strip_suffix(".py").unwrap_or(&first).to_string();
    let last = names.len() - 1;
    names[last].push_str(params);
    let name = names.pop().expect("one name at least");
    (names.join("."), name)
}

/// Reads the JUnit XML: (classname, name) → (outcome, failure text).
pub(super) fn parse_junit(xml: &str) -> Result<Vec<(String, String, String, String)>, String> {
    let doc = roxmltree::Document::parse(xml).map_err(|e| format!("not valid XML: {e}"))?;
    let root = doc.root_element();
    let suites: Vec<roxmltree::Node> = match root.tag_name().name() {
        "testsuites" => root
            .children()
            .filter(|n| n.is_element())
            .map(|n| {
                if n.tag_name().name() == "testsuite" {
                    Ok(n)
                } else {
                    Err(format!(
                        "unexpected <{}> in <testsuites>",
                        n.tag_name().name()
                    ))
                }
            })
            .collect::<Result<_, _>>()?,
        "testsuite" => vec![root],
        other => return Err(format!("root element <{other}>, not <testsuites>")),
    };
    if suites.len() != 1 {
        return Err(format!("{} <testsuite> elements, not 1", suites.len()));
    }
    let suite = suites[0];
    let mut out = Vec::new();
    let (mut failures, mut errors, mut skipped) = (0u64, 0u64, 0u64);
    for tc in suite.children().filter(|n| n.is_element()) {
        match tc.tag_name().name() {
            "testcase" => {}
            "properties" | "system-out" | "system-err" => continue,
            other => return Err(format!("unexpected <{other}> in <testsuite>")),
        }
        let classname = tc
            .attribute("classname")
            .ok_or("a <testcase> without classname")?;
        let name = tc.attribute("name").ok_or("a <testcase> without name")?;
        let mut outcome = "passed";
        let mut text = String::new();
        for child in tc.children().filter(|n| n.is_element()) {
            let kind = child.tag_name().name();
            let this = match kind {
                "failure" => {
                    failures += 1;
                    "failed"
                }
                "error" => {
                    errors += 1;
                    "failed"
                }
                "skipped" => {
                    skipped += 1;
                    "skipped"
                }
                "system-out" | "system-err" | "properties" => continue,
                other => return Err(format!("unexpected <{other}> in <testcase>")),
            };
            if this == "failed" || outcome == "passed" {
                outcome = this;
            }
            let msg = child.attribute("message").unwrap_or("");
            let body = child.text().unwrap_or("");
            if !text.is_empty() {
                text.push('\n');
            }
            text.push_str(msg);
            if !body.trim().is_empty() {
                text.push('\n');
                text.push_str(body.trim_end());
            }
        }
        out.push((
            classname.to_string(),
            name.to_string(),
            outcome.to_string(),
            text,
        ));
    }
    let count = |a: &str| -> Result<u64, String> {
        suite
            .attribute(a)
            .unwrap_or("0")
            .parse::<u64>()
            .map_err(|_| format!("testsuite {a}= is not a count"))
    };
    if count("tests")? != out.len() as u64
        || count("failures")? != failures
        || count("errors")? != errors
        || count("skipped")? != skipped
    {
        return Err("the <testsuite> counts do not match its test cases".into());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn junit_names_follow_pytest() {
        assert_eq!(
            junit_name("test_a.py::test_x"),
            ("test_a".into(), "test_x".into())
        );
        assert_eq!(
            junit_name("sub/test_a.py::TestC::test_m[1-a::b]"),
            ("sub.test_a.TestC".into(), "test_m[1-a::b]".into())
        );
        assert_eq!(junit_name("test_a.py"), ("".into(), "test_a".into()));
    }

    #[test]
    fn junit_counts_must_match() {
        let good = r#"<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" errors="0" failures="1" skipped="0" tests="2"><testcase classname="t" name="a"/><testcase classname="t" name="b"><failure message="assert 1 == 2">x</failure></testcase></testsuite></testsuites>"#;
        let c = parse_junit(good).unwrap();
        assert_eq!(c[1].2, "failed");
        assert!(c[1].3.starts_with("assert 1 == 2"));
        let bad = good.replace("failures=\"1\"", "failures=\"0\"");
        assert!(parse_junit(&bad).is_err());
        assert!(parse_junit("<testsuites><testsuite").is_err());
        let dtd = r#"<!DOCTYPE x [<!ENTITY a "b">]><testsuites/>"#;
        assert!(parse_junit(dtd).is_err());
    }
}
