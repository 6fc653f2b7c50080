//! The languages the CS50 Sandbox paper names beside C, C++, Java, JavaScript and Python — OCaml,
//! Perl, PHP, Ruby, Scheme and Go — graded end to end through `corral check` with the built-in
//! registry's own commands (`{compile}` / `{run}`): a prompt answered on standard input, a compile
//! error reported as one (compiled languages), a runtime error with the runtime's own exit code,
//! and an endless loop stopped by the CPU limit. Each runs in a real sandbox; none may be missing
//! (scripts/setup installs them from Debian's packages).

use std::path::Path;
use std::process::Command;

use serde_json::Value;

struct Lang {
    id: &'static str,
    /// Prints "Name: " (flushed, no newline), reads a line, prints "hello, NAME".
    greet: &'static str,
    /// A compile error, for compiled languages.
    broken: Option<&'static str>,
    /// Fails at run time the way the language does by default (uncaught exception, die, panic).
    crash: &'static str,
    /// The exit code that failure gives.
    crash_code: i64,
    /// Never ends.
    spin: &'static str,
}

const LANGS: [Lang; 6] = [
    Lang {
        id: "ocaml",
        greet: "let () = print_string \"Name: \"; flush stdout;\n  let n = read_line () in Printf.printf \"hello, %s\\n\" n\n",
        broken: Some("let () = print_string (1 + \"x\")\n"),
        crash: "let () = failwith \"boom\"\n",
        crash_code: 2,
        spin: "let rec f n = f (n + 1)\nlet () = f 0\n",
    },
    Lang {
        id: "perl",
        greet: "$| = 1; print \"Name: \"; my $n = <STDIN>; chomp $n; print \"hello, $n\\n\";\n",
        broken: None,
        crash: "die \"boom\\n\";\n",
        crash_code: 255,
        spin: "my $i = 0; while (1) { $i++ }\n",
    },
    Lang {
        id: "php",
        greet: "<?php\necho \"Name: \"; $n = trim(fgets(STDIN)); echo \"hello, $n\\n\";\n",
        broken: None,
        crash: "<?php\nthrow new Exception(\"boom\");\n",
        crash_code: 255,
        spin: "<?php\n$i = 0; while (true) { $i++; }\n",
    },
    Lang {
        id: "ruby",
        greet: "$stdout.sync = true\nprint \"Name: \"\nn = gets.chomp\nputs \"hello, #{n}\"\n",
        broken: None,
        crash: "raise \"boom\"\n",
        crash_code: 1,
        spin: "i = 0\nloop { i += 1 }\n",
    },
    Lang {
        id: "scheme",
        greet: "(use-modules (ice-9 rdelim))\n(display \"Name: \") (force-output)\n(define n (read-line))\n(display (string-append \"hello, \" n)) (newline)\n",
        broken: None,
        crash: "(error \"boom\")\n",
        crash_code: 1,
        spin: "(let loop ((i 0)) (loop (+ i 1)))\n",
    },
    Lang {
        id: "go",
        greet: "package main\n\nimport (\n\t\"bufio\"\n\t\"fmt\"\n\t\"os\"\n\t\"strings\"\n)\n\nfunc main() {\n\tfmt.Print(\"Name: \")\n\tn, _ := bufio.NewReader(os.Stdin).ReadString('\\n')\n\tfmt.Printf(\"hello, %s\\n\", strings.TrimSpace(n))\n}\n",
        broken: Some("package main\n\nfunc main() { var x int = \"no\" }\n"),
        crash: "package main\n\nfunc main() { panic(\"boom\") }\n",
        crash_code: 2,
        spin: "package main\n\nfunc main() {\n\ti := 0\n\tfor {\n\t\ti++\n\t}\n}\n",
    },
];

/// A suite in `lang` with a compile check (compiled languages) and `run_checks` depending on it.
fn suite(lang: &str, compiled: bool, run_checks: &str) -> String {
    let mut s = format!(
        "name: {lang}\nlanguage: {lang}\nlimits: {{cpu_time: 2s, wall_time: 20s}}\ntimeout: 30s\nchecks:\n"
    );
    let depends = if compiled {
        s.push_str(
            "  - id: compiles\n    limits: {cpu_time: 20s, wall_time: 60s}\n    steps:\n      - run: \"{compile}\"\n      - exit: 0\n",
        );
        "    depends: [compiles]\n"
    } else {
        ""
    };
    for check in run_checks.split("---\n") {
        let (head, rest) = check.split_once('\n').unwrap();
        s.push_str(&format!("{head}\n{depends}{rest}"));
    }
    s
}

/// `corral check --json --staff` of `source` saved under the language's file name.
fn grade(lang: &str, source_name: &str, source: &str, suite: &str) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let sub = dir.path().join("submission");
    std::fs::create_dir(&sub).unwrap();
    std::fs::write(sub.join(source_name), source).unwrap();
    let suite_path = dir.path().join("suite.yaml");
    std::fs::write(&suite_path, suite).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_corral"))
        .args(["check", "--json", "--staff"])
        .args([&suite_path, &sub].map(|p| p.as_os_str()))
        .env_remove("CORRAL_LANGUAGES")
        .output()
        .unwrap();
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{lang}: not JSON ({e}): {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

fn result(json: &Value, check: &str) -> Value {
    json["results"][check]["result"].clone()
}

/// `corral ARGS` (without an operator's registry): its JSON output.
fn corral_json(args: &[&str]) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_corral"))
        .args(args)
        .env_remove("CORRAL_LANGUAGES")
        .output()
        .unwrap();
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The built-in language `id` as `corral languages --json` lists it.
fn listed(id: &str) -> Value {
    corral_json(&["languages", "--json"])
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["id"] == id)
        .unwrap_or_else(|| panic!("no built-in language {id}"))
        .clone()
}

/// Each language's registry entry: available here, with its source file name and compile step.
fn entry(id: &str) -> (String, bool) {
    let e = listed(id);
    assert_eq!(
        e["available"], true,
        "{id} must be available (scripts/setup installs it): {e}"
    );
    assert!(e["version"].is_string(), "{id}: no version read: {e}");
    (
        e["source"].as_str().unwrap().to_string(),
        e["compile"].is_string(),
    )
}

fn run_language(l: &Lang) {
    let (source, compiled) = entry(l.id);
    assert_eq!(compiled, l.broken.is_some(), "{}: compiled or not", l.id);

    // A prompt, an answer on standard input, the greeting.
    let greets = suite(
        l.id,
        compiled,
        "  - id: greets\n    steps:\n      - run: \"{run}\"\n      - stdout: {regex: \"Name: \"}\n      - stdin: Ada Lovelace\n      - stdout: {regex: \"^hello, Ada Lovelace\\\\n$\"}\n      - exit: 0\n",
    );
    let json = grade(l.id, &source, l.greet, &greets);
    assert_eq!(result(&json, "greets"), true, "{}: {json:#}", l.id);

    // A compile error is the compile check's failure; what depends on it is skipped.
    if let Some(broken) = l.broken {
        let json = grade(l.id, &source, broken, &greets);
        assert_eq!(result(&json, "compiles"), false, "{}: {json:#}", l.id);
        assert_eq!(result(&json, "greets"), Value::Null, "{}: {json:#}", l.id);
    }

    // A runtime error ends the program with the runtime's exit code (and a message on stderr).
    let crash = suite(
        l.id,
        compiled,
        &format!(
            "  - id: crashes\n    steps:\n      - run: \"{{run}}\"\n      - exit: {}\n",
            l.crash_code
        ),
    );
    let json = grade(l.id, &source, l.crash, &crash);
    assert_eq!(result(&json, "crashes"), true, "{}: {json:#}", l.id);

    // An endless loop is stopped by the CPU limit, and says so.
    let spin = suite(
        l.id,
        compiled,
        "  - id: ends\n    steps:\n      - run: \"{run}\"\n      - exit: 0\n",
    );
    let json = grade(l.id, &source, l.spin, &spin);
    assert_eq!(result(&json, "ends"), false, "{}: {json:#}", l.id);
    let actual = &json["results"]["ends"]["script"][1]["actual"];
    assert_eq!(actual["type"], "limit", "{}: {json:#}", l.id);
    assert!(
        actual["value"]
            .as_str()
            .unwrap_or("")
            .contains("CPU time limit"),
        "{}: {json:#}",
        l.id
    );
}

#[test]
fn ocaml() {
    run_language(&LANGS[0]);
}

#[test]
fn perl() {
    run_language(&LANGS[1]);
}

#[test]
fn php() {
    run_language(&LANGS[2]);
}

#[test]
fn ruby() {
    run_language(&LANGS[3]);
}

#[test]
fn scheme() {
    run_language(&LANGS[4]);
}

#[test]
fn go() {
    run_language(&LANGS[5]);
}

#[test]
fn every_language_has_a_test_here() {
    let registry = Path::new(env!("CARGO_MANIFEST_DIR")).join("../checks/data/languages.toml");
    let text = std::fs::read_to_string(registry).unwrap();
    for l in &LANGS {
        assert!(text.contains(&format!("[languages.{}]", l.id)), "{}", l.id);
    }
}

/// `corral languages --json` and `corral doctor --json` name each language's seccomp profile, the
/// registry's own (C's is `no_spawn+no_sockets`, Java's `no_spawn`, Python's `no_sockets`, Bash's
/// the default one).
#[test]
fn languages_and_doctor_show_each_languages_seccomp_profile() {
    let doctor = corral_json(&["doctor", "--json"]);
    for (id, want) in [
        ("c", "no_spawn+no_sockets"),
        ("java", "no_spawn"),
        ("python", "no_sockets"),
        ("bash", "default"),
    ] {
        assert_eq!(listed(id)["seccomp"], want, "corral languages: {id}");
        assert_eq!(
            doctor["language_seccomp"][id], want,
            "corral doctor: {id}: {}",
            doctor["language_seccomp"]
        );
    }
}

/// The JVM and V8 size their heaps from the memory they believe the machine has, and inside the
/// sandbox that is the host's (no cgroup file system there): the built-in Java and JavaScript
/// entries tell them the run's memory limit (`{memory_mib}`). Before, a Java program with a live
/// set of 1 MiB that made 3000 MiB of garbage was killed at the language's own 512M (`memory
/// limit exceeded`: the heap grew towards a quarter of the host's memory before collecting),
/// and a program that kept everything was SIGKILLed instead of getting its runtime's own error
/// and stack trace.
#[test]
fn java_and_javascript_size_their_heaps_from_the_runs_memory_limit() {
    const JAVA: &str = r#"import java.util.*;
public class Main {
    public static void main(String[] args) {
        if (args.length > 0 && args[0].equals("keep")) {
            List<byte[]> kept = new ArrayList<>();
            while (true) kept.add(new byte[1 << 20]);
        }
        long made = 0;
        for (int i = 0; i < 3000; i++) {
            byte[] b = new byte[1 << 20];
            b[i % 1000] = 1;
            made += b.length;
        }
        System.out.println("made " + (made >> 20) + " MiB of garbage");
    }
}
"#;
    let (source, compiled) = entry("java");
    let checks = suite(
        "java",
        compiled,
        "  - id: collects\n    limits: {memory: 256M}\n    steps:\n      - run: \"{run} churn\"\n      - stdout: {regex: \"made 3000 MiB of garbage\"}\n      - exit: 0\n---\n  - id: collects_sized_by_hand\n    limits: {memory: 256M}\n    steps:\n      - run: \"java -XX:MaxRAM={memory_mib}m -cp . Main churn\"\n      - stdout: {regex: \"made 3000 MiB of garbage\"}\n      - exit: 0\n---\n  - id: runs_out_of_heap\n    steps:\n      - run: \"{run} keep\"\n      - stderr: {regex: \"java.lang.OutOfMemoryError: Java heap space\"}\n      - exit: 1\n",
    );
    let json = grade("java", &source, JAVA, &checks);
    assert_eq!(result(&json, "compiles"), true, "{json:#}");
    assert_eq!(result(&json, "collects"), true, "{json:#}");
    // A step's own command (as `examples/hello-java` writes `java -XX:MaxRAM={memory_mib}m -cp .
    // Hello`) may say it too.
    assert_eq!(result(&json, "collects_sized_by_hand"), true, "{json:#}");
    assert_eq!(result(&json, "runs_out_of_heap"), true, "{json:#}");

    const JS: &str =
        "const kept = [];\nfor (;;) kept.push(new Array(1 << 17).fill(kept.length));\n";
    let (source, compiled) = entry("javascript");
    let checks = suite(
        "javascript",
        compiled,
        "  - id: runs_out_of_heap\n    steps:\n      - run: \"{run}\"\n      - stderr: {regex: \"JavaScript heap out of memory\"}\n",
    );
    let json = grade("javascript", &source, JS, &checks);
    assert_eq!(result(&json, "runs_out_of_heap"), true, "{json:#}");
}
