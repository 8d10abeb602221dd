//! The source's layout keeps the rules ARCHITECTURE.md gives it: one
//! name per idea, few loose files in the binary, one style of module
//! file, and no `unsafe` but where it is allowed. The docs keep theirs: a
//! README of at most 400 lines, the rest in GUIDE.md, and every link
//! between them landing on a file and a heading that are there.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

/// The workspace's root.
fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every `.rs` file under `dir`.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(dir) = todo.pop() {
        for entry in fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                todo.push(path);
            } else if path.extension().is_some_and(|ext| ext == "rs") {
                found.push(path);
            }
        }
    }
    found.sort();
    found
}

/// The source folders: the binary's and each crate's.
fn sources() -> Vec<PathBuf> {
    let mut dirs = vec![root().join("src")];
    for entry in fs::read_dir(root().join("crates")).unwrap() {
        dirs.push(entry.unwrap().path().join("src"));
    }
    dirs
}

#[test]
fn no_type_name_stands_for_two_ideas() {
    // Named twice on purpose: a fleet's types and their stand-ins in a
    // build without fleets, and one idea for streams and for datagrams.
    let twice = [
        "RedisShare",
        "Member",
        "FleetError",
        "Leaving",
        "Route",
        "Tally",
    ];
    let mut defined: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for file in sources().iter().flat_map(|dir| rust_files(dir)) {
        let text = fs::read_to_string(&file).unwrap();
        for line in text.lines() {
            let words: Vec<&str> = line.split_whitespace().collect();
            let at = words
                .iter()
                .position(|word| ["struct", "enum", "trait"].contains(word));
            // Associated types (`type Target = ...;` in an impl) are the
            // trait's name, not a new idea: only structs, enums and traits
            // declared at the start of a line count.
            let declared = words.first().is_some_and(|first| {
                ["struct", "enum", "trait", "pub", "pub(crate)", "pub(super)"].contains(first)
            });
            if let (Some(at), true) = (at, declared) {
                let name: String = words
                    .get(at + 1)
                    .unwrap_or(&"")
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if !name.is_empty() {
                    let place = file.strip_prefix(root()).unwrap().display().to_string();
                    defined.entry(name).or_default().push(place);
                }
            }
        }
    }
    let doubled: Vec<String> = defined
        .iter()
        .filter(|(name, places)| places.len() > 1 && !twice.contains(&name.as_str()))
        .map(|(name, places)| format!("{name}: {}", places.join(", ")))
        .collect();
    assert!(
        doubled.is_empty(),
        "one name for two ideas (ARCHITECTURE.md, \"One name per idea\"):\n{}",
        doubled.join("\n")
    );
}

#[test]
fn the_binary_has_few_loose_files_and_modules_of_one_style() {
    let src = root().join("src");
    let loose: Vec<_> = fs::read_dir(&src)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.is_file())
        .collect();
    assert!(loose.len() <= 10, "src/ has {} loose files", loose.len());
    // A module with submodules is `name/mod.rs`, never `name.rs` beside
    // `name/`.
    for dir in sources() {
        for file in rust_files(&dir) {
            let beside = file.with_extension("");
            assert!(
                !beside.is_dir(),
                "{} and {}/ both exist: a module's file is its folder's mod.rs",
                file.display(),
                beside.display()
            );
        }
    }
}

#[test]
fn unsafe_code_is_forbidden_in_every_crate_but_two() {
    for entry in fs::read_dir(root().join("crates")).unwrap() {
        let crate_dir = entry.unwrap().path();
        let name = crate_dir
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let lib = fs::read_to_string(crate_dir.join("src/lib.rs")).unwrap();
        let rule = if name == "exec" {
            "#![deny(unsafe_code)]"
        } else {
            "#![forbid(unsafe_code)]"
        };
        assert!(lib.contains(rule), "crates/{name} lacks {rule}");
    }
    let shape = fs::read_to_string(root().join("src/lib.rs")).unwrap();
    assert!(shape.contains("#![deny(unsafe_code)]"));
}

#[test]
fn the_readme_is_at_most_400_lines() {
    let readme = fs::read_to_string(root().join("README.md")).unwrap();
    let lines = readme.lines().count();
    assert!(
        lines <= 400,
        "README.md has {lines} lines, past 400: move the detail to GUIDE.md"
    );
}

/// A heading's anchor as GitHub makes it: lower case, spaces to hyphens,
/// and no punctuation but hyphens and underscores.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || [' ', '-', '_'].contains(c))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// A Markdown file's lines outside its fenced code blocks.
fn prose(text: &str) -> Vec<&str> {
    let mut fenced = false;
    text.lines()
        .filter(|line| {
            if line.starts_with("```") {
                fenced = !fenced;
                return false;
            }
            !fenced
        })
        .collect()
}

/// The anchors of a Markdown file's headings.
fn anchors(text: &str) -> Vec<String> {
    prose(text)
        .iter()
        .filter(|line| line.starts_with('#'))
        .map(|line| anchor(line.trim_start_matches('#')))
        .collect()
}

#[test]
fn every_link_in_the_readme_and_the_guide_lands() {
    let mut broken = Vec::new();
    for doc in ["README.md", "GUIDE.md"] {
        let text = fs::read_to_string(root().join(doc)).unwrap();
        for line in prose(&text) {
            for (at, _) in line.match_indices("](") {
                let target = line[at + 2..].split(')').next().unwrap_or_default();
                if target.contains("://") {
                    continue;
                }
                let (file, heading) = target.split_once('#').unwrap_or((target, ""));
                let file = if file.is_empty() { doc } else { file };
                let Ok(linked) = fs::read_to_string(root().join(file)) else {
                    if !root().join(file).exists() {
                        broken.push(format!("{doc}: {target}: no such file"));
                    }
                    continue;
                };
                if !heading.is_empty() && !anchors(&linked).iter().any(|a| a == heading) {
                    broken.push(format!("{doc}: {target}: no such heading"));
                }
            }
        }
    }
    assert!(
        broken.is_empty(),
        "links that land nowhere:\n{}",
        broken.join("\n")
    );
}
