//! The layout of `sim/src` stays a house a newcomer can live in: the top-level modules are
//! layers that only use the layers below them (nothing but `main.rs` and `cli` itself uses the
//! CLI), and at every level of the module tree sibling modules use each other without a cycle.
//! A module may use its ancestors: a submodule is a part of its parent (`sentinel::failover`
//! implements `sentinel::State`).
//!
//! The edges are the `use` declarations and `crate::` paths of each file's non-test code.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The top-level modules from the bottom layer up.
const LAYERS: &[&str] = &[
    "signal", "scenario", "world", "nodes", "faults", "runner", "serve", "live", "fidelity",
    "conform", "hunt", "cli",
];

/// Module path (`world::net::socket`, `""` for the crate root) → source, without tests, of the
/// crate whose sources are in `root`.
fn modules(root: &Path) -> BTreeMap<String, String> {
    fn walk(dir: &Path, root: &Path, out: &mut BTreeMap<String, String>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .expect("sim/src is readable")
            .map(|e| e.expect("a readable entry").path())
            .collect();
        entries.sort();
        for path in entries {
            if path.is_dir() {
                walk(&path, root, out);
                continue;
            }
            let rel = path.strip_prefix(root).expect("under the root");
            let rel = rel.to_str().expect("UTF-8 paths").replace('\\', "/");
            let Some(stem) = rel.strip_suffix(".rs") else {
                continue;
            };
            if stem == "main" {
                continue;
            }
            let mut parts: Vec<&str> = stem.split('/').collect();
            if matches!(parts.last(), Some(&"mod") | Some(&"lib")) {
                parts.pop();
            }
            let source = std::fs::read_to_string(&path).expect("a readable source file");
            out.insert(parts.join("::"), code_only(&source));
        }
    }
    let mut out = BTreeMap::new();
    walk(root, root, &mut out);
    out
}

/// `sim/src`.
fn sim_src() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// `reports/src`.
fn reports_src() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../reports/src")
}

/// The source without comments, string and character literals, and its unit tests (a
/// `#[cfg(test)] mod tests`, or `pub(crate) mod tests` that other tests share, at the end of
/// the file).
fn code_only(source: &str) -> String {
    let tests = [
        "#[cfg(test)]\nmod tests",
        "#[cfg(test)]\npub(crate) mod tests",
    ]
    .iter()
    .filter_map(|t| source.find(t))
    .min();
    let source = match tests {
        Some(at) => &source[..at],
        None => source,
    };
    let chars: Vec<char> = source.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < chars.len() {
        let rest = |n: usize| chars.get(i + n).copied();
        match chars[i] {
            '/' if rest(1) == Some('/') => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
            }
            '/' if rest(1) == Some('*') => {
                i += 2;
                while i + 1 < chars.len() && !(chars[i] == '*' && chars[i + 1] == '/') {
                    i += 1;
                }
                i += 2;
            }
            'r' if raw_string_hashes(&chars, i).is_some() => {
                let hashes = raw_string_hashes(&chars, i).expect("checked");
                i += 2 + hashes;
                while i < chars.len()
                    && !(chars[i] == '"' && (1..=hashes).all(|k| chars.get(i + k) == Some(&'#')))
                {
                    i += 1;
                }
                i += 1 + hashes;
                out.push_str("\"\"");
            }
            '"' => {
                i += 1;
                while i < chars.len() && chars[i] != '"' {
                    i += if chars[i] == '\\' { 2 } else { 1 };
                }
                i += 1;
                out.push_str("\"\"");
            }
            '\'' if rest(1) == Some('\\') => {
                i += 3;
                while i < chars.len() && chars[i] != '\'' {
                    i += 1;
                }
                i += 1;
            }
            '\'' if rest(2) == Some('\'') => i += 3,
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    out
}

/// At a raw string literal (`r"…"`, `r#"…"#`, not a raw identifier `r#gen`): how many `#`.
fn raw_string_hashes(chars: &[char], at: usize) -> Option<usize> {
    let after_word = at > 0 && (chars[at - 1].is_alphanumeric() || chars[at - 1] == '_');
    let hashes = chars[at + 1..].iter().take_while(|c| **c == '#').count();
    (!after_word && chars.get(at + 1 + hashes) == Some(&'"')).then_some(hashes)
}

/// Every path a use tree names: `a::{b, c::{d, e}}` → `a::b`, `a::c::d`, `a::c::e`.
fn expand(tree: &str) -> Vec<String> {
    fn split_top(tree: &str) -> Vec<&str> {
        let (mut depth, mut start, mut out) = (0, 0, Vec::new());
        for (i, c) in tree.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    out.push(&tree[start..i]);
                    start = i + 1;
                }
                _ => {}
            }
        }
        out.push(&tree[start..]);
        out.into_iter().filter(|p| !p.is_empty()).collect()
    }
    let tree: String = tree.chars().filter(|c| !c.is_whitespace()).collect();
    let mut out = Vec::new();
    for piece in split_top(&tree) {
        match piece.find('{') {
            Some(open) => {
                let inner = &piece[open + 1..piece.rfind('}').expect("balanced braces")];
                for rest in expand(inner) {
                    out.push(format!("{}{rest}", &piece[..open]));
                }
            }
            None => out.push(piece.to_string()),
        }
    }
    out
}

/// The paths a module's code names: its `use` declarations and its inline `crate::` paths.
fn named_paths(code: &str) -> Vec<String> {
    let mut paths = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("use ") {
        let word_start = at == 0 || {
            let before = rest[..at].chars().last().expect("not at the start");
            // `.use` is a field or, in a maud template, a CSS class (`div.use`): not a `use`.
            !(before.is_alphanumeric() || before == '_' || before == '.')
        };
        let after = &rest[at + 4..];
        rest = after;
        if !word_start {
            continue;
        }
        if let Some(end) = after.find(';') {
            paths.extend(expand(&after[..end]));
        }
    }
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        let path: String = rest[at..]
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
            .collect();
        paths.push(path);
        rest = &rest[at + 7..];
    }
    paths
}

/// The module a path names from module `from`, if it is one of ours (the longest known prefix).
fn resolve(from: &str, path: &str, known: &BTreeSet<String>) -> Option<String> {
    let here: Vec<&str> = if from.is_empty() {
        Vec::new()
    } else {
        from.split("::").collect()
    };
    let segs: Vec<&str> = path.split("::").filter(|s| !s.is_empty()).collect();
    let (mut base, segs): (Vec<&str>, &[&str]) = match segs.first() {
        Some(&"crate") => (Vec::new(), &segs[1..]),
        Some(&"self") => (here.clone(), &segs[1..]),
        Some(&"super") => {
            let ups = segs.iter().take_while(|s| **s == "super").count();
            (
                here[..here.len().saturating_sub(ups)].to_vec(),
                &segs[ups..],
            )
        }
        Some(first) => {
            let child = [&here[..], &[*first]].concat().join("::");
            if !known.contains(&child) {
                return None;
            }
            (here.clone(), &segs[..])
        }
        None => return None,
    };
    let start = base.len();
    base.extend_from_slice(segs);
    (start..=base.len())
        .rev()
        .map(|n| base[..n].join("::"))
        .find(|m| known.contains(m))
}

/// Module → the modules it uses (itself excluded), in the crate at `root`.
fn edges(root: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let modules = modules(root);
    let known: BTreeSet<String> = modules.keys().cloned().collect();
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (module, code) in &modules {
        for path in named_paths(code) {
            if let Some(target) = resolve(module, &path, &known)
                && target != *module
            {
                edges.entry(module.clone()).or_default().insert(target);
            }
        }
    }
    edges
}

fn segments(module: &str) -> Vec<&str> {
    if module.is_empty() {
        Vec::new()
    } else {
        module.split("::").collect()
    }
}

#[test]
fn top_level_modules_only_use_the_layers_below() {
    let rank = |module: &str| {
        let top = segments(module).first().copied().unwrap_or("");
        LAYERS.iter().position(|l| *l == top)
    };
    let mut wrong = Vec::new();
    for (from, targets) in edges(&sim_src()) {
        if from.is_empty() {
            continue;
        }
        let from_rank = rank(&from).unwrap_or_else(|| panic!("{from}: not in LAYERS"));
        for to in targets {
            let to_rank = rank(&to).unwrap_or_else(|| panic!("{to}: not in LAYERS"));
            if to_rank > from_rank {
                wrong.push(format!("{from} -> {to}"));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "a lower layer uses a higher one ({LAYERS:?}): {wrong:#?}"
    );
}

#[test]
fn sibling_modules_use_each_other_without_a_cycle() {
    no_sibling_cycle(&sim_src());
}

/// `reports/src` too (issue 30: `html` and the sections it renders used each other).
#[test]
fn report_modules_use_each_other_without_a_cycle() {
    no_sibling_cycle(&reports_src());
}

fn no_sibling_cycle(root: &Path) {
    // For every edge, the two children of the deepest common ancestor that lead to its ends.
    let mut levels: BTreeMap<String, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for (from, targets) in edges(root) {
        for to in targets {
            let (a, b) = (segments(&from), segments(&to));
            let common = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
            if common == a.len() || common == b.len() {
                continue; // a parent uses its submodule, or a submodule its ancestor
            }
            levels
                .entry(a[..common].join("::"))
                .or_default()
                .entry(a[common].to_string())
                .or_default()
                .insert(b[common].to_string());
        }
    }
    for (parent, graph) in &levels {
        // Peel off modules that nothing left uses or that use nothing left: what remains is
        // on a cycle.
        let mut left: BTreeMap<&String, BTreeSet<&String>> = graph
            .iter()
            .map(|(m, uses)| (m, uses.iter().collect()))
            .collect();
        loop {
            let peel: Vec<&String> = left
                .iter()
                .filter(|(m, uses)| {
                    !uses.iter().any(|u| left.contains_key(u))
                        || !left.values().any(|other| other.contains(*m))
                })
                .map(|(m, _)| *m)
                .collect();
            if peel.is_empty() {
                break;
            }
            for m in peel {
                left.remove(m);
            }
        }
        let on_cycle: BTreeSet<&String> = left.keys().copied().collect();
        for uses in left.values_mut() {
            uses.retain(|u| on_cycle.contains(u));
        }
        assert!(
            left.is_empty(),
            "modules of `{parent}` in {} use each other in a circle: {left:#?}",
            root.display()
        );
    }
    assert!(levels.contains_key(""), "the edges were found");
}
