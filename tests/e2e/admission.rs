//! Admission end to end: plugins installed from a real registry with `loop-plugins plugin
//! install`, images the tests write (broken ones too), the controller's stages each with its
//! own condition and Events, signatures under strict and permissive modes, a trusted key
//! removed stopping its plugin's pods, and tool-name conflicts.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context, bail, ensure};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::events::v1::Event;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use kube::{Api, ResourceExt};
use model::names::instance_name;
use model::resources::{
    AdmissionStage, ChannelKind, ConditionStatus, Plugin, PluginSignature, SignatureMode,
};
use testkit::images::ImageContent;

use crate::controller_support::{
    CONTROLLER_NAMESPACE, WAIT, apply, apply_host, apply_trusted, channel, cli,
    controller_incarnation, echo_plugin, entry, exclusive, host_spec, install, list_until,
    plugin_id, record_demand, setup, shared,
};
use crate::support::{E2eTest, Ns, test, wait};

pub fn tests() -> Vec<E2eTest> {
    vec![
        test(
            "admission::install_by_tag_pins_the_digest_and_the_pod_runs_the_images_user",
            install_by_tag,
        )
        .timeout(Duration::from_secs(180)),
        test(
            "admission::each_stage_refuses_with_its_own_condition_and_event",
            stages_refuse,
        )
        .timeout(Duration::from_secs(180)),
        test(
            "admission::a_hostile_image_is_refused_and_everything_else_still_reconciles",
            hostile_image,
        )
        .timeout(Duration::from_secs(240)),
        test(
            "admission::signatures_strict_permissive_and_a_removed_key_stops_the_pods",
            signatures,
        )
        .timeout(Duration::from_secs(300)),
        test(
            "admission::tool_names_go_by_package_name_order_and_double_underscore_is_reserved",
            name_conflicts,
        )
        .timeout(Duration::from_secs(180)),
    ]
}

/// Waits until admission judged the current generation and `cond` holds of the status.
async fn judged(
    ns: &Ns,
    name: &str,
    what: &str,
    cond: impl Fn(&Plugin) -> bool,
) -> anyhow::Result<Plugin> {
    let api: Api<Plugin> = Api::all(ns.client());
    wait::matches(&api, name, what, WAIT, |p: &Plugin| {
        p.status
            .as_ref()
            .is_some_and(|s| s.observed_generation == p.metadata.generation)
            && cond(p)
    })
    .await
}

/// The stage that stopped admission and the Admitted condition's reason.
fn verdict(p: &Plugin) -> (String, String) {
    let status = p.status.clone().unwrap_or_default();
    let reason = status
        .conditions
        .iter()
        .find(|c| c.r#type == "Admitted")
        .map(|c| c.reason.clone())
        .unwrap_or_default();
    (status.stage.unwrap_or_default(), reason)
}

/// Waits until the Plugin stops at `stage` with `reason`.
async fn refused_at(
    ns: &Ns,
    name: &str,
    stage: AdmissionStage,
    reason: &str,
) -> anyhow::Result<Plugin> {
    let what = format!("{name} refused at {stage} ({reason})");
    judged(ns, name, &what, |p| {
        verdict(p) == (stage.name().to_string(), reason.to_string())
    })
    .await
}

async fn admitted(ns: &Ns, name: &str) -> anyhow::Result<Plugin> {
    judged(ns, name, &format!("{name} admitted"), |p| {
        verdict(p).0 == "Admitted"
    })
    .await
}

/// The Events about Plugin `name`: (type, reason, note).
async fn events_of(ns: &Ns, name: &str) -> anyhow::Result<Vec<(String, String, String)>> {
    let events: Api<Event> = Api::all(ns.client());
    Ok(events
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|e| {
            e.regarding.as_ref().is_some_and(|r| {
                r.kind.as_deref() == Some("Plugin") && r.name.as_deref() == Some(name)
            })
        })
        .map(|e| {
            (
                e.type_.unwrap_or_default(),
                e.reason.unwrap_or_default(),
                e.note.unwrap_or_default(),
            )
        })
        .collect())
}

/// Waits for an Event about Plugin `name` of this type and reason whose note has `word`.
async fn event_with(
    ns: &Ns,
    name: &str,
    kind: &str,
    reason: &str,
    word: &str,
) -> anyhow::Result<String> {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let events = events_of(ns, name).await?;
        if let Some((_, _, note)) = events
            .iter()
            .find(|(t, r, n)| t == kind && r == reason && n.contains(word))
        {
            return Ok(note.clone());
        }
        if tokio::time::Instant::now() > deadline {
            bail!("no {kind} Event {reason} about Plugin {name} saying {word:?}; saw {events:?}");
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

async fn pods(ns: &Ns, instance: &str, count: usize) -> anyhow::Result<Vec<Pod>> {
    let label = format!("plugins.loop.dev/instance={instance}");
    list_until(
        &ns.api::<Pod>(),
        Some(&label),
        &format!("{count} live pods of {instance}"),
        WAIT,
        |all| {
            all.iter()
                .filter(|p| p.metadata.deletion_timestamp.is_none())
                .count()
                == count
                && all.len() == count
        },
    )
    .await
}

/// Enables `id` in a trusted project with one channel, records demand and waits for its Pod.
async fn running(ns: &Ns, id: &str) -> anyhow::Result<Pod> {
    apply_trusted(
        ns,
        "proj",
        BTreeMap::from([(id.to_string(), entry(true, &[]))]),
    )
    .await?;
    apply(ns, &channel("general", "proj", ChannelKind::Channel, None)).await?;
    let instance = instance_name(id, "general");
    wait::exists(
        &ns.api::<model::resources::PluginInstance>(),
        &instance,
        WAIT,
    )
    .await?;
    record_demand(ns, &instance).await?;
    Ok(pods(ns, &instance, 1).await?.remove(0))
}

async fn install_by_tag(ns: Ns) -> anyhow::Result<()> {
    let _shared = shared().await;
    setup(&ns).await?;
    let id = plugin_id(&ns, "cli");
    // An image of the test's own, under a tag, running as a uid that is not the default.
    let content = ImageContent::for_plugin(&echo_plugin(&id)?).run_as(4242, 4343);
    let images = ns.cluster().plugin_images();
    let pinned = images.push(&id, &content).await?;
    let by_tag = pinned.split_once('@').context("pinned")?.0.to_string();

    let (ok, out, err) = cli(
        &ns,
        &[
            "plugin",
            "install",
            &by_tag,
            "--approve",
            "agent.readonly",
            "--approve",
            "schedule",
            "--controller-namespace",
            CONTROLLER_NAMESPACE,
        ],
    )
    .await?;
    ensure!(ok, "install failed:\n{out}\n{err}");
    ensure!(out.contains(&pinned), "the digest is pinned: {out}");
    // Each capability with what it allows; those not approved said so.
    ensure!(
        err.contains("ui.composer_switch") && err.contains("not approved"),
        "{err}"
    );
    let plugin = admitted(&ns, &id).await?;
    ensure!(plugin.spec.image == pinned, "{}", plugin.spec.image);
    ensure!(plugin.spec.command == ["/echo-plugin"]);
    ensure!(plugin.spec.approved_capabilities == ["agent.readonly", "schedule"]);
    let status = plugin.status.clone().unwrap_or_default();
    let image = status.image.clone().context("status.image")?;
    ensure!((image.run_as_user, image.run_as_group) == (4242, Some(4343)));
    for stage in AdmissionStage::ALL {
        let c = plugin
            .stage_condition(stage)
            .with_context(|| format!("{stage}'s condition"))?;
        ensure!(c.status == ConditionStatus::True, "{stage}: {c:?}");
    }
    // A second install of the same name is refused: upgrade replaces.
    let (ok, _, err) = cli(
        &ns,
        &[
            "plugin",
            "install",
            &by_tag,
            "--approve-all",
            "--controller-namespace",
            CONTROLLER_NAMESPACE,
        ],
    )
    .await?;
    ensure!(!ok && err.contains("upgrade"), "{err}");
    // kubectl shows the stage.
    let table = ns.kubectl(["get", "plugin", &id]).await?;
    ensure!(
        table.contains("STAGE") && table.contains("Admitted"),
        "{table}"
    );
    let (ok, info, err) = cli(&ns, &["plugin", "info", &id]).await?;
    ensure!(ok && info.contains("runs as:   4242:4343"), "{info}{err}");
    ensure!(info.contains("ImageVerified"), "{info}");

    // The Pod runs the image by digest, as the image's USER.
    let pod = running(&ns, &id).await?;
    let spec = pod.spec.context("spec")?;
    ensure!(spec.containers[0].image.as_deref() == Some(pinned.as_str()));
    let psc = spec.security_context.context("securityContext")?;
    ensure!(
        (psc.run_as_user, psc.run_as_group, psc.fs_group) == (Some(4242), Some(4343), Some(4343))
    );

    // Upgrade to a new version by the same tag: the tag is looked up again.
    let mut next = echo_plugin(&id)?;
    next.spec.manifest.version.replace("0.2.0".into());
    let content = ImageContent::for_plugin(&next).run_as(4242, 4343);
    let newer = images.push(&id, &content).await?;
    let (ok, out, err) = cli(
        &ns,
        &[
            "plugin",
            "upgrade",
            &id,
            "--controller-namespace",
            CONTROLLER_NAMESPACE,
        ],
    )
    .await?;
    ensure!(ok, "upgrade failed:\n{out}\n{err}");
    let upgraded = admitted(&ns, &id).await?;
    ensure!(upgraded.spec.image == newer, "{}", upgraded.spec.image);
    ensure!(upgraded.spec.approved_capabilities == ["agent.readonly", "schedule"]);

    let (ok, out, _) = cli(&ns, &["plugin", "remove", &id]).await?;
    ensure!(ok && out.contains("kept"), "{out}");
    wait::deleted(&Api::<Plugin>::all(ns.client()), &id, WAIT).await?;
    Ok(())
}

async fn stages_refuse(ns: Ns) -> anyhow::Result<()> {
    let _shared = shared().await;
    setup(&ns).await?;
    let images = ns.cluster().plugin_images();
    let api: Api<Plugin> = Api::all(ns.client());
    let apply_plugin = |p: Plugin| {
        let api = api.clone();
        async move {
            api.patch(
                &p.name_any(),
                &PatchParams::apply("e2e").force(),
                &Patch::Apply(&p),
            )
            .await
        }
    };
    // Broken images: each refused at the Image stage, naming what is wrong.
    type Break = fn(&mut ImageContent);
    let broken: [(&str, Break, &str, &str); 4] = [
        (
            "root",
            |c| c.user = Some("0:0".into()),
            "ImageUserRoot",
            "root",
        ),
        (
            "nolabel",
            |c| c.label = false,
            "ImageLabelMissing",
            "dev.loop.plugin",
        ),
        ("nodata", |c| c.data = false, "ImageDataMissing", "/data"),
        (
            "bigicon",
            |c| {
                // 16 KB as the reference's sizes count them (16,384 bytes), and a byte.
                c.files
                    .insert("ui/mode.svg".into(), vec![b' '; 16 * 1024 + 1]);
            },
            "ImageBundleInvalid",
            "16385 bytes",
        ),
    ];
    let mut names = Vec::new();
    for (suffix, brk, reason, word) in broken {
        let id = plugin_id(&ns, suffix);
        let mut plugin = echo_plugin(&id)?;
        let mut content = ImageContent::for_plugin(&plugin);
        brk(&mut content);
        plugin.spec.image = images.push(&id, &content).await?;
        apply_plugin(plugin).await?;
        names.push((id, AdmissionStage::Image, reason, word));
    }
    // The image ships another plugin.json than spec.manifest.
    let id = plugin_id(&ns, "mismatch");
    let plugin = echo_plugin(&id)?;
    let mut edited = plugin.clone();
    edited
        .spec
        .manifest
        .rest
        .insert("name".into(), "Echo, edited after the build".into());
    let pinned = images.push(&id, &ImageContent::for_plugin(&plugin)).await?;
    edited.spec.image = pinned;
    apply_plugin(edited).await?;
    names.push((id, AdmissionStage::Image, "ManifestMismatch", "name"));
    // A manifest the rules refuse never reaches the image.
    let id = plugin_id(&ns, "badgate");
    let mut plugin = echo_plugin(&id)?;
    plugin.spec.manifest.rest.insert(
        "gate".into(),
        serde_json::json!({ "files": [{ "paths": ["/data/**"], "operations": ["remove"], "decision": "deny" }] }),
    );
    let plugin = install(&ns, &plugin).await?;
    names.push((
        plugin.name_any(),
        AdmissionStage::Manifest,
        "InvalidManifest",
        "gate.files[0].operations[0]",
    ));
    // An approved capability the manifest does not declare.
    let id = plugin_id(&ns, "caps");
    let mut plugin = echo_plugin(&id)?;
    plugin.spec.approved_capabilities.push("files.read".into());
    install(&ns, &plugin).await?;
    names.push((
        id,
        AdmissionStage::Capabilities,
        "CapabilityNotDeclared",
        "files.read",
    ));

    for (name, stage, reason, word) in &names {
        let p = refused_at(&ns, name, *stage, reason).await?;
        let c = p.stage_condition(*stage).context("the stage's condition")?;
        ensure!(c.status == ConditionStatus::False, "{name}: {c:?}");
        ensure!(
            c.message.contains(word),
            "{name}: {:?} should name {word}",
            c.message
        );
        // Later stages were not reached.
        for later in AdmissionStage::ALL.iter().filter(|s| *s > stage) {
            let c = p.stage_condition(*later).context("later condition")?;
            ensure!(
                c.status == ConditionStatus::Unknown && c.reason == "NotReached",
                "{name}: {later}: {c:?}"
            );
        }
        event_with(&ns, name, "Warning", reason, &format!("{stage} stage")).await?;
    }
    for (name, ..) in names {
        api.delete(&name, &DeleteParams::default()).await?;
    }
    Ok(())
}

/// Issue 39's reproduction: an image whose plugin.json nests 20,000 arrays deep (40 KB of
/// `[`), named by a Plugin with a harmless spec.manifest. It aborted the controller with a
/// stack overflow in the Image stage; now it is refused there, naming the limit, and the
/// controller goes on: it admits a plugin applied after it, refuses that plugin's tampered
/// manifest and admits it again once put back (the README's tour), and is the same process
/// (or the same Pods, with no restart) throughout.
async fn hostile_image(ns: Ns) -> anyhow::Result<()> {
    let _shared = shared().await;
    setup(&ns).await?;
    let before = controller_incarnation(&ns).await?;
    let images = ns.cluster().plugin_images();
    let api: Api<Plugin> = Api::all(ns.client());

    let deep = plugin_id(&ns, "deep");
    let mut plugin = echo_plugin(&deep)?;
    let mut content = ImageContent::for_plugin(&plugin);
    content.plugin_json = Some(format!(
        r#"{{"id": "{deep}", "version": "1.0.0", "name": "d", "api": "1", "x": {}{}}}"#,
        "[".repeat(20_000),
        "]".repeat(20_000)
    ));
    plugin.spec.image = images.push(&deep, &content).await?;
    api.patch(
        &deep,
        &PatchParams::apply("e2e").force(),
        &Patch::Apply(&plugin),
    )
    .await?;
    let refused = refused_at(&ns, &deep, AdmissionStage::Image, "ImagePluginJsonInvalid").await?;
    let c = refused
        .stage_condition(AdmissionStage::Image)
        .context("the Image stage's condition")?;
    ensure!(
        c.message.contains("deeper than 64 levels") && c.message.contains("line 1"),
        "the refusal names the limit and where: {:?}",
        c.message
    );

    // Everything else of its kind is still reconciled.
    let good = plugin_id(&ns, "after-deep");
    install(&ns, &echo_plugin(&good)?).await?;
    admitted(&ns, &good).await?;
    let tamper = |version: &str| serde_json::json!({"spec": {"manifest": {"version": version}}});
    api.patch(
        &good,
        &PatchParams::default(),
        &Patch::Merge(tamper("6.6.6")),
    )
    .await?;
    refused_at(&ns, &good, AdmissionStage::Image, "ManifestMismatch").await?;
    api.patch(
        &good,
        &PatchParams::default(),
        &Patch::Merge(tamper("0.1.0")),
    )
    .await?;
    admitted(&ns, &good).await?;

    let after = controller_incarnation(&ns).await?;
    ensure!(
        before == after,
        "the controller died on the hostile image: {before} before, {after} after"
    );
    for name in [deep, good] {
        api.delete(&name, &DeleteParams::default()).await?;
    }
    Ok(())
}

/// HostConfig with this signature policy (the suite's otherwise).
async fn policy(ns: &Ns, mode: &str, trusted: &[&str]) -> anyhow::Result<()> {
    let mut spec = host_spec(true);
    spec.plugins.signature_mode = SignatureMode::parse(mode);
    spec.plugins.trusted_publisher_keys = trusted.iter().map(|k| k.to_string()).collect();
    apply_host(ns.client(), spec).await
}

async fn signatures(ns: Ns) -> anyhow::Result<()> {
    let _exclusive = exclusive().await;
    setup(&ns).await?;
    let result = signatures_under_policies(&ns).await;
    apply_host(ns.client(), host_spec(true)).await?;
    result
}

async fn signatures_under_policies(ns: &Ns) -> anyhow::Result<()> {
    let dir = ns.cluster().run_dir().join(format!("keys-{}", ns.name()));
    std::fs::create_dir_all(&dir)?;
    let key = dir.join("publisher.pem");
    let other_key = dir.join("other.pem");
    let (ok, public, err) = cli(ns, &["plugin", "keygen", "--out", key.to_str().unwrap()]).await?;
    ensure!(ok, "{err}");
    let public = public.trim().to_string();
    let (ok, other, err) = cli(
        ns,
        &["plugin", "keygen", "--out", other_key.to_str().unwrap()],
    )
    .await?;
    ensure!(ok, "{err}");
    let other = other.trim().to_string();

    let images = ns.cluster().plugin_images();
    // Each plugin's image, pushed and signed (or not) with the CLI.
    let signed_by = |id: &str, key: Option<&std::path::Path>| {
        let id = id.to_string();
        let key = key.map(|k| k.to_path_buf());
        async move {
            let plugin = echo_plugin(&id)?;
            let pinned = images.push(&id, &ImageContent::for_plugin(&plugin)).await?;
            if let Some(key) = key {
                let (ok, out, err) = cli(
                    ns,
                    &["plugin", "sign", "--key", key.to_str().unwrap(), &pinned],
                )
                .await?;
                ensure!(ok && out.contains("published"), "{out}{err}");
            }
            anyhow::Ok(pinned)
        }
    };
    let good = plugin_id(ns, "sgood");
    let unsigned = plugin_id(ns, "sunsigned");
    let untrusted = plugin_id(ns, "suntrusted");
    let good_ref = signed_by(&good, Some(&key)).await?;
    let unsigned_ref = signed_by(&unsigned, None).await?;
    let untrusted_ref = signed_by(&untrusted, Some(&other_key)).await?;

    policy(ns, "strict", &[&public]).await?;
    // Installed with the CLI: strict refuses what it must before anything is written.
    let install = |reference: String| async move {
        cli(
            ns,
            &[
                "plugin",
                "install",
                &reference,
                "--approve-all",
                "--controller-namespace",
                CONTROLLER_NAMESPACE,
            ],
        )
        .await
    };
    let (ok, out, err) = install(good_ref.clone()).await?;
    ensure!(ok, "the signed plugin installs under strict:\n{out}{err}");
    let p = admitted(ns, &good).await?;
    let sig = p
        .spec
        .signature
        .clone()
        .context("spec.signature copied at install")?;
    ensure!(sig.public_key == public);
    ensure!(
        p.stage_condition(AdmissionStage::Signature)
            .map(|c| c.reason.as_str())
            == Some("SignatureVerified")
    );
    let (ok, _, err) = install(unsigned_ref.clone()).await?;
    ensure!(
        !ok && err.contains("Unsigned"),
        "strict refuses the unsigned at install: {err}"
    );
    let (ok, _, err) = install(untrusted_ref.clone()).await?;
    ensure!(
        !ok && err.contains("UntrustedKey") && err.contains(&other),
        "{err}"
    );

    // Plugins applied around the CLI are refused by the controller the same way.
    let api: Api<Plugin> = Api::all(ns.client());
    let put = |mut p: Plugin, image: String, signature: Option<PluginSignature>| {
        let api = api.clone();
        p.spec.image = image;
        p.spec.command = vec!["/echo-plugin".into()];
        p.spec.signature = signature;
        async move {
            api.patch(
                &p.name_any(),
                &PatchParams::apply("e2e").force(),
                &Patch::Apply(&p),
            )
            .await
        }
    };
    put(echo_plugin(&unsigned)?, unsigned_ref.clone(), None).await?;
    let note_of = refused_at(ns, &unsigned, AdmissionStage::Signature, "Unsigned").await?;
    ensure!(verdict(&note_of).1 == "Unsigned");
    put(echo_plugin(&untrusted)?, untrusted_ref.clone(), None).await?;
    let p = refused_at(ns, &untrusted, AdmissionStage::Signature, "UntrustedKey").await?;
    let message = &p
        .stage_condition(AdmissionStage::Signature)
        .unwrap()
        .message;
    ensure!(
        message.contains(&other) && message.contains(&untrusted),
        "{message}"
    );
    // A tampered payload: its own signature, the version in the payload changed after.
    let tampered = plugin_id(ns, "stampered");
    let tampered_ref = signed_by(&tampered, Some(&key)).await?;
    let r = oci::ImageRef::parse(&tampered_ref)?;
    let records =
        oci::signing::publish::fetch_signatures(images.client(), &r, r.digest().context("pinned")?)
            .await?;
    let record = records.first().context("the published signature")?;
    let forged = PluginSignature {
        payload: record.payload.replace("\"0.1.0\"", "\"9.9.9\""),
        signature: record.signature.clone(),
        public_key: record.public_key.clone(),
    };
    ensure!(
        forged.payload != record.payload,
        "the payload names the version"
    );
    put(echo_plugin(&tampered)?, tampered_ref, Some(forged)).await?;
    refused_at(ns, &tampered, AdmissionStage::Signature, "InvalidSignature").await?;
    // The good plugin's signature on another image: another digest, refused in every mode.
    let moved = plugin_id(ns, "smoved");
    let moved_ref = signed_by(&moved, None).await?;
    put(echo_plugin(&moved)?, moved_ref, Some(sig.clone())).await?;
    refused_at(
        ns,
        &moved,
        AdmissionStage::Signature,
        "SignatureDigestMismatch",
    )
    .await?;

    // Permissive: the unsigned plugin is admitted, with a Warning Event and a condition.
    policy(ns, "permissive", &[&public]).await?;
    let p = admitted(ns, &unsigned).await?;
    let c = p
        .stage_condition(AdmissionStage::Signature)
        .context("signature condition")?;
    ensure!(
        c.status == ConditionStatus::True && c.reason == "Unsigned",
        "{c:?}"
    );
    event_with(ns, &unsigned, "Warning", "Unsigned", "permissive").await?;
    refused_at(
        ns,
        &moved,
        AdmissionStage::Signature,
        "SignatureDigestMismatch",
    )
    .await?;

    // Strict again, the good plugin running; its key removed from the trusted list stops it.
    policy(ns, "strict", &[&public]).await?;
    admitted(ns, &good).await?;
    running(ns, &good).await?;
    policy(ns, "strict", &[&other]).await?;
    refused_at(ns, &good, AdmissionStage::Signature, "UntrustedKey").await?;
    pods(ns, &instance_name(&good, "general"), 0).await?;
    // The Event names the key.
    event_with(ns, &good, "Warning", "UntrustedKey", &public).await?;
    // A mode nobody knows acts as strict, and says so.
    policy(ns, "stricct", &[&public]).await?;
    judged(ns, &unsigned, "refused, naming the unknown mode", |p| {
        verdict(p) == ("Signature".into(), "Unsigned".into())
            && p.stage_condition(AdmissionStage::Signature)
                .is_some_and(|c| {
                    c.message.contains("\"stricct\"") && c.message.contains("acts as strict")
                })
    })
    .await?;

    for name in [&good, &unsigned, &untrusted, &tampered, &moved] {
        let _ = api.delete(name, &DeleteParams::default()).await;
    }
    Ok(())
}

async fn name_conflicts(ns: Ns) -> anyhow::Result<()> {
    let _shared = shared().await;
    setup(&ns).await?;
    let api: Api<Plugin> = Api::all(ns.client());
    let first = plugin_id(&ns, "na");
    let second = plugin_id(&ns, "nb");
    let reserved = plugin_id(&ns, "nr");
    // Both plugins' only tool is named alike.
    let tool = format!("echo_{}", ns.name().rsplit('-').next().unwrap_or("x"));
    let with_tool = |id: &str, tool: &str| -> anyhow::Result<Plugin> {
        let mut p = echo_plugin(id)?;
        p.spec.manifest.rest.insert(
            "tools".into(),
            serde_json::json!([{ "name": tool, "description": "echo", "input_schema": { "type": "object" } }]),
        );
        p.spec.manifest.rest.insert(
            "agents".into(),
            serde_json::json!([{ "id": "say", "read_only": true, "tools": [tool] }]),
        );
        Ok(p)
    };
    // The plugin last in name order comes first in time: it holds the name, for now.
    install(&ns, &with_tool(&second, &tool)?).await?;
    let p = admitted(&ns, &second).await?;
    ensure!(p.status.unwrap().tools[0].mcp_name == format!("plugin_{tool}"));
    // Created later, first in package-name order (zeroclaw: "Tool plugins register in
    // package-name order"): it takes the name over, and the one that held it is refused,
    // naming who holds it and why.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    install(&ns, &with_tool(&first, &tool)?).await?;
    let p = admitted(&ns, &first).await?;
    ensure!(p.status.unwrap().tools[0].mcp_name == format!("plugin_{tool}"));
    let p = refused_at(
        &ns,
        &second,
        AdmissionStage::Names,
        "plugin_tool_name_conflict",
    )
    .await?;
    let message = &p.stage_condition(AdmissionStage::Names).unwrap().message;
    ensure!(
        message.contains(&format!(
            "{first:?} comes before {second:?} in package-name order"
        )),
        "{message}"
    );
    event_with(&ns, &second, "Warning", "plugin_tool_name_conflict", &first).await?;
    // Who changed last does not matter either: edits of either leave the order as it is.
    for id in [&second, &first] {
        let mut edited = with_tool(id, &tool)?;
        edited.spec.approved_capabilities.pop();
        install(&ns, &edited).await?;
    }
    admitted(&ns, &first).await?;
    refused_at(
        &ns,
        &second,
        AdmissionStage::Names,
        "plugin_tool_name_conflict",
    )
    .await?;
    // `__` is reserved even when nobody holds the name.
    install(&ns, &with_tool(&reserved, "a__b")?).await?;
    refused_at(
        &ns,
        &reserved,
        AdmissionStage::Names,
        "plugin_tool_name_reserved",
    )
    .await?;
    // The holder goes: the second plugin is admitted.
    api.delete(&first, &DeleteParams::default()).await?;
    admitted(&ns, &second).await?;
    for name in [&second, &reserved] {
        api.delete(name, &DeleteParams::default()).await?;
    }
    Ok(())
}
