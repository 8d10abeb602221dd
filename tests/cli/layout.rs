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
    // build without fleets, and the HTTP rule's in a build without HTTP;
    // and one idea for streams and for datagrams.
    let twice = [
        "RedisShare",
        "Member",
        "FleetError",
        "Leaving",
        "HttpPlan",
        "HttpRules",
        "HttpGate",
        "LiveHttp",
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

/// The product lines of `text`: those before its test module, if it ends
/// with one (`#[cfg(test)]` over a `mod` with a body).
fn product_lines(text: &str) -> Vec<&str> {
    let lines: Vec<&str> = text.lines().collect();
    let end = (0..lines.len())
        .find(|&at| {
            lines[at].trim() == "#[cfg(test)]"
                && lines.get(at + 1).is_some_and(|next| {
                    let next = next.trim_start();
                    (next.starts_with("mod ") || next.starts_with("pub mod "))
                        && !next.ends_with(';')
                })
        })
        .unwrap_or(lines.len());
    lines[..end].to_vec()
}

/// How many of `lines` are code: neither blank nor a comment.
fn code_lines(lines: &[&str]) -> usize {
    lines
        .iter()
        .filter(|line| {
            let line = line.trim();
            !line.is_empty() && !line.starts_with("//")
        })
        .count()
}

/// A file's place under the workspace, as a message names it.
fn place(file: &Path) -> String {
    file.strip_prefix(root()).unwrap().display().to_string()
}

/// Whether `file` holds tests only: a `tests.rs`, or a file under a
/// `tests/` folder of a crate.
fn tests_only(file: &Path) -> bool {
    file.file_name().is_some_and(|name| name == "tests.rs")
        || file.components().any(|part| part.as_os_str() == "tests")
}

#[test]
fn product_files_and_functions_stay_short() {
    const MOST_FILE: usize = 450;
    const MOST_FUNCTION: usize = 80;
    // Tables written as code, which read row by row: splitting them would
    // only hide a row.
    let tables = [("crates/exec/src/filter.rs", "program")];
    let mut over = Vec::new();
    for file in sources().iter().flat_map(|dir| rust_files(dir)) {
        if tests_only(file.strip_prefix(root()).unwrap()) {
            continue;
        }
        let text = fs::read_to_string(&file).unwrap();
        let lines = product_lines(&text);
        let length = code_lines(&lines);
        if length > MOST_FILE {
            over.push(format!("{}: {length} lines of code", place(&file)));
        }
        for (at, line) in lines.iter().enumerate() {
            let trimmed = line.trim_start();
            let opens = [
                "fn ",
                "pub fn ",
                "pub(crate) fn ",
                "pub(super) fn ",
                "const fn ",
            ]
            .iter()
            .any(|start| trimmed.starts_with(start))
                && !trimmed.ends_with(';');
            if !opens {
                continue;
            }
            let indent = &line[..line.len() - trimmed.len()];
            let close = format!("{indent}}}");
            if let Some(end) = (at..lines.len()).find(|&end| lines[end] == close) {
                let length = code_lines(&lines[at..=end]);
                let name: String = trimmed
                    .split("fn ")
                    .nth(1)
                    .unwrap_or("")
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                let table = tables.contains(&(place(&file).as_str(), name.as_str()));
                if length > MOST_FUNCTION && !table {
                    over.push(format!(
                        "{}:{}: fn {name} has {length} lines of code",
                        place(&file),
                        at + 1
                    ));
                }
            }
        }
    }
    assert!(
        over.is_empty(),
        "files over {MOST_FILE} lines of code or functions over {MOST_FUNCTION} \
         (ARCHITECTURE.md, \"Sizes\"):\n{}",
        over.join("\n")
    );
}

#[test]
fn no_mode_but_the_argument_step_reads_the_command_line() {
    let mode = root().join("src/mode");
    for file in rust_files(&mode) {
        let inside = file.strip_prefix(&mode).unwrap();
        // The step reads the flags, and `mode::run` hands them to it.
        if inside.starts_with("step") || inside == Path::new("mod.rs") {
            continue;
        }
        let text = fs::read_to_string(&file).unwrap();
        // clap's flags, or toxiproxy-server's.
        let flags = ["Cli", "ToxiproxyFlags", "ServerCommand"];
        assert!(
            !text
                .split(|c: char| !c.is_alphanumeric() && c != '_')
                .any(|word| flags.contains(&word)),
            "{} reads the command line: a mode runs its plan (src/mode/plan.rs)",
            place(&file)
        );
    }
}

#[test]
fn no_crate_names_another_crate_s_modules_as_its_own() {
    for file in sources().iter().flat_map(|dir| rust_files(dir)) {
        let text = fs::read_to_string(&file).unwrap();
        for line in text.lines().map(str::trim) {
            let Some(path) = line
                .strip_prefix("pub use ")
                .or_else(|| line.strip_prefix("use "))
            else {
                continue;
            };
            if !path.starts_with("shape_") {
                continue;
            }
            // The one stand-in: a build without fleets names its own
            // `fleet` module where a build with them names the crate.
            let stand_in = place(&file) == "src/control/mod.rs" && path == "shape_fleet as fleet;";
            let renamed = path
                .split_once(" as ")
                .is_some_and(|(krate, _)| !krate.contains("::"));
            // Nor is another crate's item handed on as this one's.
            assert!(
                !line.starts_with("pub use ") || stand_in,
                "{}: `{line}` hands on another crate's item: write its path where it is used",
                place(&file)
            );
            assert!(
                !renamed || stand_in,
                "{}: `{line}`: a path says the crate it is in",
                place(&file)
            );
            // `use shape_leaves::{bucket, counting};` names modules.
            if let Some((krate, group)) = path
                .split_once("::{")
                .filter(|(krate, _)| !krate.contains("::"))
            {
                let modules = public_modules(krate);
                let module = group
                    .trim_end_matches("};")
                    .split(',')
                    .map(str::trim)
                    .find(|item| modules.iter().any(|module| module == item));
                assert!(
                    module.is_none(),
                    "{}: `{line}` names a module of another crate as this one's own: \
                     write its path where it is used",
                    place(&file)
                );
            }
        }
    }
}

/// The modules crate `krate` (`shape_leaves`) declares public at its root.
fn public_modules(krate: &str) -> Vec<String> {
    let folder = krate.trim_start_matches("shape_");
    let lib = fs::read_to_string(root().join("crates").join(folder).join("src/lib.rs"))
        .unwrap_or_default();
    lib.lines()
        .filter_map(|line| line.trim().strip_prefix("pub mod "))
        .map(|name| name.trim_end_matches(';').to_string())
        .collect()
}

#[test]
fn only_main_and_the_exit_module_end_the_process() {
    for file in sources().iter().flat_map(|dir| rust_files(dir)) {
        let where_ = place(&file);
        if where_ == "src/main.rs" || where_ == "crates/leaves/src/exit.rs" {
            continue;
        }
        let text = fs::read_to_string(&file).unwrap();
        assert!(
            !text.contains("process::exit"),
            "{where_} ends the process: hand the failure to the caller, which exits through \
             `Exit`"
        );
    }
}

#[test]
fn library_crates_build_without_the_command_line_s_dependencies() {
    for entry in fs::read_dir(root().join("crates")).unwrap() {
        let manifest = entry.unwrap().path().join("Cargo.toml");
        let text = fs::read_to_string(&manifest).unwrap();
        for line in text.lines().map(str::trim) {
            let name = line.split(['.', ' ', '=']).next().unwrap_or("");
            let place = manifest.strip_prefix(root()).unwrap().display();
            assert!(
                name != "indicatif",
                "{place}: a library crate draws no bar (say.rs lifts one through a closure)"
            );
            assert!(
                name != "clap" || line.contains("optional = true"),
                "{place}: clap only behind the `cli` feature, which the binary turns on"
            );
        }
    }
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
