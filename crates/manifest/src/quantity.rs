//! `resources.memory` and `resources.cpus`, written the way Docker takes them, as Kubernetes
//! quantities.
//!
//! Memory is a number of bytes, optionally with a unit `b`, `k`, `m`, `g`, `t` or `p`
//! (case-insensitive, powers of 1024, an optional `i` and `b` after it: `128m`, `1g`, `512KiB`,
//! `1.5g`), or a JSON integer of bytes. It becomes the largest binary suffix that states it
//! exactly: `128m` is `128Mi`, `1.5g` is `1536Mi`, `1000` is `1000`. Cpus is a positive number
//! with at most three decimals: `0.5` is `500m`, `2` is `2`.

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use serde_json::Value;

/// Bytes of memory from a `resources.memory` value (string or integer).
pub fn memory_bytes(value: &Value) -> Result<u64, String> {
    match value {
        Value::String(s) => parse_memory(s),
        Value::Number(n) => match n.as_u64() {
            Some(0) => Err("must be more than 0 bytes".into()),
            Some(b) => Ok(b),
            None => Err(format!(
                "{n} is not a whole number of bytes; write a size such as \"128m\" or \"1g\""
            )),
        },
        _ => {
            Err("must be a size such as \"128m\", \"1g\" or \"512k\", or a number of bytes".into())
        }
    }
}

/// The Kubernetes quantity for a `resources.memory` value.
pub fn memory_quantity(value: &Value) -> Result<Quantity, String> {
    memory_bytes(value).map(bytes_quantity)
}

/// Parses a Docker-style memory size.
pub fn parse_memory(text: &str) -> Result<u64, String> {
    let bad = || {
        format!(
            "\"{text}\" is not a memory size; write a number with an optional unit b, k, m, g, t or p, such as \"128m\" or \"1g\""
        )
    };
    let lower = text.trim().to_ascii_lowercase();
    let number_end = lower
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(lower.len());
    let (number, unit) = lower.split_at(number_end);
    let unit = unit.trim_start_matches(' ');
    let shift = match unit {
        "" | "b" => 0,
        _ => {
            let mut chars = unit.chars();
            let shift = match chars.next() {
                Some('k') => 10,
                Some('m') => 20,
                Some('g') => 30,
                Some('t') => 40,
                Some('p') => 50,
                _ => return Err(bad()),
            };
            match chars.as_str() {
                "" | "b" | "i" | "ib" => shift,
                _ => return Err(bad()),
            }
        }
    };
    let (whole, frac) = match number.split_once('.') {
        Some((w, f)) if !f.is_empty() && !f.contains('.') => (w, f),
        Some(_) => return Err(bad()),
        None => (number, ""),
    };
    if whole.is_empty() || frac.len() > 9 {
        return Err(bad());
    }
    let scale = 10u128.pow(frac.len() as u32);
    let digits: u128 = format!("{whole}{frac}").parse().map_err(|_| bad())?;
    let bytes = digits
        .checked_mul(1u128 << shift)
        .map(|b| b / scale)
        .filter(|b| *b <= u64::MAX as u128)
        .ok_or_else(|| format!("\"{text}\" is too large"))? as u64;
    if bytes == 0 {
        return Err(format!("\"{text}\" must be more than 0 bytes"));
    }
    Ok(bytes)
}

/// Bytes as a quantity, in the largest binary suffix that states them exactly.
pub fn bytes_quantity(bytes: u64) -> Quantity {
    for (suffix, shift) in [("Pi", 50), ("Ti", 40), ("Gi", 30), ("Mi", 20), ("Ki", 10)] {
        if bytes.is_multiple_of(1u64 << shift) {
            return Quantity(format!("{}{suffix}", bytes >> shift));
        }
    }
    Quantity(bytes.to_string())
}

/// The Kubernetes CPU quantity for a `resources.cpus` value.
pub fn cpu_quantity(value: &Value) -> Result<Quantity, String> {
    let Some(cpus) = value.as_f64() else {
        return Err("must be a number of CPUs, such as 0.5 or 2".into());
    };
    if !cpus.is_finite() || cpus <= 0.0 {
        return Err(format!("{cpus} must be more than 0"));
    }
    let milli = cpus * 1000.0;
    if (milli - milli.round()).abs() > 1e-6 {
        return Err(format!(
            "{cpus} is finer than Kubernetes can state; use at most three decimals (0.001 CPU)"
        ));
    }
    if milli > 1e12 {
        return Err(format!("{cpus} is too large"));
    }
    let milli = milli.round() as u64;
    Ok(Quantity(if milli.is_multiple_of(1000) {
        (milli / 1000).to_string()
    } else {
        format!("{milli}m")
    }))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn mem(v: Value) -> Result<String, String> {
        memory_quantity(&v).map(|q| q.0)
    }

    fn cpu(v: Value) -> Result<String, String> {
        cpu_quantity(&v).map(|q| q.0)
    }

    #[test]
    fn memory_sizes_become_quantities() {
        assert_eq!(mem(json!("128m")).unwrap(), "128Mi");
        assert_eq!(mem(json!("1g")).unwrap(), "1Gi");
        assert_eq!(mem(json!("1024m")).unwrap(), "1Gi");
        assert_eq!(mem(json!("512k")).unwrap(), "512Ki");
        assert_eq!(mem(json!("512KiB")).unwrap(), "512Ki");
        assert_eq!(mem(json!("64MB")).unwrap(), "64Mi");
        assert_eq!(mem(json!("1.5g")).unwrap(), "1536Mi");
        assert_eq!(mem(json!("1000")).unwrap(), "1000");
        assert_eq!(mem(json!("1000b")).unwrap(), "1000");
        assert_eq!(mem(json!(134217728)).unwrap(), "128Mi");
        assert_eq!(mem(json!("2 g")).unwrap(), "2Gi");
    }

    #[test]
    fn bad_memory_sizes_are_refused() {
        for v in [
            json!("128x"),
            json!("m"),
            json!(""),
            json!("0"),
            json!("0m"),
            json!("-1m"),
            json!("1.2.3m"),
            json!("128mm"),
            json!(1.5),
            json!(0),
            json!(true),
            json!("99999999999p"),
        ] {
            assert!(mem(v.clone()).is_err(), "{v} should be refused");
        }
    }

    #[test]
    fn cpus_become_millicores() {
        assert_eq!(cpu(json!(0.5)).unwrap(), "500m");
        assert_eq!(cpu(json!(2)).unwrap(), "2");
        assert_eq!(cpu(json!(1.25)).unwrap(), "1250m");
        assert_eq!(cpu(json!(0.001)).unwrap(), "1m");
    }

    #[test]
    fn bad_cpus_are_refused() {
        for v in [
            json!(0),
            json!(-1),
            json!(0.0005),
            json!("0.5"),
            json!(null),
        ] {
            assert!(cpu(v.clone()).is_err(), "{v} should be refused");
        }
    }
}
