//! Percentiles and a flat JSON object of measurements.

use serde_json::{Map, Value};

/// Samples in milliseconds.
#[derive(Debug, Default, Clone)]
pub struct Samples(Vec<f64>);

impl Samples {
    pub fn with_capacity(n: usize) -> Self {
        Samples(Vec::with_capacity(n))
    }

    pub fn push(&mut self, ms: f64) {
        self.0.push(ms);
    }

    pub fn extend(&mut self, other: Samples) {
        self.0.extend(other.0);
    }

    /// In the order they were taken.
    pub fn values(&self) -> &[f64] {
        &self.0
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Nearest-rank percentile (p in 0..=100); NaN when empty.
    pub fn percentile(&self, p: f64) -> f64 {
        if self.0.is_empty() {
            return f64::NAN;
        }
        let mut v = self.0.clone();
        v.sort_by(f64::total_cmp);
        let rank = ((p / 100.0) * v.len() as f64).ceil() as usize;
        v[rank.clamp(1, v.len()) - 1]
    }

    pub fn mean(&self) -> f64 {
        if self.0.is_empty() {
            return f64::NAN;
        }
        self.0.iter().sum::<f64>() / self.0.len() as f64
    }

    pub fn max(&self) -> f64 {
        self.0.iter().copied().fold(f64::NAN, f64::max)
    }
}

/// The measurements printed at the end: one flat object, keys in insertion order of sections.
#[derive(Default)]
pub struct Report {
    pub values: Map<String, Value>,
    pub errors: Vec<String>,
}

impl Report {
    pub fn set(&mut self, key: impl Into<String>, v: impl Into<Value>) {
        self.values.insert(key.into(), v.into());
    }

    /// A float rounded to 3 decimals (JSON has no NaN: those become null).
    pub fn ms(&mut self, key: impl Into<String>, v: f64) {
        let v = if v.is_finite() {
            Value::from((v * 1000.0).round() / 1000.0)
        } else {
            Value::Null
        };
        self.values.insert(key.into(), v);
    }

    /// `{prefix}_p50_ms`, `_p99_ms`, `_mean_ms`, `_n`.
    pub fn summary(&mut self, prefix: &str, s: &Samples) {
        self.ms(format!("{prefix}_p50_ms"), s.percentile(50.0));
        self.ms(format!("{prefix}_p99_ms"), s.percentile(99.0));
        self.ms(format!("{prefix}_mean_ms"), s.mean());
        self.set(format!("{prefix}_n"), s.len());
    }

    pub fn error(&mut self, what: String) {
        eprintln!("corral-bench: {what}");
        self.errors.push(what);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let mut s = Samples::default();
        for i in 1..=100 {
            s.push(i as f64);
        }
        assert_eq!(s.percentile(50.0), 50.0);
        assert_eq!(s.percentile(99.0), 99.0);
        assert_eq!(s.percentile(100.0), 100.0);
        assert_eq!(s.mean(), 50.5);
        assert!(Samples::default().percentile(50.0).is_nan());
    }
}
