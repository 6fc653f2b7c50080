//! Judge0's shapes and corral's: a Judge0 request into a submission, a job into a Judge0
//! submission (statuses, times, `fields`, base64), Judge0's language and status ids, and tokens
//! (the submissions' ids written as UUIDs).

use std::collections::BTreeMap;

use base64::Engine;
use corral_judge::{JobSpec, Verdict, VerdictKind};
use corral_sandbox::{LimitsRequest, Millis, Size};
use corral_store::{Job, JobState};
use serde::Deserialize;
use serde_json::{json, Map, Value};

use crate::service::submissions::accept::SubmissionRequest;

/// Judge0 CE 1.13.1 language ids of the registry's languages (Judge0 has no Scheme).
pub const LANGUAGE_IDS: &[(u32, &str)] = &[
    (46, "bash"),
    (50, "c"),
    (52, "cpp"),
    (54, "cpp"),
    (60, "go"),
    (62, "java"),
    (63, "javascript"),
    (65, "ocaml"),
    (68, "php"),
    (71, "python"),
    (72, "ruby"),
    (73, "rust"),
    (85, "perl"),
];

pub const STATUSES: &[(u32, &str)] = &[
    (1, "In Queue"),
    (2, "Processing"),
    (3, "Accepted"),
    (4, "Wrong Answer"),
    (5, "Time Limit Exceeded"),
    (6, "Compilation Error"),
    (7, "Runtime Error (SIGSEGV)"),
    (8, "Runtime Error (SIGXFSZ)"),
    (9, "Runtime Error (SIGFPE)"),
    (10, "Runtime Error (SIGABRT)"),
    (11, "Runtime Error (NZEC)"),
    (12, "Runtime Error (Other)"),
    (13, "Internal Error"),
    (14, "Exec Format Error"),
];

/// Every field a submission has in Judge0's shape (`fields=` names some of them, `*` all):
/// [`render`]'s, and `language` (`{id, name}`, added by the handler, which has the registry).
pub const FIELDS: &[&str] = &[
    "token",
    "source_code",
    "language_id",
    "language",
    "stdin",
    "expected_output",
    "stdout",
    "stderr",
    "compile_output",
    "message",
    "exit_code",
    "exit_signal",
    "status",
    "status_id",
    "created_at",
    "finished_at",
    "time",
    "wall_time",
    "memory",
    "cpu_time_limit",
    "cpu_extra_time",
    "wall_time_limit",
    "memory_limit",
    "stack_limit",
    "max_processes_and_or_threads",
    "enable_per_process_and_thread_time_limit",
    "enable_per_process_and_thread_memory_limit",
    "max_file_size",
    "compiler_options",
    "command_line_arguments",
    "number_of_runs",
    "redirect_stderr_to_stdout",
    "enable_network",
    "callback_url",
    "additional_files",
];

/// The names in a `fields=` that are not Judge0's (Judge0 answers 400 `invalid fields: [...]`).
pub fn unknown_fields(fields: &Option<String>) -> Vec<String> {
    match fields.as_deref().map(str::trim) {
        None | Some("") | Some("*") => Vec::new(),
        Some(f) => f
            .split(',')
            .map(str::trim)
            .filter(|x| !x.is_empty() && !FIELDS.contains(x))
            .map(str::to_string)
            .collect(),
    }
}

/// Whether `fields=` asks for `name` (`*` asks for all).
pub fn wants(fields: &Option<String>, name: &str) -> bool {
    match fields.as_deref().map(str::trim) {
        Some("*") => true,
        Some(f) if !f.is_empty() => f.split(',').any(|x| x.trim() == name),
        _ => DEFAULT_FIELDS.contains(&name),
    }
}

const DEFAULT_FIELDS: &[&str] = &[
    "stdout",
    "time",
    "memory",
    "stderr",
    "token",
    "compile_output",
    "message",
    "status",
];

fn status(id: u32) -> Value {
    let d = STATUSES
        .iter()
        .find(|(i, _)| *i == id)
        .map_or("Internal Error", |(_, d)| d);
    json!({"id": id, "description": d})
}

fn language_id_of(registry_id: &str) -> Option<u32> {
    LANGUAGE_IDS
        .iter()
        .find(|(_, r)| *r == registry_id)
        .map(|(i, _)| *i)
}

/// The Judge0 language id a job reads back with: the one its request named, else its
/// language's (first) id.
pub fn spec_language_id(spec: &JobSpec) -> Option<u32> {
    spec.judge0_language_id
        .or_else(|| spec.language.as_deref().and_then(language_id_of))
}

pub fn token_of(id: &str) -> String {
    if id.len() != 32 {
        return id.to_string();
    }
    format!(
        "{}-{}-{}-{}-{}",
        &id[0..8],
        &id[8..12],
        &id[12..16],
        &id[16..20],
        &id[20..32]
    )
}

pub fn id_of(token: &str) -> String {
    token.trim().replace('-', "").to_ascii_lowercase()
}

/// `language_id` as a number (`71`, `71.0`) or as its digits in a string (`"71"`), as Judge0
/// (Rails) takes it; anything else in Judge0's words, not serde's.
fn number_or_text<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
    let bad =
        |v: &Value| serde::de::Error::custom(format!("language_id {v} is not a language's number"));
    match Option::<Value>::deserialize(d)? {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(t)) => t
            .trim()
            .parse()
            .map(Some)
            .map_err(|_| bad(&Value::String(t))),
        Some(v @ Value::Number(_)) => {
            let n = v.as_f64().unwrap_or(f64::NAN);
            if n.fract() == 0.0 && (0.0..=f64::from(u32::MAX)).contains(&n) {
                Ok(Some(n as u32))
            } else {
                Err(bad(&v))
            }
        }
        Some(v) => Err(bad(&v)),
    }
}

/// A number or a boolean also as its text (`"2"`, `"2.5"`, `"true"`): Judge0 (Rails) casts
/// form-style strings, and clients send them. Errors say what was expected, not serde's words.
fn value_or_text<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::de::DeserializeOwned + std::str::FromStr,
{
    let what = std::any::type_name::<T>();
    match Option::<Value>::deserialize(d)? {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(t)) => t
            .trim()
            .parse()
            .map(Some)
            .map_err(|_| serde::de::Error::custom(format!("{t:?} is not a {what}"))),
        Some(v) => serde_json::from_value::<T>(v.clone())
            .map(Some)
            .map_err(|_| serde::de::Error::custom(format!("{v} is not a {what}"))),
    }
}

/// A Judge0 submission request (unknown fields are ignored, as Judge0 does).
#[derive(Debug, Clone, Deserialize, Default)]
pub struct J0Request {
    pub source_code: Option<String>,
    #[serde(default, deserialize_with = "number_or_text")]
    pub language_id: Option<u32>,
    pub compiler_options: Option<String>,
    pub command_line_arguments: Option<String>,
    pub stdin: Option<String>,
    pub expected_output: Option<String>,
    #[serde(default, deserialize_with = "value_or_text")]
    pub cpu_time_limit: Option<f64>,
    #[serde(default, deserialize_with = "value_or_text")]
    pub cpu_extra_time: Option<f64>,
    #[serde(default, deserialize_with = "value_or_text")]
    pub wall_time_limit: Option<f64>,
    /// Kilobytes.
    #[serde(default, deserialize_with = "value_or_text")]
    pub memory_limit: Option<f64>,
    #[serde(default, deserialize_with = "value_or_text")]
    pub stack_limit: Option<u64>,
    #[serde(default, deserialize_with = "value_or_text")]
    pub max_processes_and_or_threads: Option<u64>,
    /// Kilobytes.
    #[serde(default, deserialize_with = "value_or_text")]
    pub max_file_size: Option<u64>,
    #[serde(default, deserialize_with = "value_or_text")]
    pub enable_network: Option<bool>,
    pub additional_files: Option<String>,
    pub callback_url: Option<String>,
    #[serde(default, deserialize_with = "value_or_text")]
    pub redirect_stderr_to_stdout: Option<bool>,
    #[serde(default, deserialize_with = "value_or_text")]
    pub number_of_runs: Option<u32>,
}

/// A field Judge0's validations would refuse, answered as Judge0 answers them: 422 with its
/// model's errors, `{"FIELD": ["MESSAGE"]}` (`base` when no one field is to blame, as in Rails).
#[derive(Debug, Clone, PartialEq)]
pub struct Invalid {
    pub field: String,
    pub message: String,
}

impl Invalid {
    pub fn new(field: &str, message: impl Into<String>) -> Self {
        Invalid {
            field: field.to_owned(),
            message: message.into(),
        }
    }

    /// Judge0's body for it.
    pub fn body(&self) -> Value {
        json!({ self.field.as_str(): [self.message] })
    }

    /// A message of corral's own checks (the submission path's, worded for corral's API), under
    /// the Judge0 field it is about, without that field's name in front of it.
    pub fn from_message(message: &str) -> Self {
        let field = field_of(message);
        let rest = message
            .strip_prefix(field)
            .map(|r| r.trim_start_matches(':').trim_start())
            .filter(|r| !r.is_empty())
            .unwrap_or(message);
        Invalid::new(field, rest)
    }
}

/// Which Judge0 field a message of corral's own checks is about.
fn field_of(message: &str) -> &'static str {
    const NAMED: &[&str] = &[
        "callback_url",
        "source_code",
        "expected_output",
        "stdin",
        "additional_files",
        "command_line_arguments",
        "compiler_options",
    ];
    if let Some(f) = NAMED.iter().find(|f| message.starts_with(*f)) {
        return f;
    }
    // `invalid limit memory: …` and the like: corral's limit names, Judge0's fields.
    const LIMITS: &[(&str, &str)] = &[
        ("cpu_time", "cpu_time_limit"),
        ("wall_time", "wall_time_limit"),
        ("memory", "memory_limit"),
        ("pids", "max_processes_and_or_threads"),
        ("file_size", "max_file_size"),
    ];
    if message.contains("limit") {
        if let Some((_, f)) = LIMITS.iter().find(|(l, _)| message.contains(l)) {
            return f;
        }
    }
    if message.starts_with("language") {
        return "language_id";
    }
    "base"
}

/// A Judge0 request read from its JSON; a value of the wrong type is an error of its field.
pub fn parse_request(body: Value) -> Result<J0Request, Invalid> {
    serde_path_to_error::deserialize(crate::http::objects_only::ObjectsOnly(body)).map_err(|e| {
        let field = match e.path().iter().next() {
            Some(serde_path_to_error::Segment::Map { key }) => key.clone(),
            _ => "base".to_owned(),
        };
        Invalid {
            field,
            message: e.into_inner().to_string(),
        }
    })
}

fn decode(field: &str, v: Option<String>, b64: bool) -> Result<Option<String>, Invalid> {
    match v {
        Some(s) if b64 => {
            let clean: String = s.chars().filter(|c| !c.is_whitespace()).collect();
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(clean.as_bytes())
                .map_err(|e| Invalid::new(field, format!("is not valid base64: {e}")))?;
            String::from_utf8(bytes)
                .map(Some)
                .map_err(|_| Invalid::new(field, "is not UTF-8 text"))
        }
        other => Ok(other),
    }
}

/// The largest time limit taken, a day (the document's `maximum`); the server's caps apply after.
const MAX_SECONDS: f64 = 86_400.0;

fn seconds(field: &str, v: Option<f64>) -> Result<Option<Millis>, Invalid> {
    match v {
        None => Ok(None),
        Some(s) if s.is_finite() && s > 0.0 && s <= MAX_SECONDS => {
            Ok(Some(Millis::ms((s * 1000.0).round().max(1.0) as u64)))
        }
        // A positive value too large was told "must be a positive number": say the bound.
        Some(s) if s > MAX_SECONDS => Err(Invalid::new(
            field,
            format!("must be less than or equal to {MAX_SECONDS} (seconds)"),
        )),
        Some(_) => Err(Invalid::new(field, "must be a positive number of seconds")),
    }
}

/// A Judge0 request in corral's terms, before the server's own checks.
pub struct Converted {
    pub req: SubmissionRequest,
    /// `language_id` where it is not the first id of its language (54: C++, like 52), to be
    /// read back as given.
    pub judge0_language_id: Option<u32>,
    /// `command_line_arguments` and `compiler_options`.
    pub run_args: Option<String>,
    pub compile_args: Option<String>,
    /// `additional_files`: the zip's bytes (always base64 in Judge0's API), unpacked by the caller
    /// within the upload limits.
    pub additional_files: Option<Vec<u8>>,
    /// `number_of_runs` (1 when not given).
    pub runs: u32,
    pub stderr_to_stdout: bool,
    /// `enable_network: true` (allowed or refused by the caller's configuration).
    pub network: bool,
}

/// Judge0's request → corral's, or the field that is wrong (in Judge0's words where it has them).
pub fn convert(r: J0Request, b64: bool) -> Result<Converted, Invalid> {
    let lang_id = r
        .language_id
        .ok_or_else(|| Invalid::new("language_id", "can't be blank"))?;
    let lang = LANGUAGE_IDS
        .iter()
        .find(|(i, _)| *i == lang_id)
        .map(|(_, l)| l.to_string())
        .ok_or_else(|| {
            Invalid::new(
                "language_id",
                format!("language with id {lang_id} doesn't exist"),
            )
        })?;
    let judge0_language_id = (language_id_of(&lang) != Some(lang_id)).then_some(lang_id);
    let additional_files = match r.additional_files.as_deref().map(str::trim) {
        Some(s) if !s.is_empty() => {
            let clean: String = s.chars().filter(|c| !c.is_whitespace()).collect();
            Some(
                base64::engine::general_purpose::STANDARD
                    .decode(clean.as_bytes())
                    .map_err(|e| {
                        Invalid::new("additional_files", format!("is not valid base64: {e}"))
                    })?,
            )
        }
        _ => None,
    };
    let runs = match r.number_of_runs {
        None => 1,
        Some(0) => return Err(Invalid::new("number_of_runs", "must be at least 1")),
        Some(n) => n,
    };
    // Blank as Rails' `presence` sees it: absent, empty or only whitespace.
    let source = decode("source_code", r.source_code, b64)?
        .filter(|s| !s.trim().is_empty())
        .ok_or_else(|| Invalid::new("source_code", "can't be blank"))?;
    let mut limits = LimitsRequest::default();
    let cpu = seconds("cpu_time_limit", r.cpu_time_limit)?;
    let extra = seconds("cpu_extra_time", r.cpu_extra_time)?;
    limits.cpu_time = match (cpu, extra) {
        (Some(c), Some(e)) => Some(Millis::ms((c.0 + e.0).as_millis() as u64)),
        (c, _) => c,
    };
    limits.wall_time = seconds("wall_time_limit", r.wall_time_limit)?;
    if let Some(kb) = r.memory_limit {
        if !(kb.is_finite() && kb >= 4096.0) {
            return Err(Invalid::new("memory_limit", "must be at least 4096 (KB)"));
        }
        limits.memory = Some(Size((kb * 1024.0) as u64));
    }
    limits.pids = r.max_processes_and_or_threads;
    limits.file_size = r.max_file_size.map(|kb| Size(kb.saturating_mul(1024)));
    let _ = r.stack_limit;
    let req = SubmissionRequest {
        files: None,
        source_code: Some(source),
        upload: None,
        language: Some(lang),
        cmd: None,
        suite: None,
        stdin: decode("stdin", r.stdin, b64)?,
        expected_output: decode("expected_output", r.expected_output, b64)?,
        limits: Some(limits),
        env: BTreeMap::new(),
        callback_url: r.callback_url.filter(|u| !u.is_empty()),
        // Judge0 names no image: a language's own image (the registry's) is used.
        image: None,
        // Nor a seccomp profile: the language's own applies.
        seccomp: None,
        // Nor a runtime: the server's (gVisor's on a public instance).
        runtime: None,
    };
    Ok(Converted {
        req,
        judge0_language_id,
        run_args: r.command_line_arguments,
        compile_args: r.compiler_options,
        additional_files,
        runs,
        stderr_to_stdout: r.redirect_stderr_to_stdout == Some(true),
        network: r.enable_network == Some(true),
    })
}

fn iso8601(ms: i64) -> String {
    // Howard Hinnant's civil_from_days.
    let secs = ms.div_euclid(1000);
    let milli = ms.rem_euclid(1000);
    let days = secs.div_euclid(86_400);
    let sod = secs.rem_euclid(86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = if m <= 2 { y + 1 } else { y };
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{milli:03}Z",
        sod / 3600,
        (sod / 60) % 60,
        sod % 60
    )
}

/// The Judge0 status of a submission.
fn status_id(job: &Job, v: Option<&Verdict>) -> u32 {
    match (job.state, v) {
        (JobState::Queued, _) => 1,
        (JobState::Running, _) => 2,
        (_, None) => 13,
        (_, Some(v)) => match v.verdict {
            VerdictKind::Accepted => 3,
            VerdictKind::WrongAnswer => 4,
            VerdictKind::TimeLimit => 5,
            // Judge0 has no "not gradable": a grader's refusal is mostly a program that does
            // not compile or load.
            VerdictKind::CompileError | VerdictKind::NotGradable => 6,
            VerdictKind::RuntimeError => {
                let run = v.run.as_ref();
                let signal = run.and_then(|r| r["signal"].as_i64());
                let exit = run.and_then(|r| r["exit_code"].as_i64());
                match (signal, exit) {
                    (Some(11), _) => 7,
                    (Some(25), _) => 8,
                    (Some(8), _) => 9,
                    (Some(6), _) => 10,
                    (None, Some(c)) if c != 0 => 11,
                    _ => 12,
                }
            }
            VerdictKind::MemoryLimit | VerdictKind::OutputLimit => 12,
            VerdictKind::InternalError => 13,
        },
    }
}

/// A submission in Judge0's shape, with the requested fields (`*`: all).
pub fn render(job: &Job, fields: &Option<String>, b64: bool) -> Value {
    let spec: Option<JobSpec> = serde_json::from_str(&job.spec).ok();
    let verdict: Option<Verdict> = job
        .result
        .as_deref()
        .and_then(|r| serde_json::from_str(r).ok());
    let run = verdict.as_ref().and_then(|v| v.run.clone());
    let bytes = |b: Option<&[u8]>| -> Value {
        match b {
            None => Value::Null,
            Some(t) if b64 => Value::String(base64::engine::general_purpose::STANDARD.encode(t)),
            // Not valid UTF-8 (only a program's own output can be): replacement characters;
            // `base64_encoded=true` gives the bytes as they were.
            Some(t) => Value::String(String::from_utf8_lossy(t).into_owned()),
        }
    };
    let text = |s: Option<&str>| bytes(s.map(str::as_bytes));
    let nonempty = |s: Option<&str>| s.filter(|t| !t.is_empty()).map(str::to_string);
    // A stream that is not UTF-8 is kept whole beside its text (`STREAM_base64`): its bytes.
    let stream = |name: &str| -> Option<Vec<u8>> {
        let r = run.as_ref()?;
        let raw = r[format!("{name}_base64")]
            .as_str()
            .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
            .or_else(|| r[name].as_str().map(|t| t.as_bytes().to_vec()))?;
        (!raw.is_empty()).then_some(raw)
    };
    let stdout = stream("stdout");
    let stderr = stream("stderr");
    let compile_output = verdict
        .as_ref()
        .and_then(|v| v.compile.as_ref())
        .and_then(|c| nonempty(c["script"].as_str()));
    let message = match (&verdict, job.state) {
        (Some(v), _) => v.message.clone(),
        (None, JobState::Failed) => job.error.clone(),
        _ => None,
    };
    let sid = status_id(job, verdict.as_ref());
    let secs = |ms: Option<i64>| ms.map(|m| format!("{:.3}", m as f64 / 1000.0));
    let lang_id = spec.as_ref().and_then(spec_language_id);
    let mut all = Map::new();
    all.insert("token".into(), json!(token_of(&job.id)));
    all.insert("source_code".into(), Value::Null);
    all.insert("language_id".into(), json!(lang_id));
    all.insert(
        "stdin".into(),
        // None given reads as null, as Judge0 answers it.
        text(
            spec.as_ref()
                .map(|s| s.stdin.as_str())
                .filter(|s| !s.is_empty()),
        ),
    );
    all.insert(
        "expected_output".into(),
        text(spec.as_ref().and_then(|s| s.expected_output.as_deref())),
    );
    all.insert("stdout".into(), bytes(stdout.as_deref()));
    all.insert("stderr".into(), bytes(stderr.as_deref()));
    all.insert("compile_output".into(), text(compile_output.as_deref()));
    all.insert("message".into(), text(message.as_deref()));
    all.insert(
        "exit_code".into(),
        json!(run.as_ref().and_then(|r| r["exit_code"].as_i64())),
    );
    all.insert(
        "exit_signal".into(),
        json!(run.as_ref().and_then(|r| r["signal"].as_i64())),
    );
    all.insert("status".into(), status(sid));
    all.insert("status_id".into(), json!(sid));
    all.insert("created_at".into(), json!(iso8601(job.created_ms)));
    all.insert("finished_at".into(), json!(job.finished_ms.map(iso8601)));
    // With number_of_runs, Judge0 reports the runs' mean CPU time and memory.
    let mean_or = |mean: &str, one: &str| {
        run.as_ref()
            .and_then(|r| r[mean].as_f64().or_else(|| r[one].as_f64()))
    };
    all.insert(
        "time".into(),
        json!(mean_or("cpu_time_ms_mean", "cpu_time_ms").map(|ms| format!("{:.3}", ms / 1000.0))),
    );
    all.insert(
        "wall_time".into(),
        json!(secs(run.as_ref().and_then(|r| r["wall_time_ms"].as_i64()))),
    );
    all.insert(
        "memory".into(),
        json!(mean_or("memory_peak_bytes_mean", "memory_peak_bytes").map(|b| (b / 1024.0) as i64)),
    );
    if let Some(s) = &spec {
        all.insert(
            "cpu_time_limit".into(),
            json!(s.limits.cpu_time.0.as_secs_f64()),
        );
        all.insert(
            "wall_time_limit".into(),
            json!(s.limits.wall_time.0.as_secs_f64()),
        );
        all.insert("memory_limit".into(), json!(s.limits.memory.0 / 1024));
        all.insert("max_processes_and_or_threads".into(), json!(s.limits.pids));
        all.insert("max_file_size".into(), json!(s.limits.file_size.0 / 1024));
        all.insert("command_line_arguments".into(), json!(s.run_args));
        all.insert("compiler_options".into(), json!(s.compile_args));
    }
    all.insert(
        "number_of_runs".into(),
        json!(spec.as_ref().map_or(1, |s| s.runs)),
    );
    all.insert(
        "redirect_stderr_to_stdout".into(),
        json!(spec.as_ref().is_some_and(|s| s.stderr_to_stdout)),
    );
    all.insert(
        "enable_network".into(),
        json!(spec.as_ref().is_some_and(|s| s.network)),
    );
    all.insert("callback_url".into(), json!(job.callback_url));
    let wanted: Vec<String> = match fields.as_deref().map(str::trim) {
        Some("*") => return Value::Object(all),
        Some(f) if !f.is_empty() => f.split(',').map(|x| x.trim().to_string()).collect(),
        _ => DEFAULT_FIELDS.iter().map(|s| s.to_string()).collect(),
    };
    let mut out = Map::new();
    for f in wanted {
        if let Some(v) = all.get(&f) {
            out.insert(f, v.clone());
        }
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A finished job whose run recorded `run`.
    fn job_with_run(run: Value) -> Job {
        Job {
            id: "j1".into(),
            owner: "o".into(),
            state: JobState::Done,
            spec: String::new(),
            upload_id: None,
            result: Some(
                serde_json::to_string(&Verdict {
                    verdict: VerdictKind::Accepted,
                    score: 1.0,
                    max_score: 1.0,
                    run: Some(run),
                    compile: None,
                    checks: None,
                    staff_checks: None,
                    message: None,
                    image: None,
                })
                .unwrap(),
            ),
            error: None,
            attempts: 1,
            max_attempts: 3,
            created_ms: 0,
            started_ms: Some(0),
            finished_ms: Some(0),
            worker: None,
            callback_url: None,
            callback_state: "none".into(),
            callback_attempts: 0,
            callback_error: None,
            image_name: None,
            image_digest: None,
            regrade_of: None,
            submitted_ms: None,
        }
    }

    /// A program's output that is not UTF-8 comes back byte for byte with `base64_encoded=true`
    /// (the run keeps its bytes beside the text), and as text with replacement characters
    /// without it.
    #[test]
    fn binary_output_keeps_its_bytes_in_base64() {
        let job = job_with_run;
        let run = json!({"status": "ok", "exit_code": 0, "stdout": "\u{fffd}\u{fffd}A",
                         "stdout_base64": "//5B", "stderr": "plain"});
        let v = render(&job(run), &Some("stdout,stderr".into()), true);
        assert_eq!(v["stdout"], "//5B", "{v}");
        assert_eq!(v["stderr"], "cGxhaW4=", "{v}");
        let run = json!({"status": "ok", "exit_code": 0, "stdout": "\u{fffd}\u{fffd}A",
                         "stdout_base64": "//5B"});
        let v = render(&job(run), &Some("stdout".into()), false);
        assert_eq!(v["stdout"], "\u{fffd}\u{fffd}A", "{v}");
    }

    #[test]
    fn fields_lists_every_field_render_has() {
        let v = render(
            &job_with_run(json!({"status": "ok"})),
            &Some("*".into()),
            false,
        );
        let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        for k in &keys {
            assert!(FIELDS.contains(k), "{k} is rendered but not in FIELDS");
        }
        // The other way round not all: Judge0's names corral has no value for (stack_limit,
        // cpu_extra_time, …) are valid to ask for and absent, and the limits need a spec.
        assert!(keys.len() >= 20, "{keys:?}");
        assert_eq!(
            unknown_fields(&Some("stdout, bogus,status".into())),
            ["bogus"]
        );
        assert!(unknown_fields(&Some("*".into())).is_empty());
        assert!(wants(&Some("language,stdout".into()), "language"));
        assert!(!wants(&None, "language"));
    }

    /// A judged submission with every field (`fields=*`), and with the default fields, is what
    /// the OpenAPI document's `Judge0Submission` says (`crates/server/tests/openapi.rs` reads
    /// real answers of submissions no program ran for): each key declared, each value of its
    /// type, in both encodings.
    #[test]
    fn a_judged_submission_is_as_documented() {
        use crate::judge0::doc::{Judge0LanguageId, Judge0Submission};
        #[derive(utoipa::OpenApi)]
        #[openapi(components(schemas(Judge0Submission, Judge0LanguageId)))]
        struct Doc;
        let components = serde_json::to_value(<Doc as utoipa::OpenApi>::openapi()).unwrap()
            ["components"]
            .clone();
        let schema =
            json!({"$ref": "#/components/schemas/Judge0Submission", "components": components});
        let validator = jsonschema::validator_for(&schema).unwrap();
        let declared = &components["schemas"]["Judge0Submission"]["properties"];
        let spec: JobSpec = serde_json::from_value(json!({
            "language": "c", "stdin": "2 40", "expected_output": "42", "run_args": "-v",
            "runs": 3, "judge0_language_id": 50,
            "limits": corral_sandbox::Limits::default(),
        }))
        .unwrap();
        let mut job = job_with_run(json!({"status": "nonzero_exit", "exit_code": 3,
            "signal": null, "stdout": "4", "stderr": "\u{fffd}", "stderr_base64": "/w==",
            "cpu_time_ms": 12, "cpu_time_ms_mean": 10.5, "wall_time_ms": 30,
            "memory_peak_bytes": 2_000_000, "memory_peak_bytes_mean": 1_500_000.0}));
        job.spec = serde_json::to_string(&spec).unwrap();
        job.callback_url = Some("https://lms.example.org/hook".into());
        let mut verdict: Verdict = serde_json::from_str(job.result.as_deref().unwrap()).unwrap();
        verdict.verdict = VerdictKind::RuntimeError;
        verdict.compile = Some(json!({"status": "ok", "script": "warning: unused"}));
        verdict.message = Some("exited with 3".into());
        job.result = Some(serde_json::to_string(&verdict).unwrap());
        for fields in [Some("*".to_string()), None] {
            for b64 in [false, true] {
                let v = render(&job, &fields, b64);
                for k in v.as_object().unwrap().keys() {
                    assert!(declared[k].is_object(), "{k} is not declared");
                }
                let errors: Vec<String> =
                    validator.iter_errors(&v).map(|e| e.to_string()).collect();
                assert!(errors.is_empty(), "{errors:?}: {v}");
            }
        }
        let all = render(&job, &Some("*".into()), false);
        assert_eq!(all["status"]["id"], 11, "{all}");
        assert!(all["time"].is_string() && all["memory"].is_i64(), "{all}");
        // Queued, nothing judged yet.
        job.state = JobState::Queued;
        job.result = None;
        job.finished_ms = None;
        let v = render(&job, &Some("*".into()), true);
        assert!(validator.is_valid(&v), "{v}");
    }

    #[test]
    fn a_language_id_may_come_as_text() {
        let r: J0Request = serde_json::from_str(r#"{"language_id": "71"}"#).unwrap();
        assert_eq!(r.language_id, Some(71));
        let r: J0Request = serde_json::from_str(r#"{"language_id": 50}"#).unwrap();
        assert_eq!(r.language_id, Some(50));
        let e = serde_json::from_str::<J0Request>(r#"{"language_id": "python"}"#).unwrap_err();
        assert!(e.to_string().contains("is not a language's number"), "{e}");
        // A whole float is the number (Rails casts it); a fraction or an array is refused in
        // words, not serde's ("data did not match any variant of untagged enum").
        let r: J0Request = serde_json::from_str(r#"{"language_id": 71.0}"#).unwrap();
        assert_eq!(r.language_id, Some(71));
        for bad in [r#"{"language_id": 71.5}"#, r#"{"language_id": [71]}"#] {
            let e = serde_json::from_str::<J0Request>(bad)
                .unwrap_err()
                .to_string();
            assert!(
                e.contains("is not a language's number") && !e.contains("untagged"),
                "{e}"
            );
        }
        let e = serde_json::from_str::<J0Request>(r#"{"language_id": 71, "cpu_time_limit": [1]}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("is not a") && !e.contains("untagged"), "{e}");
    }

    /// With `number_of_runs`, Judge0's `time` and `memory` are the runs' means (the judge
    /// records them beside the last run's own figures); a single run reports its own.
    #[test]
    fn repeated_runs_report_the_means() {
        let job = job_with_run;
        let last = json!({"status": "ok", "exit_code": 0, "cpu_time_ms": 300,
                          "memory_peak_bytes": 30 << 20, "wall_time_ms": 400});
        let mut repeated = last.clone();
        repeated["runs"] = json!(3);
        repeated["cpu_time_ms_mean"] = json!(200.0);
        repeated["memory_peak_bytes_mean"] = json!((20u64 << 20) as f64);
        let v = render(&job(repeated), &None, false);
        assert_eq!(
            (&v["time"], &v["memory"]),
            (&json!("0.200"), &json!(20480)),
            "{v}"
        );
        let v = render(&job(last), &None, false);
        assert_eq!(
            (&v["time"], &v["memory"]),
            (&json!("0.300"), &json!(30720)),
            "{v}"
        );
    }

    #[test]
    fn tokens_are_uuids_and_back() {
        let id = corral_store::new_job_id();
        let t = token_of(&id);
        assert_eq!(t.len(), 36);
        assert_eq!(&t[14..15], "4", "version 4");
        assert!(
            matches!(&t[19..20], "8" | "9" | "a" | "b"),
            "RFC 4122 variant"
        );
        assert_eq!(id_of(&t), id);
        assert_eq!(id_of(&t.to_uppercase()), id);
    }

    #[test]
    fn times_are_iso8601() {
        assert_eq!(iso8601(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso8601(951_782_400_123), "2000-02-29T00:00:00.123Z");
        assert_eq!(iso8601(1_764_115_200_000), "2025-11-26T00:00:00.000Z");
    }

    #[test]
    fn requests_convert() {
        let r: J0Request = serde_json::from_value(json!({
            "source_code": "cHJpbnQoMSk=", "language_id": 71, "stdin": "eA==",
            "cpu_time_limit": 1.5, "memory_limit": 65536, "command_line_arguments": "a b",
            "unknown_field": 1
        }))
        .unwrap();
        let Converted {
            req,
            run_args: args,
            compile_args: opts,
            ..
        } = convert(r, true).unwrap();
        assert_eq!(req.source_code.as_deref(), Some("print(1)"));
        assert_eq!(req.language.as_deref(), Some("python"));
        assert_eq!(req.stdin.as_deref(), Some("x"));
        let l = req.limits.unwrap();
        assert_eq!(l.cpu_time, Some(Millis::ms(1500)));
        assert_eq!(l.memory, Some(Size(64 << 20)));
        assert_eq!(args.as_deref(), Some("a b"));
        assert!(opts.is_none());
        // Both of Judge0's C++ ids are corral's one C++; each reads back as given.
        for (id, kept) in [(52, None), (54, Some(54)), (71, None)] {
            let r = parse_request(json!({"source_code": "x", "language_id": id})).unwrap();
            let c = convert(r, false).unwrap();
            assert_eq!(c.judge0_language_id, kept, "{id}");
            let spec = JobSpec {
                language: c.req.language.clone(),
                judge0_language_id: c.judge0_language_id,
                ..serde_json::from_value(json!({"limits": corral_sandbox::Limits::default()}))
                    .unwrap()
            };
            assert_eq!(spec_language_id(&spec), Some(id));
        }
        // Each refusal names its field, in Judge0's body: `{"FIELD": ["MESSAGE"]}`.
        for (bad, field) in [
            (
                json!({"source_code": "x", "language_id": 9999}),
                "language_id",
            ),
            (json!({"source_code": "x"}), "language_id"),
            (json!({"language_id": 71}), "source_code"),
            (
                json!({"source_code": "x", "language_id": 71, "number_of_runs": 0}),
                "number_of_runs",
            ),
            (
                json!({"source_code": "x", "language_id": 71, "additional_files": "!!"}),
                "additional_files",
            ),
            (
                json!({"source_code": "x", "language_id": 71, "cpu_time_limit": -1}),
                "cpu_time_limit",
            ),
            (
                json!({"source_code": "x", "language_id": 71, "memory_limit": 1}),
                "memory_limit",
            ),
        ] {
            let e = convert(parse_request(bad.clone()).unwrap(), false)
                .err()
                .expect("refused");
            assert_eq!(e.field, field, "{bad}");
            assert_eq!(
                e.body()[field][0],
                Value::String(e.message.clone()),
                "{bad}"
            );
        }
        let blank = convert(parse_request(json!({"language_id": 71})).unwrap(), false);
        assert_eq!(
            blank.err().expect("refused").body(),
            json!({"source_code": ["can't be blank"]}),
            "Judge0's own words"
        );
        let e = convert(
            parse_request(json!({"source_code": "!!", "language_id": 71})).unwrap(),
            true,
        )
        .err()
        .expect("refused");
        assert_eq!(e.field, "source_code", "bad base64");
        // A value of the wrong type is its field's error.
        for (bad, field) in [
            (json!({"source_code": 5, "language_id": 71}), "source_code"),
            (
                json!({"source_code": "x", "language_id": "abc"}),
                "language_id",
            ),
            (
                json!({"source_code": "x", "language_id": 71, "cpu_time_limit": "fast"}),
                "cpu_time_limit",
            ),
        ] {
            assert_eq!(
                parse_request(bad.clone()).unwrap_err().field,
                field,
                "{bad}"
            );
        }
    }

    #[test]
    fn corral_messages_land_on_judge0_fields() {
        for (message, field, rest) in [
            (
                "callback_url must be http:// or https://",
                "callback_url",
                "must be http:// or https://",
            ),
            (
                "callback_url: relative URL without a base",
                "callback_url",
                "relative URL without a base",
            ),
            (
                "invalid limit memory: must be at least 4M",
                "memory_limit",
                "invalid limit memory: must be at least 4M",
            ),
            (
                "invalid limit wall_time: must be at least 1ms",
                "wall_time_limit",
                "invalid limit wall_time: must be at least 1ms",
            ),
            (
                "language \"python\" is unavailable: no python3",
                "language_id",
                "language \"python\" is unavailable: no python3",
            ),
            ("stdin is too large", "stdin", "is too large"),
            (
                "something else went wrong",
                "base",
                "something else went wrong",
            ),
        ] {
            let i = Invalid::from_message(message);
            assert_eq!(
                (i.field.as_str(), i.message.as_str()),
                (field, rest),
                "{message}"
            );
        }
    }
}
