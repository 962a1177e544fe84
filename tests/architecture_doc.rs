//! docs/ARCHITECTURE.md describes the layout there is: every file or folder its crate
//! sections name exists in that crate, and every top-level module of each crate is named.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

const DOC: &str = include_str!("../docs/ARCHITECTURE.md");

/// The text of the section headed `### `{name}`` (up to the next heading).
fn section(name: &str) -> &'static str {
    let head = format!("### `{name}`");
    let start = DOC
        .find(&head)
        .unwrap_or_else(|| panic!("ARCHITECTURE.md has no section {head}"));
    let rest = &DOC[start + head.len()..];
    let end = rest.find("\n#").unwrap_or(rest.len());
    &rest[..end]
}

/// Backticked names that look like a source file or folder: `x.rs`, `a/b.rs`, `dir/`.
fn named_paths(text: &str) -> BTreeSet<String> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .filter(|t| {
            (t.ends_with(".rs") || t.ends_with('/'))
                && t.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "_./".contains(c))
        })
        .map(str::to_string)
        .collect()
}

fn all_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.push(p.clone());
            all_files(&p, out);
        } else {
            out.push(p);
        }
    }
}

fn check_crate(section_name: &str, src: &str) -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join(src);
    let mut files = vec![];
    all_files(&root, &mut files);
    let rel: Vec<String> = files
        .iter()
        .map(|p| {
            let r = p
                .strip_prefix(&root)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            if p.is_dir() {
                format!("{r}/")
            } else {
                r
            }
        })
        .collect();
    let named = named_paths(section(section_name));
    let mut problems = vec![];
    for n in &named {
        // A name is a path from the crate's src/ or from a module folder in it.
        if !rel.iter().any(|r| r == n || r.ends_with(&format!("/{n}"))) {
            problems.push(format!(
                "ARCHITECTURE.md names `{n}` under `{section_name}`, not in {src}"
            ));
        }
    }
    for top in std::fs::read_dir(&root).unwrap() {
        let p = top.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        let name = if p.is_dir() { format!("{name}/") } else { name };
        if name == "lib.rs" && section_name != "charts/" {
            continue;
        }
        if !named.contains(&name) {
            problems.push(format!(
                "{src}{name} is not named in ARCHITECTURE.md's `{section_name}` section"
            ));
        }
    }
    problems
}

#[test]
fn the_architecture_page_names_the_layout_there_is() {
    let mut problems = check_crate("src/", "src/");
    problems.extend(check_crate("collectors/", "collectors/src/"));
    problems.extend(check_crate("charts/", "charts/src/"));
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn a_name_that_is_not_there_is_caught() {
    let named = named_paths("| `nowhere.rs` | x |");
    assert!(named.contains("nowhere.rs"));
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = vec![];
    all_files(&root, &mut files);
    assert!(!files.iter().any(|p| p.ends_with("nowhere.rs")));
}
