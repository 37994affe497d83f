//! What the plugin verbs print: plain text, one fact per line, tables with aligned columns.
//! Pure.

use model::resources::plugin_yaml;

use super::install::{InstallReport, stage_lines};
use super::keys::Signed;
use super::show::{Info, Row};
use super::verify::Verified;
use install::candidate::CapabilityLine;

/// A table with a header, columns padded to their widest cell.
pub fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            if i < widths.len() {
                widths[i] = widths[i].max(cell.chars().count());
            }
        }
    }
    let line = |cells: Vec<String>| {
        let mut out = String::new();
        for (i, cell) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                out.push_str(cell);
            } else {
                out.push_str(&format!("{cell:<w$}  ", w = widths[i]));
            }
        }
        out.trim_end().to_string() + "\n"
    };
    let mut out = line(header.iter().map(|h| h.to_string()).collect());
    for row in rows {
        out.push_str(&line(row.clone()));
    }
    out
}

/// Each capability, what it allows, and whether it is approved.
pub fn capabilities(lines: &[CapabilityLine]) -> String {
    if lines.is_empty() {
        return "capabilities: none declared\n".into();
    }
    let rows: Vec<Vec<String>> = lines
        .iter()
        .map(|l| {
            vec![
                l.capability.to_string(),
                if l.approved {
                    "approved"
                } else {
                    "not approved"
                }
                .into(),
                l.allows_here(),
            ]
        })
        .collect();
    table(&["CAPABILITY", "APPROVAL", "ALLOWS"], &rows)
}

/// The install (or upgrade) report: the Plugin as YAML for --dry-run, else what happened.
pub fn install(report: &InstallReport, verb: &str) -> String {
    let name = report.plugin.metadata.name.clone().unwrap_or_default();
    let mut out = String::new();
    if !report.applied {
        out.push_str(&plugin_yaml(&report.plugin));
        return out;
    }
    out.push_str(&format!(
        "{verb} plugin {name}: {}\n",
        report.plugin.spec.image
    ));
    out.push_str(&capabilities(&report.capabilities));
    match &report.verdict {
        Some((status, stage, message)) => {
            out.push_str(&format!("admission: {status} ({stage}): {message}\n"))
        }
        None => out.push_str(&format!(
            "admission: not judged yet; see `kubectl get plugin {name}` or `loop-plugins plugin info {name}`\n"
        )),
    }
    out
}

/// The checks install ran, for stderr.
pub fn checked(report: &InstallReport) -> String {
    let mut out = capabilities(&report.capabilities);
    for (stage, mark, text) in stage_lines(&report.checked) {
        out.push_str(&format!("  {stage:<12} {mark:<8} {text}\n"));
    }
    out
}

/// `plugin list`.
pub fn list(rows: &[Row]) -> String {
    let verify = rows.iter().any(|r| r.verified.is_some());
    let mut header = vec!["NAME", "VERSION", "ADMITTED", "STAGE", "REASON", "DIGEST"];
    if verify {
        header.push("VERIFIED");
    }
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            let mut c = vec![
                r.name.clone(),
                r.version.clone(),
                r.admitted.clone(),
                r.stage.clone(),
                r.reason.clone(),
                short_digest(&r.digest),
            ];
            if let Some(v) = &r.verified {
                c.push(v.clone());
            }
            c
        })
        .collect();
    table(&header, &cells)
}

fn short_digest(digest: &str) -> String {
    match digest.strip_prefix("sha256:") {
        Some(hex) if hex.len() > 12 => format!("sha256:{}", &hex[..12]),
        _ => digest.to_string(),
    }
}

/// `plugin info`.
pub fn info(info: &Info) -> String {
    let p = &info.plugin;
    let status = p.status.clone().unwrap_or_default();
    let mut out = String::new();
    let name = p.metadata.name.clone().unwrap_or_default();
    out.push_str(&format!("name:      {name}\n"));
    out.push_str(&format!(
        "version:   {}\n",
        p.spec.manifest.version.clone().unwrap_or_default()
    ));
    out.push_str(&format!("image:     {}\n", p.spec.image));
    out.push_str(&format!(
        "digest:    {}\n",
        status.digest.clone().unwrap_or_else(|| "-".into())
    ));
    if let Some(image) = &status.image {
        out.push_str(&format!(
            "runs as:   {}:{}\ncommand:   {}\n",
            image.run_as_user,
            image.run_as().group(),
            image.command.join(" ")
        ));
    }
    out.push_str(&format!(
        "signature: {}\n",
        match &p.spec.signature {
            Some(s) => format!("by key {}", s.public_key),
            None => "none in spec.signature".into(),
        }
    ));
    match &info.summary {
        Some((s, reason, message)) => {
            out.push_str(&format!("admitted:  {s} ({reason}): {message}\n"))
        }
        None => out.push_str("admitted:  not judged yet\n"),
    }
    out.push_str("admission stages:\n");
    for (stage, s, reason, message) in &info.stages {
        out.push_str(&format!("  {stage:<12} {s:<7} {reason}: {message}\n"));
    }
    out.push_str(&capabilities(&info.capabilities));
    if !status.tools.is_empty() {
        let tools: Vec<&str> = status.tools.iter().map(|t| t.mcp_name.as_str()).collect();
        out.push_str(&format!("tools:     {}\n", tools.join(", ")));
    }
    if info.instances.is_empty() {
        out.push_str("instances: none\n");
    } else {
        let rows: Vec<Vec<String>> = info
            .instances
            .iter()
            .map(|(n, phase, pod)| vec![n.clone(), phase.clone(), pod.clone()])
            .collect();
        out.push_str(&table(&["INSTANCE", "PHASE", "POD"], &rows));
    }
    out
}

/// `plugin verify`.
pub fn verified(v: &Verified) -> String {
    let f = &v.pulled.facts;
    let mut out = String::new();
    out.push_str(&format!(
        "{} {}\n",
        if v.installed { "plugin" } else { "image" },
        f.pinned
    ));
    out.push_str(&format!(
        "pulled and checked: USER {}, command {:?}, plugin.json sha256 {}\n",
        f.config.run_as,
        f.command(),
        f.tree.plugin_json_sha256
    ));
    out.push_str(&format!(
        "signatures published: {}\n",
        if v.pulled.signatures.is_empty() {
            "none".to_string()
        } else {
            v.pulled
                .signatures
                .iter()
                .map(|s| s.public_key.clone())
                .collect::<Vec<_>>()
                .join(", ")
        }
    ));
    out.push_str(if v.cluster_policy {
        "policy: the cluster's HostConfig\n"
    } else {
        "policy: HostConfig's defaults (no cluster)\n"
    });
    for (stage, mark, text) in stage_lines(&v.outcome) {
        out.push_str(&format!("  {stage:<12} {mark:<8} {text}\n"));
    }
    out.push_str(match v.outcome.stopped_at() {
        None => "verified: admission admits it\n",
        Some(_) => "not verified: admission would not admit it\n",
    });
    out
}

/// `plugin sign`.
pub fn signed(s: &Signed) -> String {
    format!(
        "signed {}\n  key:       {}\n  published: {}\n",
        s.image, s.record.public_key, s.at
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_line_up() {
        let t = table(
            &["NAME", "STAGE"],
            &[
                vec!["echo".into(), "Admitted".into()],
                vec!["a-longer-name".into(), "Image".into()],
            ],
        );
        assert_eq!(
            t,
            "NAME           STAGE\necho           Admitted\na-longer-name  Image\n"
        );
        assert_eq!(
            short_digest(&format!("sha256:{}", "ab".repeat(32))),
            "sha256:abababababab"
        );
    }
}
