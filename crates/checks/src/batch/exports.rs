//! What a batch's rows become for staff: the gradebook CSV and the HTML report.

use std::fmt::Write as _;
use std::path::Path;

use crate::image_root::UsedImage;
use crate::suite::Suite;

use super::row::{
    columns_seen, feedback_file, result_file, Row, RowStatus, FEEDBACK_DIR, RESULTS_DIR,
};

/// A number as the gradebook writes it: whole numbers bare, others with two decimals.
pub fn num(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e15 {
        format!("{}", x as i64)
    } else {
        format!("{x:.2}")
    }
}

/// One CSV field: quoted when it must be, and a would-be spreadsheet formula defused.
pub fn csv_field(s: &str) -> String {
    // A leading =, +, - or @ would be a formula in a spreadsheet: quote it behind a '. So would
    // a leading tab or carriage return, which some spreadsheets skip before reading one (OWASP's
    // list of prefixes to defuse).
    let s = if s.starts_with(['=', '+', '-', '@', '\t', '\r']) && s.parse::<f64>().is_err() {
        format!("'{s}")
    } else {
        s.to_string()
    };
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s
    }
}

/// A report row's gradebook cell: its points when the row is worth points, else `pass`,
/// `fail` or `skip` (a check whose dependency failed).
pub fn check_cell(result: Option<bool>, points: f64, max_points: f64) -> String {
    match result {
        _ if max_points > 0.0 => num(points),
        Some(true) => "pass".into(),
        Some(false) => "fail".into(),
        None => "skip".into(),
    }
}

/// The gradebook: one line per student; per report row, the points (rows worth points) or
/// `pass` / `fail` / `skip`.
pub fn gradebook_csv(suite: &Suite, rows: &[Row]) -> String {
    let cols = columns_seen(suite, rows);
    let mut out = String::new();
    let mut head = vec![
        "student".to_string(),
        "score".into(),
        "max_score".into(),
        "percent".into(),
        "status".into(),
        "reason".into(),
        "integrity".into(),
        "safety".into(),
        "image".into(),
        "runtime".into(),
    ];
    head.extend(cols.iter().map(|(id, _, _)| id.clone()));
    out.push_str(
        &head
            .iter()
            .map(|h| csv_field(h))
            .collect::<Vec<_>>()
            .join(","),
    );
    out.push('\n');
    for r in rows {
        let pct = if r.max_score > 0.0 {
            format!("{:.1}", 100.0 * r.score / r.max_score)
        } else {
            String::new()
        };
        let mut f = vec![
            r.student.clone(),
            num(r.score),
            num(r.max_score),
            pct,
            r.status.as_str().to_string(),
            r.reason.clone().unwrap_or_default(),
            // Nothing was looked at in a submission that could not be graded at all.
            if r.report.is_null() {
                String::new()
            } else if r.integrity.is_empty() {
                "ok".into()
            } else {
                r.integrity.join("; ")
            },
            match &r.safety {
                None => String::new(),
                Some(s) if s.is_empty() => "ok".into(),
                Some(s) => s.join("; "),
            },
            images_cell(&r.images),
            runtime_cell(suite, r),
        ];
        for (id, _, max) in &cols {
            f.push(match r.checks.get(id) {
                None => String::new(),
                Some((result, points)) => check_cell(*result, *points, *max),
            });
        }
        out.push_str(&f.iter().map(|x| csv_field(x)).collect::<Vec<_>>().join(","));
        out.push('\n');
    }
    out
}

/// A row's runtime for a gradebook cell: `native`, `gvisor`, or `gvisor: A; B` when only those
/// checks ran under gVisor (empty: not graded).
fn runtime_cell(suite: &Suite, r: &Row) -> String {
    if r.report.is_null() {
        String::new()
    } else if r.gvisor.is_empty() {
        "native".into()
    } else if r.gvisor.len() == suite.checks.len() {
        "gvisor".into()
    } else {
        format!("gvisor: {}", r.gvisor.join("; "))
    }
}

/// A row's images for a gradebook cell: `NAME@DIGEST`, `; `-separated (empty: the host root).
fn images_cell(images: &[UsedImage]) -> String {
    images
        .iter()
        .map(|i| {
            format!(
                "{}@{}",
                i.name.split('@').next().unwrap_or(&i.name),
                i.digest
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;")
}

/// Score counts in `bins` equal ranges of `[0, max]` (the last range includes `max`).
pub fn histogram(rows: &[Row], max: f64, bins: usize) -> Vec<usize> {
    let mut h = vec![0; bins.max(1)];
    for r in rows {
        let f = if max > 0.0 { r.score / max } else { 0.0 };
        let i = ((f * h.len() as f64).floor() as usize).min(h.len() - 1);
        h[i] += 1;
    }
    h
}

/// Per report row: (id, description, passed, judged).
pub fn pass_rates(suite: &Suite, rows: &[Row]) -> Vec<(String, String, usize, usize)> {
    columns_seen(suite, rows)
        .into_iter()
        .map(|(id, desc, _)| {
            let (mut passed, mut judged) = (0, 0);
            for r in rows {
                if let Some((res, _)) = r.checks.get(&id) {
                    judged += 1;
                    if *res == Some(true) {
                        passed += 1;
                    }
                }
            }
            (id, desc, passed, judged)
        })
        .collect()
}

/// A self-contained HTML report: summary, a score histogram (inline SVG), per-check pass rates
/// and the students' rows. No scripts, styles inline, no external assets.
pub fn html_report(suite: &Suite, rows: &[Row]) -> String {
    // A grader check without `points` takes its maximum from each run's results: the largest
    // any row had, where the suite's own sum says less.
    let max = rows
        .iter()
        .map(|r| r.max_score)
        .fold(suite.max_score(), f64::max);
    let mut scores: Vec<f64> = rows.iter().map(|r| r.score).collect();
    scores.sort_by(|a, b| a.total_cmp(b));
    let mean = if scores.is_empty() {
        0.0
    } else {
        scores.iter().sum::<f64>() / scores.len() as f64
    };
    let median = if scores.is_empty() {
        0.0
    } else if scores.len() % 2 == 1 {
        scores[scores.len() / 2]
    } else {
        (scores[scores.len() / 2 - 1] + scores[scores.len() / 2]) / 2.0
    };
    let errors = rows.iter().filter(|r| r.status == RowStatus::Error).count();
    let mut h = String::new();
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{} — grades</title>\n\
         <style>body{{font-family:system-ui,sans-serif;margin:2em;color:#222}}table{{border-collapse:collapse}}\
         td,th{{border:1px solid #ccc;padding:.25em .5em;text-align:left;vertical-align:top}}\
         th{{background:#f4f4f4}}.num{{text-align:right}}.error{{color:#b00020}}.bar{{background:#4a7;height:.8em}}</style>\n\
         </head><body>\n<h1>{}</h1>\n",
        esc(&suite.name),
        esc(&suite.name)
    );
    if let Some(d) = &suite.description {
        let _ = writeln!(h, "<p>{}</p>", esc(d));
    }
    let _ = writeln!(
        h,
        "<p>{} submissions · mean {} · median {} · maximum score {} · {} with errors</p>",
        rows.len(),
        num((mean * 100.0).round() / 100.0),
        num(median),
        num(max),
        errors
    );
    // Histogram.
    let bins = 10;
    let counts = histogram(rows, max, bins);
    let top = counts.iter().copied().max().unwrap_or(0).max(1);
    let (w, bh, pad) = (48, 160, 30);
    let width = bins * w + 2 * pad;
    let height = bh + 2 * pad + 20;
    let _ = writeln!(
        h,
        "<h2>Scores</h2>\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" role=\"img\" aria-label=\"score histogram\">"
    );
    for (i, c) in counts.iter().enumerate() {
        let bar = (bh * c) / top;
        let x = pad + i * w;
        let y = pad + bh - bar;
        let lo = max * i as f64 / bins as f64;
        let hi = max * (i + 1) as f64 / bins as f64;
        let _ = writeln!(
            h,
            "<rect class=\"bin\" x=\"{}\" y=\"{y}\" width=\"{}\" height=\"{bar}\" fill=\"#4a7\"><title>{}–{}: {c}</title></rect>\
             <text x=\"{}\" y=\"{}\" font-size=\"11\" text-anchor=\"middle\">{c}</text>\
             <text x=\"{}\" y=\"{}\" font-size=\"10\" text-anchor=\"middle\">{}</text>",
            x + 2,
            w - 4,
            num((lo * 100.0).round() / 100.0),
            num((hi * 100.0).round() / 100.0),
            x + w / 2,
            y.saturating_sub(3).max(10),
            x + w / 2,
            pad + bh + 14,
            num((lo * 10.0).round() / 10.0),
        );
    }
    let _ = writeln!(
        h,
        "<line x1=\"{pad}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#222\"/>\
         <text x=\"{}\" y=\"{}\" font-size=\"11\" text-anchor=\"middle\">score (each bar: from its label up to the next; the last includes {})</text></svg>",
        pad + bh,
        pad + bins * w,
        pad + bh,
        pad + bins * w / 2,
        pad + bh + 32,
        num(max)
    );
    // Pass rates.
    let _ = writeln!(
        h,
        "<h2>Checks</h2>\n<table><tr><th>check</th><th>description</th><th class=\"num\">passed</th><th>rate</th></tr>"
    );
    for (id, desc, passed, judged) in pass_rates(suite, rows) {
        let pct = if judged > 0 {
            100.0 * passed as f64 / judged as f64
        } else {
            0.0
        };
        let _ = writeln!(
            h,
            "<tr><td><code>{}</code></td><td>{}</td><td class=\"num\">{passed}/{judged}</td>\
             <td><div style=\"width:10em;background:#eee\"><div class=\"bar\" style=\"width:{pct:.0}%\"></div></div> {pct:.0}%</td></tr>",
            esc(&id),
            esc(&desc)
        );
    }
    let _ = writeln!(h, "</table>");
    // Students.
    let _ = writeln!(
        h,
        "<h2>Submissions</h2>\n<table><tr><th>student</th><th class=\"num\">score</th><th>status</th><th>reason</th><th>image</th><th>runtime</th></tr>"
    );
    for r in rows {
        let _ = writeln!(
            h,
            "<tr><td><a href=\"{}/{}\">{}</a></td><td class=\"num\">{}/{}</td><td class=\"{}\">{}</td><td>{}</td><td><code>{}</code></td><td>{}</td></tr>",
            RESULTS_DIR,
            esc(&result_file(&r.student)),
            esc(&r.student),
            num(r.score),
            num(r.max_score),
            r.status.as_str(),
            r.status.as_str(),
            esc(r.reason.as_deref().unwrap_or("")),
            esc(&images_cell(&r.images)),
            esc(&runtime_cell(suite, r))
        );
    }
    let _ = writeln!(h, "</table>\n</body></html>");
    h
}

/// Writes `gradebook.csv`, `report.html` and each student's `feedback/STUDENT.txt` into
/// `out_dir`.
pub fn write_outputs(suite: &Suite, rows: &[Row], out_dir: &Path) -> std::io::Result<()> {
    std::fs::write(out_dir.join("gradebook.csv"), gradebook_csv(suite, rows))?;
    std::fs::write(out_dir.join("report.html"), html_report(suite, rows))?;
    let feedback = out_dir.join(FEEDBACK_DIR);
    std::fs::create_dir_all(&feedback)?;
    for r in rows {
        if let Some(text) = &r.feedback {
            std::fs::write(feedback.join(feedback_file(&r.student)), text)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::super::row::test_rows::graded;
    use super::*;

    #[test]
    fn csv_quotes_and_defuses_formulas() {
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        assert_eq!(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(csv_field("=cmd()"), "'=cmd()");
        assert_eq!(csv_field("\t=cmd()"), "'\t=cmd()");
        assert_eq!(csv_field("\r=cmd()"), "\"'\r=cmd()\"");
        assert_eq!(csv_field("-3"), "-3");
        assert_eq!(csv_field("plain"), "plain");
    }

    #[test]
    fn histogram_bins_include_the_maximum() {
        let row = |s: f64| graded("x", s, 10.0);
        let rows: Vec<Row> = [0.0, 0.5, 5.0, 9.99, 10.0].into_iter().map(row).collect();
        let h = histogram(&rows, 10.0, 10);
        assert_eq!(h, vec![2, 0, 0, 0, 0, 1, 0, 0, 0, 2]);
        assert_eq!(esc("<a href='x'>&"), "&lt;a href=&#39;x&#39;&gt;&amp;");
    }

    #[test]
    fn gradebook_rows_record_their_images() {
        let suite = crate::suite::Suite::parse(
            "name: x\nchecks:\n  - id: a\n    steps: [{run: ls}]\n",
            Path::new("/tmp/suite.yaml"),
            false,
        )
        .unwrap();
        let digest = format!("sha256:{}", "cd".repeat(32));
        let row = |student: &str, images: Vec<UsedImage>| Row {
            student: student.into(),
            status: RowStatus::Graded,
            score: 1.0,
            max_score: 1.0,
            reason: None,
            integrity: vec![],
            safety: None,
            checks: BTreeMap::from([("a".to_string(), (Some(true), 1.0))]),
            time_ms: 0,
            graded_at: 0,
            fingerprint: String::new(),
            report: serde_json::json!({}),
            images,
            gvisor: vec![],
            feedback: None,
        };
        let used = UsedImage {
            name: "course/numpy:1".into(),
            digest: digest.clone(),
        };
        let rows = vec![row("ann", vec![used.clone()]), row("bob", vec![])];
        let csv = gradebook_csv(&suite, &rows);
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(
            lines[0],
            "student,score,max_score,percent,status,reason,integrity,safety,image,runtime,a"
        );
        assert_eq!(
            lines[1],
            format!("ann,1,1,100.0,graded,,ok,,course/numpy:1@{digest},native,1")
        );
        assert_eq!(lines[2], "bob,1,1,100.0,graded,,ok,,,native,1");
        let on_gvisor = Row {
            gvisor: vec!["a".into()],
            ..row("cy", vec![])
        };
        let csv = gradebook_csv(&suite, &[on_gvisor]);
        assert_eq!(
            csv.lines().nth(1),
            Some("cy,1,1,100.0,graded,,ok,,,gvisor,1")
        );
        let html = html_report(&suite, &rows);
        assert!(
            html.contains(&format!("<code>course/numpy:1@{digest}</code>")),
            "{html}"
        );
        // Results stored before images were recorded still load (no image: the host root).
        let mut old = serde_json::to_value(&rows[1]).unwrap();
        old.as_object_mut().unwrap().remove("images");
        let back: Row = serde_json::from_value(old).unwrap();
        assert!(back.images.is_empty());
        let back: Row = serde_json::from_value(serde_json::to_value(&rows[0]).unwrap()).unwrap();
        assert_eq!(back.images, vec![used]);
    }
}
