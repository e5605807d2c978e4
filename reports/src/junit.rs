//! JUnit XML, the test report every CI system renders (`locksim check --junit FILE`,
//! `locksim report --junit FILE`): one `<testcase classname="scenario" name="scheme">` per
//! scenario × scheme, a `<failure>` listing its expectation mismatches with the commands that
//! replay them, and one `<testcase classname="locksim">` with an `<error>` for runs that failed
//! or a batch cut short. The format: the Ant JUnit schema that Jenkins, GitLab and GitHub
//! test-report actions read (`testsuites` > `testsuite` > `testcase` > `failure`/`error`).

use std::fmt::Write as _;

use crate::summary::Summary;

/// One scenario × scheme.
#[derive(Clone, Debug, PartialEq)]
pub struct Case {
    /// The scenario's name.
    pub classname: String,
    /// The scheme's label.
    pub name: String,
    /// Runs judged (seeds).
    pub runs: u64,
    /// One line per expectation mismatch (with its replay command); empty: passed.
    pub failures: Vec<String>,
}

/// The whole report: cases, then the errors (failed runs, an interruption) if any.
pub fn render(suite: &str, cases: &[Case], errors: &[String]) -> String {
    let failed = cases.iter().filter(|c| !c.failures.is_empty()).count();
    let tests = cases.len() + usize::from(!errors.is_empty());
    let erred = usize::from(!errors.is_empty());
    let counts = format!(r#"tests="{tests}" failures="{failed}" errors="{erred}""#);
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(out, r#"<testsuites name="{}" {counts}>"#, escape(suite));
    let _ = writeln!(
        out,
        r#"  <testsuite name="{}" {counts} skipped="0">"#,
        escape(suite)
    );
    for case in cases {
        let _ = write!(
            out,
            r#"    <testcase classname="{}" name="{}""#,
            escape(&case.classname),
            escape(&case.name)
        );
        if case.failures.is_empty() {
            out.push_str("/>\n");
            continue;
        }
        let _ = writeln!(
            out,
            ">\n      <failure type=\"expectation\" message=\"{} expectation(s) not met on {} run(s)\">{}</failure>\n    </testcase>",
            case.failures.len(),
            case.runs,
            escape(&case.failures.join("\n"))
        );
    }
    if !errors.is_empty() {
        let _ = writeln!(
            out,
            "    <testcase classname=\"locksim\" name=\"runs\">\n      <error type=\"run\" message=\"{} problem(s) with the runs\">{}</error>\n    </testcase>",
            errors.len(),
            escape(&errors.join("\n"))
        );
    }
    out.push_str("  </testsuite>\n</testsuites>\n");
    out
}

/// The cases of a `compare`/`report` summary: each cell's mismatches, and the command that
/// replays its first failing seed.
pub fn from_summary(summary: &Summary, suite: &str) -> String {
    let cases: Vec<Case> = summary
        .cells
        .iter()
        .map(|cell| {
            let mut failures = cell.mismatches.clone();
            if let (false, Some(replay)) = (failures.is_empty(), &cell.replay) {
                failures.push(format!("first failing seed: {replay}"));
            }
            Case {
                classname: cell.stats.scenario.clone(),
                name: cell.stats.scheme.clone(),
                runs: cell.stats.seeds_run,
                failures,
            }
        })
        .collect();
    let mut errors = summary.errors.clone();
    if summary.interrupted && errors.is_empty() {
        errors.push("the runs were cut short: the report covers the runs that finished".into());
    }
    render(suite, &cases, &errors)
}

/// Text for XML attributes and content: the five special characters as XML's entities, and
/// the characters XML 1.0 forbids (most C0 controls) as U+FFFD.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            '\t' | '\n' | '\r' => out.push(c),
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn special_characters_are_escaped() {
        assert_eq!(
            escape(r#"a<b>&"c"'d'"#),
            "a&lt;b&gt;&amp;&quot;c&quot;&#39;d&#39;"
        );
        assert_eq!(escape("x\u{1}y\nz"), "x\u{FFFD}y\nz");
    }

    /// The output parses as XML, with one testcase per case, the failures' text intact.
    #[test]
    fn the_report_is_well_formed_and_complete() {
        let cases = vec![
            Case {
                classname: "kleppmann-gc-pause".into(),
                name: "set-nx-px-lua".into(),
                runs: 20,
                failures: vec![
                    "kleppmann-gc-pause [set-nx-px-lua] seed 0: resource_safety expected holds, got violated".into(),
                    "  reproduce: locksim replay 'my <file>.json' --seed 0".into(),
                ],
            },
            Case {
                classname: "baseline".into(),
                name: "redlock:redsync".into(),
                runs: 20,
                failures: vec![],
            },
        ];
        let xml = render("locksim check", &cases, &["seed 3 panicked: a & b".into()]);
        let doc = roxmltree::Document::parse(&xml).expect("well-formed XML");
        let suite = doc
            .descendants()
            .find(|n| n.has_tag_name("testsuite"))
            .unwrap();
        assert_eq!(suite.attribute("tests"), Some("3"));
        assert_eq!(suite.attribute("failures"), Some("1"));
        assert_eq!(suite.attribute("errors"), Some("1"));
        let testcases: Vec<_> = doc
            .descendants()
            .filter(|n| n.has_tag_name("testcase"))
            .collect();
        assert_eq!(testcases.len(), 3);
        assert_eq!(
            testcases[0].attribute("classname"),
            Some("kleppmann-gc-pause")
        );
        assert_eq!(testcases[1].attribute("name"), Some("redlock:redsync"));
        let failure = testcases[0]
            .children()
            .find(|n| n.has_tag_name("failure"))
            .unwrap();
        assert_eq!(failure.text(), Some(cases[0].failures.join("\n").as_str()));
        assert!(testcases[1].children().all(|n| !n.is_element()));
        let error = testcases[2]
            .children()
            .find(|n| n.has_tag_name("error"))
            .unwrap();
        assert_eq!(error.text(), Some("seed 3 panicked: a & b"));
    }
}
