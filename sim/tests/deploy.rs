//! The Kubernetes manifests in deploy/kubernetes/ do what they say: the Indexed Job's
//! arguments, run once per completion index with the index in JOB_COMPLETION_INDEX, and then
//! the merge Job's command give one complete report; the shard count in the arguments is the
//! Job's `completions`. (Their schema is checked by `kubernetes-validate` in .ci/run.)

mod common;

use std::path::Path;
use std::process::Command;

use common::repo;

fn manifest(name: &str) -> String {
    std::fs::read_to_string(repo().join("deploy/kubernetes").join(name)).unwrap()
}

/// The items of the first `args:` list of a manifest (`- item` lines, or a folded `>-` block).
fn args(yaml: &str) -> Vec<String> {
    let mut lines = yaml.lines().skip_while(|l| l.trim() != "args:").skip(1);
    let first = lines.next().expect("an args: list");
    let indent = first.len() - first.trim_start().len();
    let item = |l: &str| {
        l.trim()
            .trim_start_matches("- ")
            .trim_matches('"')
            .to_string()
    };
    let rest: Vec<&str> = lines
        .take_while(|l| l.len() - l.trim_start().len() >= indent && !l.trim().is_empty())
        .collect();
    if first.trim() == "- >-" {
        let text: Vec<&str> = rest.iter().map(|l| l.trim()).collect();
        return text
            .join(" ")
            .split_whitespace()
            .map(String::from)
            .collect();
    }
    std::iter::once(item(first))
        .chain(
            rest.iter()
                .filter(|l| l.len() - l.trim_start().len() == indent)
                .map(|l| item(l)),
        )
        .collect()
}

fn field(yaml: &str, name: &str) -> u64 {
    yaml.lines()
        .find_map(|l| l.trim().strip_prefix(&format!("{name}: ")))
        .unwrap_or_else(|| panic!("{name}: in the manifest"))
        .parse()
        .unwrap()
}

fn locksim(args: &[String], index: Option<u64>, dir: &Path) -> std::process::Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_locksim"));
    command.args(args).current_dir(dir);
    if let Some(index) = index {
        command.env("JOB_COMPLETION_INDEX", index.to_string());
    }
    command.output().expect("the locksim binary runs")
}

#[test]
fn the_indexed_job_and_the_merge_give_one_complete_report() {
    let job = manifest("job.yaml");
    let shards = field(&job, "completions");
    assert_eq!(field(&job, "parallelism"), shards);
    assert!(job.contains("completionMode: Indexed"));
    let compare = args(&job);
    assert_eq!(compare[0], "compare");
    assert!(
        compare.contains(&format!("env/{shards}")),
        "--shard env/N with N = completions: {compare:?}"
    );

    let results = std::env::temp_dir().join(format!("locksim-test-deploy-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&results);
    std::fs::create_dir_all(&results).unwrap();
    let on_volume = |arg: &str, index: Option<u64>| {
        let arg = arg.replace("/results", results.to_str().unwrap());
        match index {
            Some(i) => arg.replace("$(SHARD_INDEX)", &i.to_string()),
            None => arg,
        }
    };
    for index in 0..shards {
        let mut pod: Vec<String> = compare.iter().map(|a| on_volume(a, Some(index))).collect();
        // One seed per scenario instead of the Job's thousand, and the smallest scenario set.
        pod.extend([
            "--seeds".into(),
            "0..0".into(),
            "scenarios/kleppmann-gc-pause.json".into(),
            "scenarios/shrunk".into(),
        ]);
        let output = locksim(&pod, Some(index), &repo());
        assert!(
            output.status.success(),
            "shard {index}: {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(results.join(format!("shard-{index}/run.json")).is_file());
    }

    let merge = args(&manifest("merge.yaml"));
    assert_eq!(merge[..2], ["locksim", "report"]);
    let mut report: Vec<String> = Vec::new();
    for arg in &merge[1..] {
        let arg = on_volume(arg, None);
        if arg.ends_with("shard-*") {
            // The pod's shell expands the glob.
            report.extend(
                (0..shards).map(|i| results.join(format!("shard-{i}")).display().to_string()),
            );
        } else {
            report.push(arg);
        }
    }
    let output = locksim(&report, None, &repo());
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let summary: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(results.join("report/summary.json")).unwrap(),
    )
    .unwrap();
    let shrunk = std::fs::read_dir(repo().join("scenarios/shrunk"))
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "json")
        })
        .count();
    assert_eq!(
        summary["runs"],
        1 + shrunk as u64,
        "one seed of each scenario (each shrunk one has one scheme): {stdout}"
    );
    assert_eq!(summary["interrupted"], false);
    assert!(results.join("report/junit.xml").is_file());
    let _ = std::fs::remove_dir_all(&results);
}
