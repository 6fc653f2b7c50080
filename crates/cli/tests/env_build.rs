//! `corral env build` through the real binary and real build sandboxes, on the minimal Debian root
//! of the image tests (common::image: mmdebstrap --variant=minbase with python3, cached):
//! apt-get installs numpy from Debian's mirror, a pytest suite that imports numpy passes in the
//! image and fails on the host root, a second build runs no step, and hostile build files (a step
//! that fills its disk, one that loops, one that writes to the host's /etc) meet their limits.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

fn corral(data: &Path, args: &[&str], timeout: Duration) -> common::Raw {
    let mut c = common::corral_cmd();
    c.arg("env").arg("--data").arg(data).args(args);
    common::run_command(c, timeout)
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A data folder with the Debian root imported as `debian:bookworm-minbase`.
fn data_with_debian(tmp: &Path) -> PathBuf {
    let data = tmp.join("data");
    let tar = common::image::debian_tar();
    let out = corral(
        &data,
        &[
            "import",
            tar.to_str().unwrap(),
            "--name",
            "debian:bookworm-minbase",
        ],
        Duration::from_secs(300),
    );
    assert!(out.status.success(), "import: {}", text(&out.stderr));
    data
}

fn build(data: &Path, file: &Path, extra: &[&str]) -> (common::Raw, Option<Value>) {
    let mut args = vec!["build", file.to_str().unwrap(), "--json"];
    args.extend_from_slice(extra);
    let out = corral(data, &args, Duration::from_secs(1200));
    let json = serde_json::from_slice(&out.stdout).ok();
    (out, json)
}

fn run_in(data: &Path, image: Option<&str>, dir: &Path, argv: &[&str]) -> Value {
    let mut c = common::corral_cmd();
    c.arg("run")
        .arg("--json")
        .arg("--fresh")
        .arg("--data")
        .arg(data);
    if let Some(i) = image {
        c.arg("--image").arg(i);
    }
    c.args([
        "--wall-time",
        "60s",
        "--cpu-time",
        "60s",
        "--memory",
        "512M",
    ])
    .arg("--dir")
    .arg(dir)
    .arg("--")
    .args(argv);
    let out = common::run_command(c, Duration::from_secs(120));
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}\n{}", text(&out.stdout), text(&out.stderr)))
}

#[test]
fn a_numpy_image_built_from_debian_grades_a_pytest_suite_the_host_cannot() {
    let _g = common::shared();
    let tmp = common::tempdir();
    let data = data_with_debian(tmp.path());
    let file = tmp.path().join("numpy.yaml");
    std::fs::write(
        &file,
        "from: debian:bookworm-minbase\nname: course/numpy:1\nsteps:\n  - run: apt-get update && apt-get install -y --no-install-recommends python3-numpy python3-pytest\n  - env: {PYTHONDONTWRITEBYTECODE: \"1\"}\n",
    )
    .unwrap();
    let (out, report) = build(&data, &file, &[]);
    assert!(out.status.success(), "build: {}", text(&out.stderr));
    let report = report.unwrap();
    let stderr = text(&out.stderr);
    assert!(stderr.contains("step 1/2: run: apt-get update"), "{stderr}");
    assert!(
        stderr.contains("Setting up python3-numpy"),
        "the step's output streamed: {stderr}"
    );
    assert_eq!(report["ran"], 2, "{report:#}");
    assert_eq!(report["name"], "course/numpy:1");
    let digest = report["digest"].as_str().unwrap().to_string();

    // The second build of the same file runs no step and gives the same image.
    let (again, report2) = build(&data, &file, &[]);
    assert!(again.status.success(), "{}", text(&again.stderr));
    let report2 = report2.unwrap();
    assert_eq!(
        (report2["ran"].as_u64(), report2["cached"].as_u64()),
        (Some(0), Some(2))
    );
    assert!(report2["steps"]
        .as_array()
        .unwrap()
        .iter()
        .all(|s| s["cached"] == true));
    assert_eq!(report2["digest"], digest.as_str());

    // `env ls` / `inspect` show it like any other image.
    let ls = text(&corral(&data, &["ls"], Duration::from_secs(30)).stdout);
    assert!(ls.contains("course/numpy:1"), "{ls}");
    let inspect: Value = serde_json::from_slice(
        &corral(&data, &["inspect", &digest], Duration::from_secs(30)).stdout,
    )
    .unwrap();
    assert_eq!(inspect["layers"].as_array().unwrap().len(), 2);
    assert!(inspect["env"]
        .as_array()
        .unwrap()
        .contains(&Value::from("PYTHONDONTWRITEBYTECODE=1")));

    // A pytest suite whose tests import numpy: passes in the image (pinned by digest), fails on
    // the host root, which has no numpy.
    let suite = common::workdir();
    std::fs::write(
        suite.path().join("test_stats.py"),
        "import numpy as np\n\ndef test_mean():\n    assert np.mean(np.array([1, 2, 3, 6])) == 3.0\n",
    )
    .unwrap();
    common::make_world_readable(&suite.path().join("test_stats.py"), 0o644);
    let pinned = format!("course/numpy:1@{digest}");
    let argv = [
        "python3",
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "test_stats.py",
    ];
    let in_image = run_in(&data, Some(&pinned), suite.path(), &argv);
    assert_eq!(in_image["status"], "ok", "{in_image:#}");
    assert!(
        in_image["stdout"].as_str().unwrap().contains("1 passed"),
        "{in_image:#}"
    );
    let on_host = run_in(
        &data,
        None,
        suite.path(),
        &["python3", "-c", "import numpy"],
    );
    assert_eq!(on_host["status"], "nonzero_exit", "{on_host:#}");
    assert!(
        on_host["stderr"]
            .as_str()
            .unwrap()
            .contains("No module named 'numpy'"),
        "{on_host:#}"
    );
}

#[test]
fn hostile_build_steps_meet_their_limits_and_never_reach_the_host() {
    let _g = common::shared();
    let tmp = common::tempdir();
    let data = data_with_debian(tmp.path());
    let probe = format!("/etc/{}", common::marker("build_probe"));
    let cases: [(&str, String, &str); 4] = [
        (
            "fills its disk",
            "  - run: head -c 200000000 /dev/zero > /opt/big\n    limits: {disk: 16M}\n".into(),
            "disk limit of 16M is full",
        ),
        (
            "loops",
            "  - run: 'while :; do :; done'\n    limits: {cpu_time: 2s, wall_time: 5s}\n".into(),
            "time limit of",
        ),
        (
            "exits nonzero",
            "  - run: echo ok\n  - run: exit 7\n".into(),
            "step 2/2 failed: exit status 7",
        ),
        (
            "copies from outside its folder",
            "  - copy: {src: escape, dst: /x}\n".into(),
            "leaves the build file's folder",
        ),
    ];
    std::os::unix::fs::symlink("/etc/hostname", tmp.path().join("escape")).unwrap();
    for (what, steps, want) in cases {
        let file = tmp.path().join("hostile.yaml");
        std::fs::write(
            &file,
            format!("from: debian:bookworm-minbase\nname: hostile:1\nsteps:\n{steps}"),
        )
        .unwrap();
        let (out, _) = build(&data, &file, &[]);
        let stderr = text(&out.stderr);
        assert!(
            !out.status.success(),
            "{what}: the build succeeded: {stderr}"
        );
        assert!(stderr.contains(want), "{what}: {stderr}");
        let ls = text(&corral(&data, &["ls"], Duration::from_secs(30)).stdout);
        assert!(
            !ls.contains("hostile"),
            "{what}: a failed build named an image: {ls}"
        );
    }

    // Root of its own user namespace writes into the image, not into the host.
    let file = tmp.path().join("probe.yaml");
    std::fs::write(
        &file,
        format!("from: debian:bookworm-minbase\nname: probe:1\nsteps:\n  - run: echo pwned > {probe} && id -u\n"),
    )
    .unwrap();
    let (out, report) = build(&data, &file, &[]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        !Path::new(&probe).exists(),
        "a build step wrote the host's {probe}"
    );
    let layer = report.unwrap()["steps"][0]["layer"]
        .as_str()
        .unwrap()
        .to_string();
    let layer_dir = data.join("images/layers/sha256").join(&layer[7..]);
    assert_eq!(
        std::fs::read_to_string(layer_dir.join(&probe[1..])).unwrap(),
        "pwned\n",
        "the write landed in the step's layer"
    );
}
