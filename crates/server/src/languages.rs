//! `/languages`: what a client (an editor's language menu) can compile and run here.

use crate::state::AppState;
use crate::types::LanguageInfo;

/// (id, name, source, compile, run)
const BUILTIN: &[(&str, &str, &str, Option<&str>, &str)] = &[
    (
        "c",
        "C",
        "main.c",
        Some("cc -std=c11 -O2 -Wall -o main main.c -lm"),
        "./main",
    ),
    (
        "cpp",
        "C++",
        "main.cpp",
        Some("g++ -std=c++17 -O2 -Wall -o main main.cpp"),
        "./main",
    ),
    ("python", "Python 3", "main.py", None, "python3 main.py"),
    (
        "javascript",
        "JavaScript (Node.js)",
        "main.js",
        None,
        "node main.js",
    ),
    (
        "java",
        "Java",
        "Main.java",
        Some("javac Main.java"),
        "java -cp . Main",
    ),
    ("ruby", "Ruby", "main.rb", None, "ruby main.rb"),
    ("sh", "Shell", "main.sh", None, "sh main.sh"),
];

/// Is the first word of `cmd` a program on the sandbox's PATH (the host's system folders)?
fn on_path(cmd: &str) -> bool {
    let Some(prog) = cmd.split_whitespace().next() else {
        return false;
    };
    if prog.starts_with("./") {
        return true;
    }
    corral_sandbox::spec::DEFAULT_PATH
        .split(':')
        .any(|d| std::path::Path::new(d).join(prog).is_file())
}

pub fn list(_st: &AppState) -> Vec<LanguageInfo> {
    BUILTIN
        .iter()
        .map(|(id, name, source, compile, run)| LanguageInfo {
            id: id.to_string(),
            name: name.to_string(),
            source: source.to_string(),
            compile: compile.map(str::to_string),
            run: run.to_string(),
            available: compile.is_none_or(on_path) && on_path(run),
        })
        .collect()
}
