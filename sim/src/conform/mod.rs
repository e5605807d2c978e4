//! Conformance of the modelled lock schemes with the real libraries, command for command
//! (issue 28). A situation (`situation`) runs twice: the real library against `locksim serve`
//! (`real_side`), and the scheme that models it against the model server (`model_side`); both
//! are watched by MONITOR and reduced to the same transcript (`transcript`): per master the
//! lock's commands with random values and times abstracted, the attempts, the delays between
//! them, and the caller's outcome of each operation. A library that cannot run here (no
//! registry for its ecosystem) has its expected transcript written into the situation from its
//! source, with `file:line` for each command, and the model is checked against that.

pub mod model_side;
pub mod real_side;
pub mod situation;
pub mod transcript;

use situation::{Runtime, Situation};
use transcript::Transcript;

/// The real side's delays may exceed the library's maximum by a scheduling hiccup of a shared
/// machine: their median must stay within this much of it.
const REAL_DELAY_SLACK_MS: f64 = 150.0;
/// A real delay includes the attempt's own round trips (sub-millisecond on loopback) and the
/// library's timer, which may fire a hair early.
const REAL_DELAY_EARLY_MS: f64 = 2.0;

/// How one situation went.
#[derive(Clone, Debug)]
pub struct Outcome {
    pub name: String,
    pub library: String,
    /// `None`: identical. Otherwise what differed, and both transcripts side by side.
    pub mismatch: Option<String>,
    /// The situation could not run (a library not installed, a driver error).
    pub error: Option<String>,
    /// Both transcripts when both sides ran: the reference's name (`real` or `source`), the
    /// reference's and the model's.
    pub transcripts: Option<(&'static str, Transcript, Transcript)>,
}

impl Outcome {
    /// The reference's transcript beside the model's (`locksim conform --show`).
    pub fn side_by_side(&self) -> Option<String> {
        self.transcripts
            .as_ref()
            .map(|(name, reference, model)| side_by_side(reference, model, name))
    }
}

/// Compares the model's transcript with the real one (or the source's).
pub fn compare(
    situation: &Situation,
    reference: &Transcript,
    model: &Transcript,
    reference_name: &str,
) -> Option<String> {
    let mut problems = Vec::new();
    if reference.masters != model.masters {
        problems.push("the commands differ".to_string());
    }
    if reference.outcomes != model.outcomes {
        problems.push(format!(
            "the outcomes differ: {reference_name} {:?}, model {:?}",
            reference.outcomes, model.outcomes
        ));
    }
    if reference.attempts != model.attempts {
        problems.push(format!(
            "attempts: {reference_name} {}, model {}",
            reference.attempts, model.attempts
        ));
    }
    problems.extend(delay_problems(
        "attempts",
        false,
        situation.delay_ms,
        &reference.delays_ms,
        &model.delays_ms,
        reference_name,
    ));
    problems.extend(delay_problems(
        "refreshes",
        true,
        situation.refresh_ms,
        &reference.refresh_delays_ms,
        &model.refresh_delays_ms,
        reference_name,
    ));
    if problems.is_empty() {
        return None;
    }
    Some(format!(
        "{}\n{}",
        problems.join("\n"),
        side_by_side(reference, model, reference_name)
    ))
}

/// The delays between `what` (attempts, refreshes) against the library's `[min, max]`: the
/// model's exactly inside it, the real library's at least its minimum and their median at most
/// its maximum + `REAL_DELAY_SLACK_MS`. Without a declared distribution, delays are not timed
/// (a library whose waiter is woken by a message has none) unless `required`.
fn delay_problems(
    what: &str,
    required: bool,
    declared: Option<(u64, u64)>,
    reference: &[f64],
    model: &[f64],
    reference_name: &str,
) -> Vec<String> {
    let Some((min, max)) = declared else {
        if !required || (model.is_empty() && (reference_name != "real" || reference.is_empty())) {
            return Vec::new();
        }
        return vec![format!(
            "delays between {what} ({reference_name} {reference:?}, model {model:?}) but the situation declares no distribution for them"
        )];
    };
    let (min, max) = (min as f64, max as f64);
    let mut problems = Vec::new();
    if let Some(d) = model.iter().find(|d| **d < min || **d > max) {
        problems.push(format!(
            "a delay of the model between {what}, {d} ms, is outside the library's [{min}, {max}] ms"
        ));
    }
    if reference_name == "real" {
        if let Some(d) = reference.iter().find(|d| **d < min - REAL_DELAY_EARLY_MS) {
            problems.push(format!(
                "a delay of the real library between {what}, {d:.1} ms, is below the library's {min} ms: the declared distribution is wrong"
            ));
        }
        if let Some(median) = median(reference)
            && median > max + REAL_DELAY_SLACK_MS
        {
            problems.push(format!(
                "the real library's median delay between {what}, {median:.1} ms, is above the library's {max} ms: the declared distribution is wrong"
            ));
        }
    }
    problems
}

/// Delays shown to a tenth of a millisecond (the real library's are measured in µs).
fn tenths(delays_ms: &[f64]) -> Vec<f64> {
    delays_ms
        .iter()
        .map(|d| (d * 10.0).round() / 10.0)
        .collect()
}

fn median(values: &[f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    Some(sorted[sorted.len() / 2])
}

/// Both transcripts in two columns, master by master; `!` marks the rows that differ.
pub fn side_by_side(reference: &Transcript, model: &Transcript, reference_name: &str) -> String {
    const WIDTH: usize = 64;
    let clip = |s: &str| -> String {
        if s.chars().count() > WIDTH {
            let cut: String = s.chars().take(WIDTH - 1).collect();
            format!("{cut}…")
        } else {
            s.to_string()
        }
    };
    let mut out = String::new();
    let masters = reference.masters.len().max(model.masters.len());
    for m in 0..masters {
        out.push_str(&format!(
            "  master {}:\n    {:<WIDTH$} | model\n",
            m + 1,
            reference_name
        ));
        let empty = Vec::new();
        let left = reference.masters.get(m).unwrap_or(&empty);
        let right = model.masters.get(m).unwrap_or(&empty);
        for i in 0..left.len().max(right.len()) {
            let l = left.get(i).map_or("", String::as_str);
            let r = right.get(i).map_or("", String::as_str);
            let mark = if l == r { ' ' } else { '!' };
            out.push_str(&format!("  {mark} {:<WIDTH$} | {}\n", clip(l), clip(r)));
        }
    }
    out.push_str(&format!(
        "  attempts: {} | {}; delays (ms): {:?} | {:?}\n",
        reference.attempts,
        model.attempts,
        tenths(&reference.delays_ms),
        model.delays_ms
    ));
    if !reference.refresh_delays_ms.is_empty() || !model.refresh_delays_ms.is_empty() {
        out.push_str(&format!(
            "  delays between refreshes (ms): {:?} | {:?}\n",
            tenths(&reference.refresh_delays_ms),
            model.refresh_delays_ms
        ));
    }
    for (i, (l, r)) in reference.outcomes.iter().zip(&model.outcomes).enumerate() {
        out.push_str(&format!(
            "  outcome {}: {l} ({}) | {r} ({})\n",
            i + 1,
            reference.details.get(i).map_or("", String::as_str),
            model.details.get(i).map_or("", String::as_str)
        ));
    }
    out
}

fn outcomes(situation: &Situation, list: &[(String, String)]) -> (Vec<String>, Vec<String>) {
    let ops = situation.steps.iter().filter_map(|s| match s {
        situation::Step::Op { op, .. } => Some(op.name()),
        _ => None,
    });
    let kinds = ops
        .zip(list)
        .map(|(op, (kind, _))| format!("{op}: {kind}"))
        .collect();
    let details = list.iter().map(|(_, d)| d.clone()).collect();
    (kinds, details)
}

/// The model's transcript of a situation.
pub fn model_transcript(situation: &Situation) -> Result<Transcript, String> {
    let run = model_side::run(situation)?;
    let mut t = transcript::transcript(&run.lines, &situation.library, &run.skip, &run.ops);
    (t.outcomes, t.details) = outcomes(situation, &run.outcomes);
    Ok(t)
}

/// The real library's transcript of a situation.
pub fn real_transcript(
    setup: &real_side::RealSetup,
    situation: &Situation,
) -> Result<Transcript, String> {
    let run = real_side::run(setup, situation)?;
    let ops = transcript::op_ranges(
        run.lines.first().map_or(&[][..], Vec::as_slice),
        &run.windows,
    );
    let mut t = transcript::transcript(&run.lines, &situation.library, &run.skip, &ops);
    (t.outcomes, t.details) = outcomes(situation, &run.outcomes);
    Ok(t)
}

/// The transcript the source says, without the `# file:line` notes.
pub fn expected_transcript(situation: &Situation) -> Option<Transcript> {
    let expected = situation.expected.as_ref()?;
    Some(Transcript {
        masters: expected
            .masters
            .iter()
            .map(|lines| {
                lines
                    .iter()
                    .map(|l| l.split("  # ").next().unwrap_or("").trim_end().to_string())
                    .collect()
            })
            .collect(),
        attempts: expected.attempts,
        delays_ms: Vec::new(),
        refresh_delays_ms: Vec::new(),
        outcomes: expected.outcomes.clone(),
        details: Vec::new(),
    })
}

/// Runs one situation on both sides and compares them.
pub fn check(setup: &real_side::RealSetup, situation: &Situation) -> Outcome {
    let mut outcome = Outcome {
        name: situation.name.clone(),
        library: situation.library.id.clone(),
        mismatch: None,
        error: None,
        transcripts: None,
    };
    let model = match model_transcript(situation) {
        Ok(t) => t,
        Err(e) => {
            outcome.error = Some(format!("the model: {e}"));
            return outcome;
        }
    };
    let (reference, name) = if situation.library.runtime == Runtime::Source {
        match expected_transcript(situation) {
            Some(t) => (t, "source"),
            None => {
                outcome.error = Some("no expected transcript".into());
                return outcome;
            }
        }
    } else {
        match real_transcript(setup, situation) {
            Ok(t) => (t, "real"),
            Err(e) => {
                outcome.error = Some(format!("the real library: {e}"));
                return outcome;
            }
        }
    };
    outcome.mismatch = compare(situation, &reference, &model, name);
    outcome.transcripts = Some((name, reference, model));
    outcome
}
