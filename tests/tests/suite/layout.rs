//! The codebase's shape: no source files import each other, in pairs or around a longer
//! cycle. A type that two files both need lives in a third (its own small module), so
//! every file can be read after the files it uses. A name a `lib.rs` or `mod.rs` re-exports counts as the file that
//! defines it; test code (`#[cfg(test)]` and below) is left out, since a test module uses
//! its parent by design.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A module path inside one crate: `["exec", "routes"]` for `exec/routes.rs`, `[]` for
/// `lib.rs` or `main.rs`.
type Module = Vec<String>;

#[test]
fn no_files_import_each_other_in_a_cycle() {
    let workspace = workspace();
    let mut cycles = Vec::new();
    let mut crates = 0;
    for src in crate_sources() {
        crates += 1;
        cycles.extend(Crate::read(&src).cycles());
    }
    assert!(
        crates >= 8,
        "found only {crates} crates under {workspace:?}"
    );
    assert!(
        cycles.is_empty(),
        "files that import each other, around a cycle:\n{}",
        cycles.join("\n")
    );
}

/// A `mod.rs` says what a directory holds: it declares modules and re-exports their names,
/// and anything with a body lives in a file named for what it is.
#[test]
fn a_mod_rs_only_declares_and_re_exports() {
    let workspace = workspace();
    let mut found = 0;
    let mut offenders = Vec::new();
    for src in crate_sources() {
        for file in modules(&src).into_values() {
            if file.file_name().is_some_and(|name| name == "mod.rs") {
                found += 1;
                let text = std::fs::read_to_string(&file).unwrap();
                offenders.extend(items_beyond_declarations(&text).into_iter().map(|item| {
                    format!(
                        "{}: {item}",
                        file.strip_prefix(&workspace).unwrap_or(&file).display()
                    )
                }));
            }
        }
    }
    assert!(
        found >= 10,
        "found only {found} mod.rs files under {workspace:?}"
    );
    assert!(
        offenders.is_empty(),
        "mod.rs files holding more than declarations and re-exports:\n{}",
        offenders.join("\n")
    );
}

#[test]
fn a_mod_rs_with_a_function_is_caught() {
    let declares = "//! Doc.\n\npub mod a;\nmod b;\n#[cfg(test)]\nmod tests;\n\npub use a::{A, B as C};\npub(crate) use b::D;\n";
    assert!(items_beyond_declarations(declares).is_empty());
    let handler = format!(
        "{declares}\nuse axum::Router;\n\npub fn router() -> Router {{\n    Router::new()\n}}\n"
    );
    assert_eq!(items_beyond_declarations(&handler).len(), 2, "{handler}");
}

/// The statements of a `mod.rs` that are neither a module declaration nor a `pub use`.
fn items_beyond_declarations(text: &str) -> Vec<String> {
    let code: String = text
        .lines()
        .map(str::trim)
        .filter(|line| !line.starts_with("//") && !line.starts_with("#["))
        .collect::<Vec<_>>()
        .join(" ");
    let declaration = |statement: &str| {
        let public = ["pub(crate) ", "pub(super) ", "pub "]
            .iter()
            .find_map(|visibility| statement.strip_prefix(visibility));
        let bare = public.unwrap_or(statement);
        bare.strip_prefix("mod ")
            .is_some_and(|name| name.bytes().all(is_ident))
            || (public.is_some() && bare.starts_with("use "))
    };
    let mut items = Vec::new();
    let mut rest = code.as_str();
    while let Some(end) = rest.find([';', '{']) {
        let statement = rest[..end].trim();
        if rest.as_bytes()[end] == b'{'
            && !statement.contains(" use ")
            && !statement.starts_with("use ")
        {
            // An item with a body: report it and skip to its end.
            items.push(statement.to_string());
            let mut depth = 0;
            let mut close = rest.len();
            for (index, byte) in rest.bytes().enumerate().skip(end) {
                match byte {
                    b'{' => depth += 1,
                    b'}' => {
                        depth -= 1;
                        if depth == 0 {
                            close = index + 1;
                            break;
                        }
                    }
                    _ => {}
                }
            }
            rest = &rest[close..];
            continue;
        }
        // A use tree's braces end at the statement's `;`.
        let end = rest[end..].find(';').map_or(rest.len(), |semi| end + semi);
        let statement = rest[..end].trim();
        if !statement.is_empty() && !declaration(statement) {
            items.push(statement.to_string());
        }
        rest = rest.get(end + 1..).unwrap_or("");
    }
    items
}

/// The daemon's wire error knows no domain: each domain converts its own errors to it, in
/// its `wire_error.rs`, so a new domain never edits a shared file to say how it fails.
#[test]
fn the_wire_error_imports_no_domain() {
    let src = workspace().join("fsd/src");
    let daemon = Crate::read(&src);
    let imports = daemon.imports();
    let error: Module = vec!["error".to_string()];
    assert!(daemon.files.contains_key(&error), "no fsd/src/error.rs");
    let domains: Vec<&Module> = imports
        .get(&error)
        .into_iter()
        .flatten()
        // Timestamps are a leaf; the wire's plumbing sits above the error (it answers it).
        .filter(|module| module.first().is_none_or(|top| top != "time"))
        .collect();
    assert!(domains.is_empty(), "fsd/src/error.rs imports {domains:?}");
    for (module, file) in &daemon.files {
        if module.last().is_some_and(|name| name == "wire_error") {
            let into_domain = imports.get(module).into_iter().flatten();
            let foreign: Vec<&Module> = into_domain
                .filter(|target| target.first() != module.first() && target != &&error)
                .filter(|target| {
                    target
                        .first()
                        .is_none_or(|top| !["wire", "config", "time"].contains(&top.as_str()))
                })
                .collect();
            assert!(
                foreign.is_empty(),
                "{file:?} converts another domain's errors: {foreign:?}"
            );
        }
    }
}

/// The daemon's imports `forbidden(module, target)` picks, each as `module imports target`.
fn daemon_imports_where(forbidden: impl Fn(&Module, &Module) -> bool) -> Vec<String> {
    let daemon = Crate::read(&workspace().join("fsd/src"));
    let mut found = Vec::new();
    for (module, targets) in daemon.imports() {
        for target in targets {
            if forbidden(&module, &target) {
                found.push(format!(
                    "{} imports {}",
                    module.join("::"),
                    target.join("::")
                ));
            }
        }
    }
    found
}

/// Domains sit side by side on services: none imports another's routes (the server alone
/// assembles them), so a transport can reach any operation through its service.
#[test]
fn no_domain_imports_another_domains_routes() {
    let found = daemon_imports_where(|module, target| {
        module.len() > 1
            && target.first() != module.first()
            && target.last().is_some_and(|name| name == "routes")
    });
    assert!(found.is_empty(), "{}", found.join("\n"));
}

/// The transports (`/rpc`, `/ws`) and the server that assembles them sit on the domains:
/// no domain, nor the protocol and plumbing beneath them, imports one, so an operation
/// never depends on how it was called (the capnweb protocol a sidecar also speaks is
/// `capnweb`, not a transport).
#[test]
fn no_domain_imports_a_transport() {
    const TRANSPORTS: [&str; 3] = ["rpc", "ws", "server"];
    let transport = |path: &Module| {
        path.first()
            .is_some_and(|top| TRANSPORTS.contains(&top.as_str()))
    };
    let found = daemon_imports_where(|module, target| {
        !module.is_empty() && !transport(module) && transport(target)
    });
    assert!(found.is_empty(), "{}", found.join("\n"));
}

/// Handlers and operations take only the services they use (`State<Arc<FileService>>`, a
/// domain's own substate such as `BackupState`), given by the server's `AppState` through
/// `FromRef`: only the server and the transports, which reach every domain, hold the whole,
/// so no domain depends on every other through it.
#[test]
fn only_the_server_and_the_transports_hold_the_whole_state() {
    const HOLDERS: [&str; 4] = ["rpc", "ws", "server", "state"];
    let found = daemon_imports_where(|module, target| {
        module
            .first()
            .is_some_and(|top| !HOLDERS.contains(&top.as_str()))
            && target.first().is_some_and(|first| first == "state")
    });
    assert!(found.is_empty(), "{}", found.join("\n"));
}

/// Which of the project's crates each crate may depend on (docs/architecture.md has the
/// reasons): engines sit on the wire contract and on each other, never on a transport or
/// on the trusted side; the daemon and the trusted side sit on engines, never on each other.
const ALLOWED_DEPENDENCIES: &[(&str, &[&str])] = &[
    ("fsd-api", &[]),
    ("fsd-tunnels", &[]),
    ("fsd-search", &[]),
    ("fsd-control", &["fsd-api"]),
    ("fsd-watch", &["fsd-api"]),
    ("fsd-process", &["fsd-api", "fsd-search"]),
    ("fsd-s3", &["fsd-control"]),
    ("fsd-backup", &["fsd-api", "fsd-s3", "fsd-search"]),
    ("fsd-mounts", &["fsd-control", "fsd-s3", "fsd-search"]),
    ("fsd-merge", &["fsd-api"]),
    ("fsd-sdk", &["fsd-api", "fsd-merge"]),
    (
        "fsd",
        &[
            "fsd-api",
            "fsd-backup",
            "fsd-control",
            "fsd-merge",
            "fsd-mounts",
            "fsd-process",
            "fsd-s3",
            "fsd-search",
            "fsd-tunnels",
            "fsd-watch",
        ],
    ),
    (
        "fsctl",
        &[
            "fsd-api",
            "fsd-backup",
            "fsd-control",
            "fsd-mounts",
            "fsd-watch",
            "fsd-s3",
            "fsd-sdk",
        ],
    ),
    ("fsd-worker", &["fsd-api", "fsd-control", "fsd-s3"]),
];

#[test]
fn crates_depend_only_on_the_crates_the_map_allows() {
    let mut checked = 0;
    let mut wrong = Vec::new();
    for entry in std::fs::read_dir(workspace()).unwrap().flatten() {
        let Ok(manifest) = std::fs::read_to_string(entry.path().join("Cargo.toml")) else {
            continue;
        };
        let Some(name) = manifest
            .lines()
            .find_map(|line| line.strip_prefix("name = \""))
            .and_then(|rest| rest.strip_suffix('"'))
        else {
            continue; // the workspace's own manifest
        };
        if name == "fsd-tests" {
            continue; // the tests drive everything
        }
        let allowed = ALLOWED_DEPENDENCIES
            .iter()
            .find(|(crate_name, _)| *crate_name == name)
            .map(|(_, allowed)| *allowed)
            .unwrap_or_else(|| panic!("{name} is not in the dependency map"));
        checked += 1;
        // Normal dependencies only: the sections up to the next that is not one.
        let mut in_dependencies = false;
        for line in manifest.lines() {
            if line.starts_with('[') {
                in_dependencies = line == "[dependencies]"
                    || (line.starts_with("[target.") && line.ends_with(".dependencies]"));
                continue;
            }
            let dependency = line.split(['=', '.', ' ']).next().unwrap_or_default();
            let ours = dependency.starts_with("fsd") || dependency == "fsctl";
            if in_dependencies && ours && !allowed.contains(&dependency) {
                wrong.push(format!("{name} depends on {dependency}"));
            }
        }
    }
    assert!(checked >= 12, "checked only {checked} crates");
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn a_cycle_of_three_files_is_found() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    std::fs::write(src.join("lib.rs"), "mod a;\nmod b;\nmod c;\n").unwrap();
    std::fs::write(src.join("a.rs"), "use crate::b::B;\npub struct A;\n").unwrap();
    std::fs::write(src.join("b.rs"), "use crate::c::C;\npub struct B;\n").unwrap();
    std::fs::write(src.join("c.rs"), "pub struct C;\n").unwrap();
    assert!(Crate::read(src).cycles().is_empty());
    std::fs::write(src.join("c.rs"), "use crate::a::A;\npub struct C;\n").unwrap();
    let cycles = Crate::read(src).cycles();
    assert_eq!(cycles.len(), 1, "{cycles:?}");
    for file in ["a.rs", "b.rs", "c.rs"] {
        assert!(cycles[0].contains(file), "{cycles:?}");
    }
}

#[test]
fn a_declared_test_module_hides_nothing_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    let lib = "mod a;\nmod b;\n#[cfg(test)]\nmod tests;\nuse a::A;\n";
    std::fs::write(src.join("lib.rs"), lib).unwrap();
    std::fs::write(src.join("a.rs"), "use crate::b::B;\npub struct A;\n").unwrap();
    std::fs::write(src.join("b.rs"), "pub struct B;\n").unwrap();
    std::fs::write(src.join("tests.rs"), "").unwrap();
    assert!(Crate::read(src).cycles().is_empty());
    std::fs::write(
        src.join("b.rs"),
        "use crate::A;\npub struct B;\nuse crate::a::A as _;\n",
    )
    .unwrap();
    let cycles = Crate::read(src).cycles();
    assert_eq!(cycles.len(), 1, "{cycles:?}");
    // An inline test module is left out.
    let with_tests =
        "use crate::a::A;\npub struct B;\n#[cfg(test)]\nmod tests {\n    use crate::a::A;\n}\n";
    std::fs::write(
        src.join("b.rs"),
        with_tests.replace("use crate::a::A;\npub", "pub"),
    )
    .unwrap();
    assert!(Crate::read(src).cycles().is_empty());
}

#[test]
fn use_trees_expand_to_every_path() {
    let leaves = |tree| -> Vec<String> { expand_use(tree).into_iter().map(|l| l.path).collect() };
    assert_eq!(
        leaves("super::{a::{B, c}, d, self}"),
        ["super::a::B", "super::a::c", "super::d", "super"]
    );
    assert_eq!(leaves("crate::x::Y as Z"), ["crate::x::Y"]);
    assert_eq!(expand_use("crate::x::Y as Z")[0].name, "Z");
}

#[test]
fn a_re_export_counts_as_the_file_that_defines_it() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    std::fs::write(src.join("lib.rs"), "mod a;\nmod b;\npub use b::Shared;\n").unwrap();
    std::fs::write(src.join("a.rs"), "use crate::Shared;\npub struct A;\n").unwrap();
    std::fs::write(src.join("b.rs"), "pub struct Shared;\n").unwrap();
    assert!(Crate::read(src).cycles().is_empty());

    std::fs::write(src.join("b.rs"), "use crate::a::A;\npub struct Shared;\n").unwrap();
    let cycles = Crate::read(src).cycles();
    assert_eq!(cycles.len(), 1, "{cycles:?}");
    assert!(cycles[0].contains("a.rs") && cycles[0].contains("b.rs"));
}

/// The longest a production function may be: one longer is several steps that want names.
const MAX_FUNCTION_LINES: usize = 200;

/// No production function runs over 200 lines (docs/architecture.md). Test code is left
/// out: inline test modules, files of a `tests` module, and the test crate.
#[test]
fn no_production_function_is_over_200_lines() {
    let mut long = Vec::new();
    for src in crate_sources() {
        if src.parent().and_then(Path::file_name) == Some(std::ffi::OsStr::new("tests")) {
            continue;
        }
        for (module, path) in modules(&src) {
            if module.iter().any(|part| part == "tests") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            for (name, line, lines) in function_lengths(without_test_module(&text)) {
                if lines > MAX_FUNCTION_LINES {
                    long.push(format!("{}:{line} {name}: {lines} lines", path.display()));
                }
            }
        }
    }
    assert!(
        long.is_empty(),
        "functions over {MAX_FUNCTION_LINES} lines: {long:#?}"
    );
}

#[test]
fn a_function_is_measured_past_braces_in_literals_and_comments() {
    let text = r##"
fn short() -> char {
    let open = '{';
    let s = "}}}{";
    let r = r#"}"#;
    // }
    /* } /* nested } */ */
    let b = b'}';
    open
}

trait T {
    fn declared(&self);
}

pub async fn outer<'a>(x: &'a str) -> &'a str {
    fn inner() {}
    x
}
"##;
    let found = function_lengths(text);
    assert_eq!(
        found,
        vec![
            ("short".to_string(), 2, 9),
            ("inner".to_string(), 17, 1),
            ("outer".to_string(), 16, 4),
        ]
    );
}

/// Every function with a body in `text`: its name, the line of its `fn` and how many lines
/// it spans to its closing brace. Braces in strings, characters and comments are passed
/// over.
fn function_lengths(text: &str) -> Vec<(String, usize, usize)> {
    let chars: Vec<char> = text.chars().collect();
    let mut found = Vec::new();
    // Open braces: the function each opened, if it opened one's body.
    let mut open: Vec<Option<(String, usize)>> = Vec::new();
    let mut pending: Option<(String, usize)> = None;
    let (mut at, mut line) = (0, 1);
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    while at < chars.len() {
        let c = chars[at];
        let next = chars.get(at + 1).copied();
        match c {
            '\n' => line += 1,
            '/' if next == Some('/') => {
                while at < chars.len() && chars[at] != '\n' {
                    at += 1;
                }
                continue;
            }
            '/' if next == Some('*') => {
                let mut depth = 0;
                while at < chars.len() {
                    if chars[at] == '/' && chars.get(at + 1) == Some(&'*') {
                        depth += 1;
                        at += 2;
                    } else if chars[at] == '*' && chars.get(at + 1) == Some(&'/') {
                        depth -= 1;
                        at += 2;
                        if depth == 0 {
                            break;
                        }
                    } else {
                        line += usize::from(chars[at] == '\n');
                        at += 1;
                    }
                }
                continue;
            }
            'r' if (next == Some('#') || next == Some('"'))
                && (at == 0 || !ident(chars[at - 1])) =>
            {
                let hashes = chars[at + 1..].iter().take_while(|&&h| h == '#').count();
                if chars.get(at + 1 + hashes) == Some(&'"') {
                    at += 2 + hashes;
                    while at < chars.len() {
                        let closes = chars[at] == '"'
                            && (0..hashes).all(|h| chars.get(at + 1 + h) == Some(&'#'));
                        line += usize::from(chars[at] == '\n');
                        at += 1;
                        if closes {
                            at += hashes;
                            break;
                        }
                    }
                    continue;
                }
            }
            '"' => {
                at += 1;
                while at < chars.len() && chars[at] != '"' {
                    line += usize::from(chars[at] == '\n');
                    at += if chars[at] == '\\' { 2 } else { 1 };
                }
            }
            '\'' => {
                // A character ('x', '\n', '{'); else a lifetime ('a), passed as a name.
                if next == Some('\\') {
                    at += 2;
                    while at < chars.len() && chars[at] != '\'' {
                        at += 1;
                    }
                } else if chars.get(at + 2) == Some(&'\'') {
                    at += 2;
                }
            }
            '{' => open.push(pending.take()),
            '}' => {
                if let Some(Some((name, start))) = open.pop() {
                    found.push((name, start, line - start + 1));
                }
            }
            ';' => pending = None,
            'f' if next == Some('n')
                && (at == 0 || !ident(chars[at - 1]))
                && chars.get(at + 2).is_some_and(|c| c.is_whitespace()) =>
            {
                let name: String = chars[at + 2..]
                    .iter()
                    .skip_while(|c| c.is_whitespace())
                    .take_while(|&&c| ident(c))
                    .collect();
                pending = Some((name, line));
            }
            _ => {}
        }
        at += 1;
    }
    found
}

/// The project's root.
fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The `src` folder of every crate of the project (the Worker's too).
fn crate_sources() -> Vec<PathBuf> {
    std::fs::read_dir(workspace())
        .unwrap()
        .flatten()
        .map(|entry| entry.path())
        .filter(|dir| dir.join("Cargo.toml").is_file() && dir.join("src").is_dir())
        .map(|dir| dir.join("src"))
        .collect()
}

/// One crate's source files and what each names.
struct Crate {
    files: BTreeMap<Module, PathBuf>,
    /// Every path each file names, test code left out.
    uses: BTreeMap<Module, Vec<String>>,
    /// What each file re-exports: the name it is known by → the path it comes from.
    exports: BTreeMap<Module, BTreeMap<String, String>>,
}

impl Crate {
    fn read(src: &Path) -> Crate {
        let files = modules(src);
        let mut uses = BTreeMap::new();
        let mut exports = BTreeMap::new();
        for (module, path) in &files {
            let text = std::fs::read_to_string(path).unwrap();
            let text = without_test_module(&text);
            let (paths, exported) = used_paths(text);
            uses.insert(module.clone(), paths);
            exports.insert(module.clone(), exported);
        }
        Crate {
            files,
            uses,
            exports,
        }
    }

    /// Which files each file imports.
    fn imports(&self) -> BTreeMap<Module, BTreeSet<Module>> {
        let mut imports: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
        for (module, paths) in &self.uses {
            for path in paths {
                if let Some(target) = self.resolve(module, path, 0)
                    && &target != module
                {
                    imports.entry(module.clone()).or_default().insert(target);
                }
            }
        }
        imports
    }

    /// The groups of files that import each other around a cycle (the strongly connected
    /// components of the import graph with more than one file), each as one line.
    fn cycles(&self) -> Vec<String> {
        let imports = self.imports();
        // Tarjan's algorithm, iteratively.
        let nodes: Vec<&Module> = self.files.keys().collect();
        let index_of: BTreeMap<&Module, usize> =
            nodes.iter().enumerate().map(|(i, m)| (*m, i)).collect();
        let edges: Vec<Vec<usize>> = nodes
            .iter()
            .map(|m| {
                imports
                    .get(*m)
                    .into_iter()
                    .flatten()
                    .filter_map(|t| index_of.get(t).copied())
                    .collect()
            })
            .collect();
        let (mut index, mut low) = (vec![usize::MAX; nodes.len()], vec![0; nodes.len()]);
        let (mut on_stack, mut stack) = (vec![false; nodes.len()], Vec::new());
        let (mut next, mut components) = (0, Vec::new());
        for root in 0..nodes.len() {
            if index[root] != usize::MAX {
                continue;
            }
            let mut work = vec![(root, 0)];
            while let Some((node, edge)) = work.pop() {
                if edge == 0 {
                    index[node] = next;
                    low[node] = next;
                    next += 1;
                    stack.push(node);
                    on_stack[node] = true;
                }
                if let Some(&target) = edges[node].get(edge) {
                    work.push((node, edge + 1));
                    if index[target] == usize::MAX {
                        work.push((target, 0));
                    } else if on_stack[target] {
                        low[node] = low[node].min(index[target]);
                    }
                    continue;
                }
                if let Some(&(parent, _)) = work.last() {
                    low[parent] = low[parent].min(low[node]);
                }
                if low[node] == index[node] {
                    let mut component = Vec::new();
                    while let Some(member) = stack.pop() {
                        on_stack[member] = false;
                        component.push(member);
                        if member == node {
                            break;
                        }
                    }
                    if component.len() > 1 {
                        components.push(component);
                    }
                }
            }
        }
        components
            .into_iter()
            .map(|component| {
                let mut files: Vec<String> = component
                    .iter()
                    .map(|&i| self.files[nodes[i]].display().to_string())
                    .collect();
                files.sort();
                files.join(" -> ")
            })
            .collect()
    }

    /// The file a path used in `from` leads into: the longest prefix of it that is a
    /// module of the crate, then, when the next name is one that module re-exports, where
    /// that comes from. Paths into other crates lead nowhere.
    fn resolve(&self, from: &Module, path: &str, depth: usize) -> Option<Module> {
        let mut parts: Vec<&str> = path.split("::").filter(|p| !p.is_empty()).collect();
        let mut base: Module = match parts.first().copied() {
            Some("crate") => {
                parts.remove(0);
                Vec::new()
            }
            Some("super") => {
                let mut base = from.clone();
                while parts.first() == Some(&"super") {
                    parts.remove(0);
                    base.pop();
                }
                base
            }
            Some("self") => {
                parts.remove(0);
                from.clone()
            }
            Some(child) => {
                let mut child_module = from.clone();
                child_module.push(child.to_string());
                if !self.files.contains_key(&child_module) {
                    return None;
                }
                from.clone()
            }
            None => return None,
        };
        let start = base.len();
        base.extend(parts.iter().map(|p| p.to_string()));
        let len = (start..=base.len())
            .rev()
            .find(|&len| self.files.contains_key(&base[..len]))?;
        let module = base[..len].to_vec();
        let exported = base
            .get(len)
            .and_then(|name| self.exports.get(&module)?.get(name));
        match exported {
            Some(origin) if depth < 8 => {
                let rest = base[len + 1..].iter().map(|p| format!("::{p}"));
                let origin = format!("{origin}{}", rest.collect::<String>());
                self.resolve(&module, &origin, depth + 1).or(Some(module))
            }
            _ => Some(module),
        }
    }
}

/// `text` up to its inline test module (`#[cfg(test)] mod tests { … }`), which uses its
/// parent by design. A declared one (`#[cfg(test)] mod tests;`) is a file of its own.
fn without_test_module(text: &str) -> &str {
    let mut from = 0;
    while let Some(at) = text[from..].find("#[cfg(test)]") {
        let at = from + at;
        let item = text[at + "#[cfg(test)]".len()..].trim_start();
        let item = ["pub(crate) ", "pub(super) ", "pub "]
            .iter()
            .find_map(|visibility| item.strip_prefix(visibility))
            .unwrap_or(item);
        let inline = item.strip_prefix("mod ").is_some_and(|rest| {
            rest.find(['{', ';']).is_some_and(|end| {
                rest[..end].trim().bytes().all(is_ident) && rest.as_bytes()[end] == b'{'
            })
        });
        if inline {
            return &text[..at];
        }
        from = at + 1;
    }
    text
}

/// Every `.rs` file under `src` by its module path.
fn modules(src: &Path) -> BTreeMap<Module, PathBuf> {
    let mut out = BTreeMap::new();
    let mut pending = vec![src.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                pending.push(path);
                continue;
            }
            if path.extension().is_none_or(|ext| ext != "rs") {
                continue;
            }
            let relative = path.strip_prefix(src).unwrap().with_extension("");
            let mut module: Module = relative
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            if matches!(
                module.last().map(String::as_str),
                Some("mod" | "lib" | "main")
            ) {
                module.pop();
            }
            out.insert(module, path);
        }
    }
    out
}

/// The paths a file names — every leaf of its `use` declarations (lines that start with
/// `use` or `pub use`) and every `crate::…::` or `super::…::` path written in code — and
/// what its public `use` declarations re-export (name → path). Comments are skipped.
fn used_paths(text: &str) -> (Vec<String>, BTreeMap<String, String>) {
    let mut paths = Vec::new();
    let mut exports = BTreeMap::new();
    let mut statement: Option<(bool, String)> = None;
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with("//") {
            continue;
        }
        match statement.as_mut() {
            Some((_, tree)) => {
                tree.push(' ');
                tree.push_str(line);
            }
            None => {
                let private = line.strip_prefix("use ");
                let public = ["pub ", "pub(crate) ", "pub(super) "]
                    .iter()
                    .find_map(|p| line.strip_prefix(p)?.strip_prefix("use "));
                match (private, public) {
                    (Some(tree), _) => statement = Some((false, tree.to_string())),
                    (_, Some(tree)) => statement = Some((true, tree.to_string())),
                    _ => paths.extend(inline_paths(line)),
                }
            }
        }
        if let Some((public, tree)) = statement.take() {
            let Some((tree, _)) = tree.split_once(';') else {
                statement = Some((public, tree));
                continue;
            };
            for leaf in expand_use(tree) {
                if public {
                    exports.insert(leaf.name, leaf.path.clone());
                }
                paths.push(leaf.path);
            }
        }
    }
    (paths, exports)
}

/// The `crate::…` and `super::…` paths in one line of code.
fn inline_paths(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    for root in ["crate::", "super::"] {
        let mut rest = line;
        while let Some(at) = rest.find(root) {
            let starts_word = at == 0 || !is_ident(rest.as_bytes()[at - 1]);
            let path: String = rest[at..]
                .chars()
                .take_while(|&c| c == ':' || c == '_' || c.is_ascii_alphanumeric())
                .collect();
            rest = &rest[at + path.len()..];
            if starts_word {
                out.push(path.trim_end_matches(':').to_string());
            }
        }
    }
    out
}

/// One leaf of a use tree: the path and the name it brings in.
struct Leaf {
    path: String,
    name: String,
}

/// The leaves of one use tree (`a::{b, c::{d}}` → `a::b`, `a::c::d`).
fn expand_use(tree: &str) -> Vec<Leaf> {
    let tree = tree.trim();
    let Some(open) = tree.find('{') else {
        let (path, alias) = match tree.split_once(" as ") {
            Some((path, alias)) => (path.trim(), Some(alias.trim())),
            None => (tree, None),
        };
        let name = alias.unwrap_or_else(|| path.rsplit("::").next().unwrap_or(path));
        return vec![Leaf {
            path: path.to_string(),
            name: name.to_string(),
        }];
    };
    let prefix = tree[..open].trim_end_matches("::");
    let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len()).max(open + 1)];
    let mut out = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (i, c) in inner.char_indices().chain([(inner.len(), ',')]) {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                let part = inner[start..i].trim();
                start = i + 1;
                if part == "self" {
                    out.extend(expand_use(prefix));
                } else if !part.is_empty() {
                    out.extend(expand_use(&format!("{prefix}::{part}")));
                }
            }
            _ => {}
        }
    }
    out
}

fn is_ident(byte: u8) -> bool {
    byte == b'_' || byte.is_ascii_alphanumeric()
}
