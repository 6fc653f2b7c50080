//! Every built-in language under gVisor (`corral check --runtime gvisor`), with the registry's
//! own commands, limits and seccomp profile: the program is compiled once (compiled languages),
//! then greets a name it reads after a prompt (output, standard input, its echo) and, given
//! `boom`, fails the way the language fails at run time, with that runtime's exit code. Every
//! check must say it ran under gVisor. No language may be missing (scripts/setup installs them).

use serde_json::Value;

struct Lang {
    id: &'static str,
    /// Prints "Name: " (flushed), reads a line; "boom" fails at run time, else "hello, NAME".
    program: &'static str,
    /// The exit code of that failure.
    crash_code: i64,
}

const LANGS: [Lang; 13] = [
    Lang {
        id: "bash",
        program: "printf 'Name: '\nread -r n\nif [ \"$n\" = boom ]; then echo boom >&2; exit 3; fi\necho \"hello, $n\"\n",
        crash_code: 3,
    },
    Lang {
        id: "c",
        program: "#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\nint main(void) {\n  char n[64];\n  printf(\"Name: \");\n  fflush(stdout);\n  if (!fgets(n, sizeof n, stdin)) return 1;\n  n[strcspn(n, \"\\n\")] = 0;\n  if (!strcmp(n, \"boom\")) { fprintf(stderr, \"boom\\n\"); exit(3); }\n  printf(\"hello, %s\\n\", n);\n  return 0;\n}\n",
        crash_code: 3,
    },
    Lang {
        id: "cpp",
        program: "#include <iostream>\n#include <stdexcept>\n#include <string>\nint main() {\n  std::string n;\n  std::cout << \"Name: \" << std::flush;\n  std::getline(std::cin, n);\n  if (n == \"boom\") { std::cerr << \"boom\" << std::endl; return 3; }\n  std::cout << \"hello, \" << n << std::endl;\n}\n",
        crash_code: 3,
    },
    Lang {
        id: "go",
        program: "package main\n\nimport (\n\t\"bufio\"\n\t\"fmt\"\n\t\"os\"\n\t\"strings\"\n)\n\nfunc main() {\n\tfmt.Print(\"Name: \")\n\tn, _ := bufio.NewReader(os.Stdin).ReadString('\\n')\n\tn = strings.TrimSpace(n)\n\tif n == \"boom\" {\n\t\tpanic(\"boom\")\n\t}\n\tfmt.Printf(\"hello, %s\\n\", n)\n}\n",
        crash_code: 2,
    },
    Lang {
        id: "java",
        program: "import java.io.*;\n\npublic class Main {\n  public static void main(String[] a) throws IOException {\n    System.out.print(\"Name: \");\n    System.out.flush();\n    String n = new BufferedReader(new InputStreamReader(System.in)).readLine();\n    if (n.equals(\"boom\")) throw new IllegalStateException(\"boom\");\n    System.out.println(\"hello, \" + n);\n  }\n}\n",
        crash_code: 1,
    },
    Lang {
        id: "javascript",
        program: "const rl = require('readline').createInterface({ input: process.stdin });\nprocess.stdout.write('Name: ');\nrl.once('line', (n) => {\n  rl.close();\n  process.stdin.destroy();\n  if (n === 'boom') throw new Error('boom');\n  console.log('hello, ' + n);\n});\n",
        crash_code: 1,
    },
    Lang {
        id: "ocaml",
        program: "let () = print_string \"Name: \"; flush stdout;\n  let n = read_line () in\n  if n = \"boom\" then failwith \"boom\";\n  Printf.printf \"hello, %s\\n\" n\n",
        crash_code: 2,
    },
    Lang {
        id: "perl",
        program: "$| = 1; print \"Name: \"; my $n = <STDIN>; chomp $n;\ndie \"boom\\n\" if $n eq 'boom';\nprint \"hello, $n\\n\";\n",
        crash_code: 255,
    },
    Lang {
        id: "php",
        program: "<?php\necho \"Name: \"; flush(); $n = trim(fgets(STDIN));\nif ($n === 'boom') { throw new Exception('boom'); }\necho \"hello, $n\\n\";\n",
        crash_code: 255,
    },
    Lang {
        id: "python",
        program: "n = input('Name: ')\nif n == 'boom':\n    raise RuntimeError('boom')\nprint(f'hello, {n}')\n",
        crash_code: 1,
    },
    Lang {
        id: "ruby",
        program: "$stdout.sync = true\nprint \"Name: \"\nn = gets.chomp\nraise \"boom\" if n == \"boom\"\nputs \"hello, #{n}\"\n",
        crash_code: 1,
    },
    Lang {
        id: "rust",
        program: "use std::io::{self, BufRead, Write};\nfn main() {\n    print!(\"Name: \");\n    io::stdout().flush().unwrap();\n    let mut n = String::new();\n    io::stdin().lock().read_line(&mut n).unwrap();\n    let n = n.trim();\n    if n == \"boom\" {\n        panic!(\"boom\");\n    }\n    println!(\"hello, {}\", n);\n}\n",
        crash_code: 101,
    },
    Lang {
        id: "scheme",
        program: "(use-modules (ice-9 rdelim))\n(display \"Name: \") (force-output)\n(define n (read-line))\n(if (string=? n \"boom\") (error \"boom\"))\n(display (string-append \"hello, \" n)) (newline)\n",
        crash_code: 1,
    },
];

/// `corral ARGS` (without an operator's registry): its JSON output.
fn corral_json(args: &[&str]) -> Value {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_corral"))
        .args(args)
        .env_remove("CORRAL_LANGUAGES")
        .output()
        .unwrap();
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The built-in language's source file name, and whether it compiles; it must be available.
fn entry(id: &str) -> (String, bool) {
    let all = corral_json(&["languages", "--json"]);
    let e = all
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["id"] == id)
        .unwrap_or_else(|| panic!("no built-in language {id}"));
    assert_eq!(
        e["available"], true,
        "{id} must be available (scripts/setup installs it): {e}"
    );
    (
        e["source"].as_str().unwrap().to_string(),
        e["compile"].is_string(),
    )
}

/// The suite: `compiles` (compiled languages), then `greets` and `crashes` in its output.
fn suite(l: &Lang, compiled: bool) -> String {
    let mut s = format!(
        "name: {id}\nlanguage: {id}\nruntime: gvisor\nlimits: {{wall_time: 60s}}\ntimeout: 90s\nchecks:\n",
        id = l.id
    );
    let depends = if compiled {
        s.push_str(
            "  - id: compiles\n    limits: {cpu_time: 60s, wall_time: 90s}\n    steps:\n      - run: \"{compile}\"\n      - exit: 0\n",
        );
        "    depends: [compiles]\n"
    } else {
        ""
    };
    s.push_str(&format!(
        "  - id: greets\n{depends}    steps:\n      - run: \"{{run}}\"\n      - stdout: {{regex: \"Name: \"}}\n      - stdin: Ada Lovelace\n      - stdout: {{regex: \"^hello, Ada Lovelace\\\\n$\"}}\n      - exit: 0\n"
    ));
    s.push_str(&format!(
        "  - id: crashes\n{depends}    steps:\n      - run: \"{{run}}\"\n      - stdout: {{regex: \"Name: \"}}\n      - stdin: boom\n      - exit: {}\n",
        l.crash_code
    ));
    s
}

fn run_language(l: &Lang) {
    let (source, compiled) = entry(l.id);
    let dir = tempfile::tempdir().unwrap();
    let sub = dir.path().join("submission");
    std::fs::create_dir(&sub).unwrap();
    std::fs::write(sub.join(&source), l.program).unwrap();
    let suite_path = dir.path().join("suite.yaml");
    std::fs::write(&suite_path, suite(l, compiled)).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_corral"))
        .args(["check", "--json", "--staff"])
        .args([&suite_path, &sub].map(|p| p.as_os_str()))
        .env_remove("CORRAL_LANGUAGES")
        .env_remove("CORRAL_RUNTIME")
        .output()
        .unwrap();
    let json: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{}: not JSON ({e}): {}\n{}",
            l.id,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    for (id, row) in json["results"].as_object().unwrap() {
        assert_eq!(row["runtime"], "gvisor", "{} {id}: {json:#}", l.id);
        assert_eq!(row["result"], true, "{} {id}: {json:#}", l.id);
    }
    let checks = if compiled { 3 } else { 2 };
    assert_eq!(
        json["results"].as_object().unwrap().len(),
        checks,
        "{}: {json:#}",
        l.id
    );
    assert_eq!(out.status.code(), Some(0), "{}: {json:#}", l.id);
}

#[test]
fn bash() {
    run_language(&LANGS[0]);
}

#[test]
fn c() {
    run_language(&LANGS[1]);
}

#[test]
fn cpp() {
    run_language(&LANGS[2]);
}

#[test]
fn go() {
    run_language(&LANGS[3]);
}

#[test]
fn java() {
    run_language(&LANGS[4]);
}

#[test]
fn javascript() {
    run_language(&LANGS[5]);
}

#[test]
fn ocaml() {
    run_language(&LANGS[6]);
}

#[test]
fn perl() {
    run_language(&LANGS[7]);
}

#[test]
fn php() {
    run_language(&LANGS[8]);
}

#[test]
fn python() {
    run_language(&LANGS[9]);
}

#[test]
fn ruby() {
    run_language(&LANGS[10]);
}

#[test]
fn rust() {
    run_language(&LANGS[11]);
}

#[test]
fn scheme() {
    run_language(&LANGS[12]);
}

#[test]
fn every_built_in_language_has_a_test_here() {
    let listed = corral_json(&["languages", "--json"]);
    for l in listed.as_array().unwrap() {
        let id = l["id"].as_str().unwrap();
        assert!(LANGS.iter().any(|t| t.id == id), "{id} has no gVisor test");
    }
}
