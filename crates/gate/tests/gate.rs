//! Real processes under the gate (issue 14's list): exec from the writable dirs, scripts,
//! reads, writes outside, unix sockets, the manifest's rules, raw legacy calls, io_uring,
//! races on the path buffer, the audit, a dead supervisor, PID 1's signals and reaping. Each
//! case runs with the gate started as root dropping to uid 65534 and as uid 65534 itself.

mod sandbox;

use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::time::{Duration, Instant};

use sandbox::{Sandbox, decisions, modes, read_line, snapshot, write_line};
use serde_json::{Value, json};

fn s(p: &Path) -> String {
    p.display().to_string()
}

/// Symbolic links of the same path length to `targets` (in a dir of the image, outside the
/// writable dirs), so a racing thread flips the exec path cleanly between them.
fn same_length_links(sb: &Sandbox, targets: [&Path; 2]) -> (String, String) {
    let dir = sb.root.join("links");
    std::fs::create_dir_all(&dir).unwrap();
    let mut out = Vec::new();
    for (name, target) in ["a", "b"].iter().zip(targets) {
        let link = dir.join(name);
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(target, &link).unwrap();
        out.push(s(&link));
    }
    (out[0].clone(), out[1].clone())
}

#[test]
fn exec_from_the_writable_dirs_is_denied_and_audited() {
    require_kernel!();
    for mode in modes() {
        let sb = Sandbox::new("exec");
        let t_data = sb.data.join("true");
        let t_tmp = sb.tmp.join("true");
        for t in [&t_data, &t_tmp] {
            sb.exec_copy(Path::new("/bin/true"), t);
        }
        for t in [&t_data, &t_tmp] {
            assert_eq!(
                sb.probe(mode, &[], &["exec", &s(t)]),
                "err 13",
                "{mode:?} {t:?}"
            );
        }
        // The same file outside the writable dirs runs.
        let t_bin = sb.bin.join("true");
        sandbox::copy_exec(Path::new("/bin/true"), &t_bin);
        let out = sb.run(mode, &[], &[s(&t_bin)]);
        assert!(out.status.success(), "{mode:?}: {out:?}");
        // As the plugin's own command too.
        let out = sb.run(mode, &[], &[s(&t_data)]);
        assert_eq!(out.status.code(), Some(126), "{mode:?}: {out:?}");

        let lines = sb.audit_lines();
        let denied = decisions(&lines, "execve", "deny");
        for t in [&t_data, &t_tmp] {
            let line = denied
                .iter()
                .find(|l| l["path"] == s(t))
                .unwrap_or_else(|| panic!("{mode:?}: no denial of {t:?} in {lines:#?}"));
            assert_eq!(line["rule"], "no-exec");
            assert_eq!(line["enforce"], "landlock");
            assert_eq!(line["errno"], libc::EACCES);
            assert_eq!(line["uid"], sandbox::UID);
            assert_eq!(line["op"], "exec");
        }
        assert!(
            decisions(&lines, "execve", "allow")
                .iter()
                .any(|l| l["path"] == s(&t_bin))
        );
    }
}

#[test]
fn a_script_in_a_writable_dir_is_denied() {
    require_kernel!();
    for mode in modes() {
        let sb = Sandbox::new("script");
        let marker = sb.data.join("ran");
        let script = sb.data.join("s.sh");
        // Written elsewhere and copied in by cp: see `copy_exec`.
        let text = sb.root.join("s.sh.text");
        std::fs::write(&text, format!("#!/bin/sh\necho > {}\n", s(&marker))).unwrap();
        sb.exec_copy(&text, &script);
        assert_eq!(sb.probe(mode, &[], &["exec", &s(&script)]), "err 13");
        // An image interpreter named in the shebang does not help either.
        let out = sb.run(mode, &[], &[s(&script)]);
        assert_eq!(out.status.code(), Some(126), "{mode:?}");
        assert!(!marker.exists(), "{mode:?}: the script ran");
    }
}

#[test]
fn reads_stats_and_listings_work_anywhere() {
    require_kernel!();
    for mode in modes() {
        let sb = Sandbox::new("reads");
        let f = sb.outside.join("f");
        sb.file(&f, b"hello", 0o644);
        for op in [
            vec!["read", "/etc/passwd"],
            vec!["read", "/proc/self/status"],
            vec!["list", "/usr/bin"],
            vec!["read", &s(&f)],
            vec!["list", &s(&sb.outside)],
        ] {
            assert_eq!(sb.probe(mode, &[], &op), "ok", "{mode:?} {op:?}");
        }
    }
}

#[test]
fn changes_outside_the_writable_dirs_fail_and_change_nothing() {
    require_kernel!();
    for mode in modes() {
        let sb = Sandbox::new("outside");
        let o = &sb.outside;
        let f = o.join("f");
        sb.file(&f, b"keep", 0o644);
        sb.dir(&o.join("d"));
        let inside = sb.data.join("in");
        sb.file(&inside, b"mine", 0o644);
        let before = snapshot(o);
        let cases: Vec<Vec<String>> = vec![
            vec!["write".into(), s(&f)],
            vec!["write".into(), s(&o.join("new"))],
            vec!["append".into(), s(&f)],
            vec!["truncate".into(), s(&f)],
            vec!["rdonly-trunc".into(), s(&f)],
            vec!["mkdir".into(), s(&o.join("nd"))],
            vec!["rmdir".into(), s(&o.join("d"))],
            vec!["unlink".into(), s(&f)],
            vec!["rename".into(), s(&f), s(&o.join("g"))],
            vec!["rename".into(), s(&f), s(&sb.data.join("stolen"))],
            vec!["rename".into(), s(&inside), s(&o.join("planted"))],
            vec!["link".into(), s(&f), s(&o.join("l"))],
            vec!["link".into(), s(&f), s(&sb.data.join("l"))],
            vec!["link".into(), s(&inside), s(&o.join("l2"))],
            vec!["symlink".into(), "/etc/passwd".into(), s(&o.join("s"))],
            vec!["chmod".into(), s(&f), "777".into()],
            vec!["fchmod".into(), s(&f), "777".into()],
            vec!["chmod".into(), s(&o.join("d")), "777".into()],
            vec!["chown".into(), s(&f)],
            vec!["utime".into(), s(&f)],
            vec!["setxattr".into(), s(&f)],
        ];
        for case in &cases {
            let op: Vec<&str> = case.iter().map(String::as_str).collect();
            let answer = sb.probe(mode, &[], &op);
            assert!(answer.starts_with("err "), "{mode:?} {op:?}: {answer}");
        }
        assert_eq!(snapshot(o), before, "{mode:?}: something outside changed");
        assert_eq!(std::fs::read(&inside).unwrap(), b"mine");
        // The same calls inside a writable dir work.
        let d = &sb.data;
        for op in [
            vec!["write".to_string(), s(&d.join("a"))],
            vec!["mkdir".into(), s(&d.join("sub"))],
            vec!["rename".into(), s(&d.join("a")), s(&d.join("sub/b"))],
            vec!["link".into(), s(&d.join("sub/b")), s(&d.join("c"))],
            vec!["symlink".into(), "sub/b".into(), s(&d.join("sl"))],
            vec!["chmod".into(), s(&d.join("c")), "640".into()],
            vec!["fchmod".into(), s(&d.join("c")), "600".into()],
            vec!["chown".into(), s(&d.join("c"))],
            vec!["setxattr".into(), s(&d.join("c"))],
            vec!["utime".into(), s(&d.join("c"))],
            vec!["truncate".into(), s(&d.join("c"))],
            vec!["unlink".into(), s(&d.join("c"))],
            vec!["write".into(), s(&sb.tmp.join("t"))],
        ] {
            let op: Vec<&str> = op.iter().map(String::as_str).collect();
            assert_eq!(sb.probe(mode, &[], &op), "ok", "{mode:?} {op:?}");
        }
        let m = std::fs::metadata(d.join("sub/b")).unwrap();
        assert_eq!(m.permissions().mode() & 0o777, 0o600);
        assert_eq!(m.len(), 0);
    }
}

#[test]
fn unix_socket_connects_are_denied() {
    require_kernel!();
    for mode in modes() {
        let sb = Sandbox::new("unix");
        let path = sb.bin.join("host.sock");
        let listener = UnixListener::bind(&path).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o777)).unwrap();
        listener.set_nonblocking(true).unwrap();
        let name = format!("loop-gate-test-{}-{mode:?}", std::process::id());
        let abstract_listener = {
            use std::os::linux::net::SocketAddrExt;
            let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
            UnixListener::bind_addr(&addr).unwrap()
        };
        abstract_listener.set_nonblocking(true).unwrap();
        // Reachable without the gate.
        drop(UnixStream::connect(&path).unwrap());
        let _ = listener.accept().unwrap();

        assert_eq!(sb.probe(mode, &[], &["connect-unix", &s(&path)]), "err 1");
        assert_eq!(sb.probe(mode, &[], &["connect-abstract", &name]), "err 1");
        assert_eq!(sb.probe(mode, &[], &["socketpair", "dgram"]), "err 1");
        assert_eq!(sb.probe(mode, &[], &["socketpair", "stream"]), "ok");
        assert_eq!(sb.probe(mode, &[], &["tcp-socket"]), "ok");
        for l in [&listener, &abstract_listener] {
            let e = l.accept().unwrap_err();
            assert_eq!(
                e.kind(),
                std::io::ErrorKind::WouldBlock,
                "{mode:?}: a connection got through"
            );
        }
        let lines = sb.audit_lines();
        let denied = decisions(&lines, "socket", "deny");
        assert!(denied.len() >= 2, "{mode:?}: {lines:#?}");
        assert!(
            denied
                .iter()
                .all(|l| l["enforce"] == "bpf" && l["rule"] == "bpf.unix-socket")
        );
    }
}

/// The reference's example rules, an allow before each deny, and an allow beyond the
/// writable dirs.
fn manifest_policy(sb: &Sandbox) -> Value {
    json!({
        "version": 1,
        "plugin": "cogtest",
        "chat": "team-a/general",
        "gate": {
            "files": [
                { "paths": [format!("{}/cache/keep/**", s(&sb.data))], "operations": ["delete"], "decision": "allow" },
                { "paths": [format!("{}/cache/**", s(&sb.data))], "operations": ["delete"], "decision": "deny" },
                { "paths": [format!("{}/extra/**", s(&sb.outside))], "operations": ["write", "create"], "decision": "allow" },
            ],
            "commands": [
                { "commands": ["wget"], "decision": "allow" },
                { "commands": ["curl", "wget"], "decision": "deny" },
            ],
        },
    })
}

#[test]
fn the_manifests_rules_are_enforced_and_its_allows_honoured() {
    require_kernel!();
    for mode in modes() {
        let sb = Sandbox::new("manifest");
        let cache = sb.data.join("cache");
        sb.dir(&cache.join("keep"));
        sb.dir(&cache.join("sub"));
        sb.dir(&sb.outside.join("extra"));
        for f in ["a", "sub/b", "keep/k"] {
            sb.file(&cache.join(f), b"cached", 0o644);
        }
        // Commands named by the rules: copies of the probe, found on PATH.
        let cmds = sb.root.join("cmds");
        std::fs::create_dir_all(&cmds).unwrap();
        for name in ["curl", "wget"] {
            sandbox::copy_exec(&sb.probe, &cmds.join(name));
        }
        let opts = sb.policy("policy.json", &manifest_policy(&sb));
        // Run from a PATH that holds them, as a plugin image would.
        let path = format!("{}:/usr/bin:/bin", s(&cmds));

        let run_with = |opts: &[String], op: &[&str]| -> String {
            let mut cmd = vec![s(&sb.probe)];
            cmd.extend(op.iter().map(|x| x.to_string()));
            let out = sb
                .command(mode, opts, &cmd)
                .env("PATH", &path)
                .output()
                .unwrap();
            String::from_utf8_lossy(&out.stdout).trim().to_string()
        };
        let run = |op: &[&str]| run_with(&opts, op);
        // Deletes under cache/ are denied, raw or not, and renaming it away too.
        assert_eq!(run(&["unlink", &s(&cache.join("a"))]), "err 13");
        assert_eq!(run(&["raw-unlink", &s(&cache.join("a"))]), "err 13");
        assert_eq!(
            run(&["rename", &s(&cache.join("a")), &s(&sb.data.join("a"))]),
            "err 13"
        );
        assert_eq!(
            run(&["rename", &s(&cache), &s(&sb.data.join("moved"))]),
            "err 13"
        );
        assert_eq!(
            run(&["raw-rename", &s(&cache.join("sub")), &s(&sb.data.join("x"))]),
            "err 13"
        );
        assert_eq!(
            run(&["rename", &s(&sb.data), &s(&sb.tmp.join("d"))]),
            "err 13"
        );
        assert_eq!(run(&["rmdir", &s(&cache.join("sub"))]), "err 13");
        // Writes there are not deletes: allowed, by the baseline.
        assert_eq!(run(&["write", &s(&cache.join("new"))]), "ok");
        // The allow before the deny.
        assert_eq!(run(&["unlink", &s(&cache.join("keep/k"))]), "ok");
        // An allow beyond the writable dirs: written by the supervisor, and never runnable.
        let extra = sb.outside.join("extra/state");
        assert_eq!(run(&["write", &s(&extra)]), "ok");
        assert_eq!(std::fs::read(&extra).unwrap(), b"x");
        assert_eq!(run(&["unlink", &s(&extra)]), "err 13");
        sandbox::copy_exec(Path::new("/bin/true"), &sb.outside.join("extra/t"));
        assert_eq!(run(&["exec", &s(&sb.outside.join("extra/t"))]), "err 13");
        for f in ["a", "sub/b"] {
            assert_eq!(
                std::fs::read(cache.join(f)).unwrap(),
                b"cached",
                "{mode:?} {f}"
            );
        }
        assert!(!cache.join("keep/k").exists());
        // curl is denied, by name and in the kernel (no EXECUTE on the file); wget's allow
        // comes first.
        assert_eq!(
            run(&["exec", &s(&cmds.join("curl")), "tcp-socket"]),
            "err 13"
        );
        assert_eq!(run(&["exec", &s(&cmds.join("wget")), "tcp-socket"]), "ok");
        // And curl stays denied in the kernel when a racing thread swaps the path after the
        // supervisor let /bin/true through: Landlock never granted EXECUTE on that file.
        let marker = sb.tmp.join("curl-ran");
        let (t, c) = same_length_links(&sb, [Path::new("/bin/true"), &cmds.join("curl")]);
        let out = run(&["race-exec", &t, &c, &s(&marker), "200"]);
        assert!(out.starts_with("done 200"), "{out}");
        assert!(!marker.exists(), "{mode:?}: a denied command ran");

        let lines = sb.audit_lines();
        let start = lines.iter().find(|l| l["event"] == "start").unwrap();
        assert!(
            start["exec_denied_files"]
                .as_array()
                .unwrap()
                .iter()
                .any(|f| f == &json!(s(&cmds.join("curl")))),
            "{start:#}"
        );
        let curl = decisions(&lines, "execve", "deny")
            .into_iter()
            .find(|l| l["path"] == s(&cmds.join("curl")))
            .unwrap();
        assert_eq!(curl["rule"], "gate.commands[1]");
        assert_eq!(curl["plugin"], "cogtest");
        assert_eq!(curl["chat"], "team-a/general");
        let in_cache: Vec<_> = decisions(&lines, "unlink", "deny")
            .into_iter()
            .filter(|l| l["path"].as_str().unwrap().starts_with(&s(&cache)))
            .collect();
        assert!(!in_cache.is_empty());
        assert!(
            in_cache
                .iter()
                .all(|l| l["rule"] == "gate.files[1]" && l["enforce"] == "emulated")
        );
        let outside = decisions(&lines, "unlink", "deny")
            .into_iter()
            .find(|l| l["path"] == s(&extra))
            .unwrap();
        assert_eq!(outside["rule"], "baseline.outside");
        assert!(
            decisions(&lines, "unlink", "allow")
                .iter()
                .any(|l| l["rule"] == "gate.files[0]")
        );

        // The same rules from a plugin manifest (JSON5), as `--manifest-gate` reads them.
        let manifest = sb.bin.join("plugin.json");
        let rules = manifest_policy(&sb)["gate"].clone();
        std::fs::write(
            &manifest,
            format!("{{ name: \"cogtest\", // JSON5\n gate: {rules}, }}"),
        )
        .unwrap();
        let from_manifest = vec!["--manifest-gate".into(), s(&manifest)];
        assert_eq!(
            run_with(&from_manifest, &["unlink", &s(&cache.join("a"))]),
            "err 13"
        );
        assert_eq!(
            run_with(
                &from_manifest,
                &["exec", &s(&cmds.join("curl")), "tcp-socket"]
            ),
            "err 13"
        );
    }
}

#[test]
fn raw_legacy_calls_and_io_uring_are_blocked() {
    require_kernel!();
    for mode in modes() {
        let sb = Sandbox::new("raw");
        for op in ["raw-open", "raw-creat", "raw-mkdir"] {
            let answer = sb.probe(mode, &[], &[op, &s(&sb.outside.join("r"))]);
            assert_eq!(answer, "err 13", "{mode:?} {op}");
        }
        let mine = sb.outside.join("mine");
        sb.file(&mine, b"x", 0o644);
        let before = snapshot(&sb.outside);
        assert_eq!(
            sb.probe(mode, &[], &["raw-link", &s(&mine), &s(&sb.data.join("p"))]),
            "err 18",
            "{mode:?}: a hard link of an outside file into a writable dir"
        );
        assert_eq!(snapshot(&sb.outside), before);
        assert!(!sb.data.join("p").exists());
        // Inside the writable dirs the raw calls work.
        assert_eq!(
            sb.probe(mode, &[], &["raw-creat", &s(&sb.data.join("r"))]),
            "ok"
        );
        assert_eq!(sb.probe(mode, &[], &["io-uring"]), "err 1");
        assert_eq!(sb.probe(mode, &[], &["openat2", "/etc/passwd"]), "err 38");
        assert_eq!(sb.probe(mode, &[], &["ptrace"]), "err 1");
        assert_eq!(sb.probe(mode, &[], &["unshare-user"]), "err 1");
        // Another architecture's entry, or x32: the process is killed (SIGSYS).
        for op in ["int80", "x32"] {
            let out = sb.run(mode, &[], &[s(&sb.probe), op.into()]);
            assert_eq!(
                out.status.code(),
                Some(128 + libc::SIGSYS),
                "{mode:?} {op}: {out:?}"
            );
            assert!(out.stdout.is_empty(), "{mode:?} {op}: the call returned");
        }
        // A memfd cannot run, whichever path leads to it.
        assert_eq!(sb.probe(mode, &[], &["memfd-exec", "/bin/true"]), "err 13");
        let lines = sb.audit_lines();
        let uring = decisions(&lines, "io_uring_setup", "deny");
        assert_eq!(uring.len(), 1, "{mode:?}");
        assert_eq!(uring[0]["rule"], "bpf.io_uring");
    }
}

/// A racing thread flips the path between an allowed one and a denied one thousands of
/// times: the denied one never gets through.
#[test]
fn a_racing_thread_never_gets_a_denied_path_through() {
    require_kernel!();
    for mode in modes() {
        let sb = Sandbox::new("race");
        let cache = sb.data.join("cache");
        sb.dir(&cache);
        let victim = cache.join("victim");
        sb.file(&victim, b"precious", 0o644);
        let outside = sb.outside.join("f");
        sb.file(&outside, b"keep", 0o644);
        let opts = sb.policy("policy.json", &manifest_policy(&sb));

        // unlink: an allowed (absent) file against the protected one.
        let out = sb.probe(
            mode,
            &opts,
            &[
                "race-unlink",
                &s(&sb.data.join("gone")),
                &s(&victim),
                "5000",
            ],
        );
        assert!(out.starts_with("done 5000"), "{out}");
        assert_eq!(std::fs::read(&victim).unwrap(), b"precious", "{mode:?}");
        // create: the writable dir against outside (the policy's allow beyond the writable
        // dirs has the supervisor perform opens for writing).
        let evil = sb.outside.join("evil");
        let out = sb.probe(
            mode,
            &opts,
            &["race-create", &s(&sb.data.join("fine")), &s(&evil), "5000"],
        );
        assert!(out.starts_with("done 5000"), "{out}");
        assert!(!evil.exists(), "{mode:?}: created outside");
        // chmod: performed by the supervisor on what it pinned.
        let out = sb.probe(
            mode,
            &opts,
            &[
                "race-chmod",
                &s(&sb.data.join("fine")),
                &s(&outside),
                "5000",
            ],
        );
        assert!(out.starts_with("done 5000"), "{out}");
        let m = std::fs::metadata(&outside).unwrap().permissions().mode() & 0o777;
        assert_eq!(m, 0o644, "{mode:?}: chmod got through");
        // exec: /bin/true against a copy of the probe in the data dir that leaves a marker.
        let copy = sb.data.join("probe");
        sb.exec_copy(&sb.probe, &copy);
        let marker = sb.tmp.join("marker");
        let (t, c) = same_length_links(&sb, [Path::new("/bin/true"), &copy]);
        let out = sb.probe(mode, &opts, &["race-exec", &t, &c, &s(&marker), "300"]);
        assert!(out.starts_with("done 300"), "{out}");
        assert!(!marker.exists(), "{mode:?}: a file from the data dir ran");
        // exec of a memfd through /proc/self/fd, raced the same way.
        let out = sb.probe(mode, &opts, &["race-memfd-exec", &s(&marker), "300"]);
        assert!(out.contains("done 300"), "{out}");
        assert!(
            out.contains("mode 666"),
            "{mode:?}: the memfd is executable: {out}"
        );
        assert!(!marker.exists(), "{mode:?}: a memfd ran");
    }
}

#[test]
fn the_audit_parses_and_counts() {
    require_kernel!();
    let sb = Sandbox::new("audit");
    let mode = modes()[0];
    let opts = sb.policy("policy.json", &manifest_policy(&sb));
    let cmd = vec![
        "/bin/sh".to_string(),
        "-c".into(),
        format!(
            "cp /bin/true {d}/t; {d}/t; mkdir -p {d}/cache; echo x > {d}/cache/y; rm {d}/cache/y; chmod 600 {d}/cache/y; true",
            d = s(&sb.data)
        ),
    ];
    let out = sb.run(mode, &opts, &cmd);
    assert!(out.status.success(), "{out:?}");
    let lines = sb.audit_lines();
    let sha = lines[0]["policy_sha256"].as_str().unwrap().to_string();
    assert_eq!(sha.len(), 64);
    for (i, l) in lines.iter().enumerate() {
        assert_eq!(l["seq"], i as u64, "{l}");
        assert!(l["time"].as_str().unwrap().ends_with('Z'));
        assert_eq!(l["policy_sha256"], sha.as_str());
        assert_eq!(l["plugin"], "cogtest");
        if l["event"] == "decision" {
            for field in ["pid", "tid", "uid", "syscall", "nr", "rule"] {
                assert!(!l[field].is_null(), "{field} missing: {l}");
            }
            if !l["decision"].is_null() {
                assert!(["bpf", "landlock", "emulated"].contains(&l["enforce"].as_str().unwrap()));
            }
        }
    }
    assert_eq!(lines[0]["event"], "start");
    let summary = lines.last().unwrap();
    assert_eq!(summary["event"], "summary");
    assert_eq!(summary["exit_code"], 0);
    let count = |d: &str| {
        lines
            .iter()
            .filter(|l| l["event"] == "decision" && l["decision"] == d)
            .count() as u64
    };
    assert_eq!(summary["denied"], count("deny"));
    assert_eq!(summary["allowed"], count("allow"));
    assert!(count("deny") >= 2, "{lines:#?}");
    let counters: Value = serde_json::from_slice(
        &std::fs::read(sb.audit.join(loop_plugins_gate::COUNTERS_FILE)).unwrap(),
    )
    .unwrap();
    assert_eq!(counters["denied"], summary["denied"]);
    // The counters, as the controller would read them from the termination message.
    let term = sb.data.join("termination-log");
    sb.file(&term, b"plugin's own message\n", 0o644);
    let mut with_term = opts.clone();
    with_term.extend(["--termination-log".to_string(), s(&term)]);
    let out = sb.run(
        mode,
        &with_term,
        &[
            "/bin/sh".into(),
            "-c".into(),
            "rm -f /etc/hostname; true".into(),
        ],
    );
    assert!(out.status.success());
    let text = std::fs::read_to_string(&term).unwrap();
    let mut parts = text.lines();
    assert_eq!(parts.next(), Some("plugin's own message"));
    let gate: Value = serde_json::from_str(parts.next().unwrap()).unwrap();
    assert!(gate["gate"]["denied"].as_u64().is_some(), "{text}");
    // The audit dir is the gate's: the plugin may read it, never change it.
    let seg = std::fs::read_dir(&sb.audit)
        .unwrap()
        .flatten()
        .find(|e| e.path().extension().is_some_and(|x| x == "jsonl"))
        .unwrap()
        .path();
    assert_eq!(sb.probe(mode, &[], &["read", &s(&seg)]), "ok");
    let opts2 = vec!["--audit".to_string(), s(&sb.data.join(".loop-audit"))];
    sb.dir(&sb.data.join(".loop-audit"));
    for op in ["write", "unlink", "truncate"] {
        let target = sb.data.join(".loop-audit").join("counters.json");
        assert_eq!(sb.probe(mode, &opts2, &[op, &s(&target)]), "err 13", "{op}");
    }
}

#[test]
fn a_dead_supervisor_leaves_trapped_calls_failing() {
    require_kernel!();
    for mode in modes() {
        let sb = Sandbox::new("dead");
        let f = sb.data.join("f");
        sb.file(&f, b"x", 0o644);
        for op in [
            vec!["chmod", &s(&f) as &str, "600"],
            vec!["exec", "/bin/true"],
            vec!["connect-abstract", "x"],
        ] {
            let mut wait = vec!["wait-then"];
            wait.extend(op.iter().copied());
            let mut child = sb.spawn(mode, &[], &wait);
            assert_eq!(read_line(&mut child), "ready");
            // The gate is the spawned process (setpriv execs it); kill it, not the probe.
            let gate = child.id() as i32;
            // SAFETY: plain call.
            assert_eq!(unsafe { libc::kill(gate, libc::SIGKILL) }, 0);
            sandbox::reap(gate as u32);
            write_line(&mut child);
            let answer = read_line(&mut child);
            assert_eq!(
                answer, "err 38",
                "{mode:?} {op:?}: ENOSYS expected, the call was trapped"
            );
        }
        assert_eq!(
            std::fs::metadata(&f).unwrap().permissions().mode() & 0o777,
            0o644
        );
    }
}

#[test]
fn exit_status_signals_and_orphans() {
    require_kernel!();
    for mode in modes() {
        let sb = Sandbox::new("pid1");
        let sh = |script: &str| vec!["/bin/sh".to_string(), "-c".into(), script.into()];
        assert_eq!(sb.run(mode, &[], &sh("exit 42")).status.code(), Some(42));
        assert_eq!(
            sb.run(mode, &[], &sh("kill -KILL $$")).status.code(),
            Some(137)
        );
        // SIGTERM to the gate reaches the plugin.
        let mut child = sb
            .command(
                mode,
                &[],
                &sh("trap 'exit 7' TERM; echo ready; while :; do sleep 0.05; done"),
            )
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        assert_eq!(read_line(&mut child), "ready");
        // SAFETY: plain call.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        assert_eq!(child.wait().unwrap().code(), Some(7), "{mode:?}");
        // An orphan of the plugin is reaped by the gate (a subreaper, or PID 1 in a pod).
        let mut child = sb
            .command(mode, &[], &sh("(sleep 0.1 &); echo ready; sleep 1; exit 3"))
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        assert_eq!(read_line(&mut child), "ready");
        std::thread::sleep(Duration::from_millis(600));
        let gate = child.id();
        let zombies = std::fs::read_dir(format!("/proc/{gate}/task"))
            .unwrap()
            .flatten()
            .flat_map(|t| {
                std::fs::read_to_string(t.path().join("children"))
                    .unwrap_or_default()
                    .split_whitespace()
                    .map(String::from)
                    .collect::<Vec<_>>()
            })
            .filter(|c| {
                std::fs::read_to_string(format!("/proc/{c}/stat")).is_ok_and(|st| {
                    st.rsplit(')')
                        .next()
                        .unwrap_or("")
                        .trim_start()
                        .starts_with('Z')
                })
            })
            .count();
        assert_eq!(zombies, 0, "{mode:?}: an orphan was left a zombie");
        assert_eq!(child.wait().unwrap().code(), Some(3));
    }
}

#[test]
fn the_gate_as_pid_1_forwards_and_exits_with_the_plugin() {
    require_kernel!();
    if !sandbox::is_root() {
        eprintln!("SKIPPED: a PID namespace needs root here");
        return;
    }
    let sb = Sandbox::new("ns");
    let mut cmd = std::process::Command::new("unshare");
    cmd.args(["--pid", "--fork", "--mount-proc", "--"])
        .arg(&sb.gate)
        .arg("--uid")
        .arg(sandbox::UID.to_string());
    cmd.args(sb.options()).args([
        "--",
        "/bin/sh",
        "-c",
        "trap 'exit 9' TERM; echo pid=$PPID; while :; do sleep 0.05; done",
    ]);
    let mut child = cmd.stdout(std::process::Stdio::piped()).spawn().unwrap();
    assert_eq!(read_line(&mut child), "pid=1", "the gate is PID 1");
    // The gate, PID 1 inside, is unshare's child outside.
    let started = Instant::now();
    let gate = loop {
        let kids =
            std::fs::read_to_string(format!("/proc/{}/task/{}/children", child.id(), child.id()))
                .unwrap_or_default();
        if let Some(k) = kids.split_whitespace().next() {
            break k.parse::<i32>().unwrap();
        }
        assert!(started.elapsed() < Duration::from_secs(5));
        std::thread::sleep(Duration::from_millis(20));
    };
    // SAFETY: plain call.
    unsafe { libc::kill(gate, libc::SIGTERM) };
    assert_eq!(child.wait().unwrap().code(), Some(9));
}

#[test]
fn the_gate_refuses_what_it_cannot_do_safely() {
    require_kernel!();
    let sb = Sandbox::new("refuse");
    if sandbox::is_root() {
        let out = std::process::Command::new(&sb.gate)
            .args(["--", "/bin/true"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(125));
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("refusing to run the plugin as root")
        );
    }
    let mode = modes()[0];
    let approve = json!({"version": 1, "gate": {"commands": [{"commands": ["curl"], "decision": "approve"}]}});
    let opts = sb.policy("approve.json", &approve);
    let out = sb.run(mode, &opts, &["/bin/true".into()]);
    assert_eq!(out.status.code(), Some(125));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("approve is refused") && err.contains("approve.json"),
        "{err}"
    );
    let out = sb.run(mode, &[], &["no-such-command-anywhere".into()]);
    assert_eq!(out.status.code(), Some(127));
}

#[test]
fn what_the_supervisor_creates_gets_the_plugins_umask_and_uid() {
    require_kernel!();
    for mode in modes() {
        let sb = Sandbox::new("umask");
        // The audit dir in the data dir: every create goes through the supervisor.
        let opts = vec!["--audit".to_string(), s(&sb.data.join(".loop-audit"))];
        let d = s(&sb.data);
        let script = format!("umask 077; echo x > {d}/f; mkdir {d}/dir; umask 022; echo y > {d}/g");
        let out = sb.run(mode, &opts, &["/bin/sh".into(), "-c".into(), script]);
        assert!(out.status.success(), "{mode:?}: {out:?}");
        let m = |p: &str| std::fs::metadata(sb.data.join(p)).unwrap();
        use std::os::unix::fs::MetadataExt;
        assert_eq!(m("f").mode() & 0o777, 0o600, "{mode:?}");
        assert_eq!(m("dir").mode() & 0o777, 0o700, "{mode:?}");
        assert_eq!(m("g").mode() & 0o777, 0o644, "{mode:?}");
        if sandbox::is_root() {
            assert_eq!(m("f").uid(), sandbox::UID, "{mode:?}");
        }
        let lines = sandbox::audit_lines_in(&sb.data.join(".loop-audit"));
        assert!(
            decisions(&lines, "openat", "allow")
                .iter()
                .any(|l| l["path"] == s(&sb.data.join("f")) && l["enforce"] == "emulated"),
            "{mode:?}: the create was not the supervisor's"
        );
    }
}

/// The supervisor performs calls instead of the kernel: each answers as the kernel would.
/// The same sequence of calls runs bare and under the gate with every file-changing call
/// trapped (the audit dir inside the data dir), on identical trees; the answers must match.
#[test]
fn emulated_calls_answer_as_the_kernel_would() {
    require_kernel!();
    let sb = Sandbox::new("fidelity");
    let mode = sandbox::Mode::SameUid;
    let bare = sb.root.join("bare");
    let gated = sb.data.join("case");
    for d in [&bare, &gated] {
        sb.dir(d);
        sb.file(&d.join("f"), b"file", 0o644);
        sb.dir(&d.join("d"));
        sb.dir(&d.join("e"));
        sb.file(&d.join("e/x"), b"x", 0o644);
        std::os::unix::fs::symlink("f", d.join("l")).unwrap();
        std::os::unix::fs::symlink("d", d.join("dl")).unwrap();
        std::os::unix::fs::symlink("nope", d.join("z")).unwrap();
        if sandbox::is_root() {
            for l in ["l", "dl", "z"] {
                std::os::unix::fs::lchown(d.join(l), Some(sandbox::UID), Some(sandbox::UID))
                    .unwrap();
            }
        }
    }
    let cases: &[&[&str]] = &[
        &["write", "f"],
        &["write", "new"],
        &["write", "d"],
        &["write", "l"],
        &["write", "z"],
        &["write", "f/"],
        &["write", "new2/"],
        &["write", "d/"],
        &["read", "f/"],
        &["read", "d/"],
        &["read", "dl/"],
        &["write", "nodir/x"],
        &["append", "dl/a"],
        &["rdonly-trunc", "e/x"],
        &["mkdir", "d"],
        &["mkdir", "f"],
        &["mkdir", "l"],
        &["mkdir", "m"],
        &["mkdir", "m/"],
        &["mkdir", "nodir/x"],
        &["rmdir", "e"],
        &["rmdir", "f"],
        &["rmdir", "l"],
        &["rmdir", "m/"],
        &["unlink", "d"],
        &["unlink", "nope"],
        &["unlink", "f/"],
        &["rename", "f", "d"],
        &["rename", "d", "f"],
        &["rename", "new", "d/new"],
        &["rename", "e", "d"],
        &["rename", "dl", "dl2"],
        &["link", "f", "f2"],
        &["link", "e", "e2"],
        &["link", "f", "e/x"],
        &["link", "l", "l2"],
        &["symlink", "x", "f"],
        &["symlink", "f", "s"],
        &["chmod", "l", "600"],
        &["chmod", "z", "600"],
        &["chmod", "e", "700"],
        &["fchmod", "f2", "640"],
        &["truncate", "e"],
        &["truncate", "l"],
        &["utime", "z"],
        &["utime", "dl"],
        &["setxattr", "f"],
        &["unlink", "l"],
        &["raw-creat", "c"],
        &["raw-mkdir", "c"],
        &["raw-rename", "c", "c2"],
        &["raw-unlink", "c2"],
    ];
    let mut diffs = Vec::new();
    for case in cases {
        let answer = |root: &Path, gate: bool| {
            let mut op = vec![case[0].to_string()];
            for (i, a) in case[1..].iter().enumerate() {
                // chmod's second argument is a mode, a symlink's first its target text.
                let literal = (matches!(case[0], "chmod" | "fchmod") && i == 1)
                    || (case[0] == "symlink" && i == 0);
                op.push(if literal {
                    a.to_string()
                } else {
                    format!("{}/{a}", s(root))
                });
            }
            let mut cmd = vec![s(&sb.probe)];
            cmd.extend(op);
            let out = if gate {
                let opts = vec!["--audit".to_string(), s(&sb.data.join(".loop-audit"))];
                sb.run(mode, &opts, &cmd)
            } else if sandbox::is_root() {
                std::process::Command::new("setpriv")
                    .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
                    .args(&cmd)
                    .output()
                    .unwrap()
            } else {
                std::process::Command::new(&cmd[0])
                    .args(&cmd[1..])
                    .output()
                    .unwrap()
            };
            String::from_utf8_lossy(&out.stdout).trim().to_string()
        };
        let (want, got) = (answer(&bare, false), answer(&gated, true));
        if want != got {
            diffs.push(format!("{case:?}: kernel {want}, gate {got}"));
        }
    }
    assert!(diffs.is_empty(), "answers differ:\n{}", diffs.join("\n"));
    // And the trees end up the same.
    let strip = |root: &Path| -> Vec<String> {
        snapshot(root)
            .into_iter()
            .map(|l| {
                let l = l.replace(&s(root), "");
                // Times differ between two runs; everything else must not.
                l.split(" mtime=").next().unwrap().to_string()
                    + &l.split(" xattrs=")
                        .nth(1)
                        .map(|x| format!(" xattrs={x}"))
                        .unwrap_or_default()
            })
            .collect()
    };
    assert_eq!(strip(&bare), strip(&gated));
}

#[test]
fn the_audit_can_go_to_standard_output() {
    require_kernel!();
    let sb = Sandbox::new("stdout");
    let mode = modes()[0];
    let opts = vec![
        "--audit".to_string(),
        "-".into(),
        "--plugin".into(),
        "echo".into(),
    ];
    let t = sb.data.join("true");
    sb.exec_copy(Path::new("/bin/true"), &t);
    let out = sb.run(mode, &opts, &[s(&sb.probe), "exec".into(), s(&t)]);
    let text = String::from_utf8_lossy(&out.stdout);
    // The plugin's own output and the audit lines, each line whole.
    let mut plugin = Vec::new();
    let mut audit = Vec::new();
    for line in text.lines() {
        match serde_json::from_str::<Value>(line) {
            Ok(v) => audit.push(v),
            Err(_) => plugin.push(line),
        }
    }
    assert_eq!(plugin, vec!["err 13"]);
    let events: Vec<&str> = audit.iter().map(|l| l["event"].as_str().unwrap()).collect();
    assert_eq!(events.first(), Some(&"start"));
    assert_eq!(events.last(), Some(&"summary"));
    assert!(audit.iter().all(|l| l["plugin"] == "echo"));
    assert_eq!(decisions(&audit, "execve", "deny").len(), 1);
    assert!(
        std::fs::read_dir(&sb.audit).unwrap().next().is_none(),
        "nothing in the audit dir"
    );
}
