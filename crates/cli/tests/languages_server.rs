//! Every built-in language through the server, on one server for all: a hello-world that prompts
//! `Name: `, reads a line and greets, run three ways per language —
//! `POST /run` (an upload as `$HOME`, the registry's compile and run commands, the `language`
//! field for its paths and environment, input on stdin), a WebSocket run (the prompt must arrive
//! before any input is sent, then the input is typed), and `POST /submissions` in the queue
//! (`language` + `source_code`, judged by the in-process workers under the language's own seccomp
//! profile, against the expected output). No language may be missing: `scripts/setup` installs
//! every toolchain from Debian's packages (Rust comes from rustup), so a missing one fails here.

mod server_support;

use std::collections::BTreeSet;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use server_support::*;
use tokio_tungstenite::tungstenite::Message;

/// Each language's greeting program: prints `Name: ` (flushed, no newline), reads a line, prints
/// `hello, NAME`.
const GREET: [(&str, &str); 13] = [
    ("bash", "printf 'Name: '\nread -r n\necho \"hello, $n\"\n"),
    (
        "c",
        "#include <stdio.h>\n#include <string.h>\nint main(void) {\n  char n[64];\n  printf(\"Name: \");\n  fflush(stdout);\n  if (!fgets(n, sizeof n, stdin)) return 1;\n  n[strcspn(n, \"\\n\")] = 0;\n  printf(\"hello, %s\\n\", n);\n  return 0;\n}\n",
    ),
    (
        "cpp",
        "#include <iostream>\n#include <string>\nint main() {\n  std::string n;\n  std::cout << \"Name: \" << std::flush;\n  std::getline(std::cin, n);\n  std::cout << \"hello, \" << n << std::endl;\n}\n",
    ),
    (
        "go",
        "package main\n\nimport (\n\t\"bufio\"\n\t\"fmt\"\n\t\"os\"\n\t\"strings\"\n)\n\nfunc main() {\n\tfmt.Print(\"Name: \")\n\tn, _ := bufio.NewReader(os.Stdin).ReadString('\\n')\n\tfmt.Printf(\"hello, %s\\n\", strings.TrimSpace(n))\n}\n",
    ),
    (
        "java",
        "import java.io.*;\n\npublic class Main {\n  public static void main(String[] a) throws IOException {\n    System.out.print(\"Name: \");\n    System.out.flush();\n    String n = new BufferedReader(new InputStreamReader(System.in)).readLine();\n    System.out.println(\"hello, \" + n);\n  }\n}\n",
    ),
    (
        "javascript",
        "const rl = require('readline').createInterface({ input: process.stdin });\nprocess.stdout.write('Name: ');\nrl.once('line', (n) => { console.log('hello, ' + n); rl.close(); process.stdin.destroy(); });\n",
    ),
    (
        "ocaml",
        "let () = print_string \"Name: \"; flush stdout;\n  let n = read_line () in Printf.printf \"hello, %s\\n\" n\n",
    ),
    (
        "perl",
        "$| = 1; print \"Name: \"; my $n = <STDIN>; chomp $n; print \"hello, $n\\n\";\n",
    ),
    (
        "php",
        "<?php\necho \"Name: \"; flush(); $n = trim(fgets(STDIN)); echo \"hello, $n\\n\";\n",
    ),
    ("python", "n = input('Name: ')\nprint(f'hello, {n}')\n"),
    (
        "ruby",
        "$stdout.sync = true\nprint \"Name: \"\nn = gets.chomp\nputs \"hello, #{n}\"\n",
    ),
    (
        "rust",
        "use std::io::{self, BufRead, Write};\nfn main() {\n    print!(\"Name: \");\n    io::stdout().flush().unwrap();\n    let mut n = String::new();\n    io::stdin().lock().read_line(&mut n).unwrap();\n    println!(\"hello, {}\", n.trim());\n}\n",
    ),
    (
        "scheme",
        "(use-modules (ice-9 rdelim))\n(display \"Name: \") (force-output)\n(define n (read-line))\n(display (string-append \"hello, \" n)) (newline)\n",
    ),
];

const EXPECTED: &str = "Name: hello, world\n";

/// Room for the heaviest toolchains (javac, rustc, go build) on a busy machine (the languages'
/// own limits apply where they name any), and for every language's run at once from one token.
const CONFIG: &str = r#"
parallelism = 3
queue = 64
max_sandboxes_per_caller = 32
max_websockets_per_caller = 32
[rate_limit.student]
per_minute = 0
burst = 0
[default_limits]
cpu_time = "30s"
wall_time = "120s"
memory = "1G"
pids = 64
[caps]
cpu_time = "60s"
wall_time = "180s"
memory = "1G"
pids = 128
[submissions]
workers = 3
"#;

struct Lang {
    id: String,
    source: String,
    /// The registry's compile command (if any), then its run command.
    cmd: String,
    program: &'static str,
}

/// The server's languages, each with its program; every built-in one must have a program here
/// and be available on this host.
async fn languages(s: &Server, token: &str) -> Vec<Lang> {
    let (st, list) = s.get(token, "/languages").await;
    assert_eq!(st, 200, "{list}");
    let list = list.as_array().unwrap();
    let ids: BTreeSet<&str> = list.iter().map(|l| l["id"].as_str().unwrap()).collect();
    let tested: BTreeSet<&str> = GREET.iter().map(|(id, _)| *id).collect();
    assert_eq!(
        ids, tested,
        "every built-in language has a greeting program in this test, and no other"
    );
    list.iter()
        .map(|l| {
            let id = l["id"].as_str().unwrap().to_string();
            assert_eq!(
                l["available"], true,
                "{id} must be available (scripts/setup installs its toolchain): {l}"
            );
            let run = l["run"].as_str().unwrap();
            let cmd = match l["compile"].as_str() {
                Some(c) => format!("{c} && {run}"),
                None => run.to_string(),
            };
            // The commands as they run here (the editor runs them as they are): a language's
            // memory placeholders filled with the limit a run of it gets by default, Java's
            // own 512M under this server's 1G default.
            assert!(!cmd.contains("{memory_mib"), "{id}: {cmd}");
            if id == "java" {
                assert_eq!(run, "java -XX:MaxRAM=512m -cp . Main", "{l}");
            }
            Lang {
                program: GREET.iter().find(|(g, _)| *g == id).unwrap().1,
                source: l["source"].as_str().unwrap().to_string(),
                cmd,
                id,
            }
        })
        .collect()
}

async fn via_run(s: &Server, token: &str, l: &Lang) {
    let upload = s.upload(token, &[(&l.source, l.program.as_bytes())]).await;
    let (st, v) = s
        .run(
            token,
            json!({"cmd": l.cmd, "language": l.id, "sandbox": {"homedir": upload}, "stdin": "world\n"}),
        )
        .await;
    assert_eq!(st, 200, "{}: /run: {v}", l.id);
    assert_eq!(v["status"], "ok", "{}: /run: {v}", l.id);
    assert_eq!(v["stdout"], EXPECTED, "{}: /run: {v}", l.id);
}

async fn ws_next(ws: &mut Ws, what: &str) -> Value {
    loop {
        let m = tokio::time::timeout(Duration::from_secs(180), ws.next())
            .await
            .unwrap_or_else(|_| panic!("{what}: no WebSocket message within 180 s"))
            .expect("the socket closed")
            .expect("WebSocket error");
        if let Message::Text(t) = m {
            return serde_json::from_str(&t).unwrap();
        }
    }
}

async fn via_ws(s: &Server, token: &str, l: &Lang) {
    let upload = s.upload(token, &[(&l.source, l.program.as_bytes())]).await;
    let mut ws = s.ws(token).await;
    let run =
        json!({"type": "run", "cmd": l.cmd, "language": l.id, "sandbox": {"homedir": upload}});
    ws.send(Message::Text(run.to_string().into()))
        .await
        .unwrap();
    // The prompt arrives while the program waits for its input: nothing has been typed yet.
    let mut out = String::new();
    while !out.contains("Name: ") {
        let m = ws_next(&mut ws, &l.id).await;
        match m["type"].as_str() {
            Some("stdout") => out.push_str(m["data"].as_str().unwrap()),
            Some("stderr") | Some("stdin") => {}
            _ => panic!(
                "{}: waiting for the prompt, got {m}; stdout so far {out:?}",
                l.id
            ),
        }
    }
    let line = json!({"type": "stdin", "data": "world\n"});
    ws.send(Message::Text(line.to_string().into()))
        .await
        .unwrap();
    let exit = loop {
        let m = ws_next(&mut ws, &l.id).await;
        match m["type"].as_str() {
            Some("stdout") => out.push_str(m["data"].as_str().unwrap()),
            Some("exit") => break m,
            Some("stderr") | Some("stdin") => {}
            _ => panic!("{}: waiting for the exit, got {m}", l.id),
        }
    };
    assert_eq!(exit["status"], "ok", "{}: ws: {exit}", l.id);
    assert_eq!(out, EXPECTED, "{}: ws stdout; exit: {exit}", l.id);
}

async fn via_submission(s: &Server, token: &str, l: &Lang) {
    let (st, v) = s
        .post(
            token,
            "/submissions",
            json!({"language": l.id, "source_code": l.program, "stdin": "world\n", "expected_output": EXPECTED}),
        )
        .await;
    assert_eq!(st, 202, "{}: /submissions: {v}", l.id);
    let done = s.judged(token, v["id"].as_str().unwrap()).await;
    assert_eq!(
        done["verdict"], "accepted",
        "{}: /submissions: {done}",
        l.id
    );
    assert_eq!(done["run"]["stdout"], EXPECTED, "{}: {done}", l.id);
}

#[test]
fn every_builtin_language_runs_hello_world_via_run_websocket_and_submissions() {
    let s = Server::start(CONFIG, &[]);
    rt().block_on(async {
        let t = s.token("student").await;
        let langs = languages(&s, &t).await;
        // All languages at once (the server's own queue paces them); each its three ways in turn.
        let all = langs.iter().map(|l| {
            let (s, t) = (&s, &t);
            async move {
                via_run(s, t, l).await;
                via_ws(s, t, l).await;
                via_submission(s, t, l).await;
                l.id.clone()
            }
        });
        let done = futures_util::future::join_all(all).await;
        assert_eq!(done.len(), GREET.len());
        s.health().await;
    });
}
