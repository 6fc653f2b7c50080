//! `schemas/build.schema.json` accepts the shipped build files (environments/) and rejects what
//! the parser rejects.

use std::path::Path;

use corral_images::build::BuildFile;
use corral_testkit::{schema, schema_errors as errors, workspace_root as root};

#[test]
fn shipped_build_files_validate_and_parse() {
    let v = schema("build.schema.json");
    let mut n = 0;
    for entry in std::fs::read_dir(root().join("environments")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "yaml") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let errs = errors(&v, &text);
        assert!(errs.is_empty(), "{}: {errs:#?}", path.display());
        BuildFile::load(&path).unwrap_or_else(|e| panic!("{e}"));
        n += 1;
    }
    assert!(n >= 2, "found {n} build files");
}

#[test]
fn schema_rejects_what_the_parser_rejects() {
    let v = schema("build.schema.json");
    let ok = "from: debian:x\nname: a/b:1\nlimits: {memory: 1G, wall_time: 10m}\nsteps:\n  - run: [ls, -l]\n    limits: {disk: 1G}\n  - run: apt-get update\n  - copy: {src: files/a.txt, dst: /opt/a.txt}\n  - env: {A: '1', _B: x}\n  - workdir: /opt\n";
    assert!(errors(&v, ok).is_empty(), "{:#?}", errors(&v, ok));
    BuildFile::parse(ok, Path::new("b.yaml"), false).unwrap();
    for bad in [
        "steps: [{run: ls}]\n",
        "from: x\n",
        "from: x\nsteps: []\n",
        "from: x\nbogus: 1\nsteps: [{run: ls}]\n",
        "from: x\nsteps: [{rn: ls}]\n",
        "from: x\nsteps: [{run: ls, copy: {src: a, dst: /b}}]\n",
        "from: x\nsteps: [{run: ''}]\n",
        "from: x\nsteps: [{run: []}]\n",
        "from: x\nsteps: [{copy: {src: ../a, dst: /b}}]\n",
        "from: x\nsteps: [{copy: {src: a/../../b, dst: /b}}]\n",
        "from: x\nsteps: [{copy: {src: /etc/passwd, dst: /b}}]\n",
        "from: x\nsteps: [{copy: {src: a, dst: b}}]\n",
        "from: x\nsteps: [{copy: {src: a, dst: /b/../c}}]\n",
        "from: x\nsteps: [{copy: {src: a}}]\n",
        "from: x\nsteps: [{copy: {src: a, dst: /b, mode: 1}}]\n",
        "from: x\nsteps: [{env: {}}]\n",
        "from: x\nsteps: [{env: {1A: x}}]\n",
        "from: x\nsteps: [{env: {A: x}, limits: {memory: 1G}}]\n",
        "from: x\nsteps: [{workdir: relative}]\n",
        "from: x\nsteps: [{workdir: /}]\n",
        "from: x\nsteps: [{run: ls, limits: {memry: 1G}}]\n",
        "from: x\nlimits: {memory: lots}\nsteps: [{run: ls}]\n",
    ] {
        assert!(!errors(&v, bad).is_empty(), "schema accepted:\n{bad}");
        assert!(
            BuildFile::parse(bad, Path::new("b.yaml"), false).is_err(),
            "parser accepted:\n{bad}"
        );
    }
}
