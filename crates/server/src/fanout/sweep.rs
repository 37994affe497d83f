//! Drops chat state a plugin may no longer have: the reference's "Loop keeps each switch's
//! state per chat, and forgets it when ... the plugin ... loses ui.composer_switch, stops
//! declaring the switch ..." and "Loop lets [the live session] go when the plugin may no
//! longer use it there". (A chat or plugin removed, or a project that stops enabling the
//! plugin, deletes the instance, and its state with it.) Runs when Plugins or instances change.

use std::collections::BTreeSet;

use kube::ResourceExt;
use tokio::sync::watch;

use crate::delivery::target::approved;
use std::sync::Arc;

use crate::calls::Calls;
use crate::index::{Compiled, InstanceKey};
use crate::status::StatusWriter;
use crate::status::{SwitchChange, SwitchEdit};
use model::manifest::Capability;
use model::resources::PluginInstanceStatus;

/// What is stale in an instance's state, given its plugin's manifest and approved capabilities.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stale {
    /// The switch edit that drops what is stale, when some switch state is.
    pub switches: Option<SwitchEdit>,
    /// The live hold is on without `live.control` approved.
    pub hold: bool,
}

pub fn stale(
    status: &PluginInstanceStatus,
    compiled: &Compiled,
    approved: &BTreeSet<Capability>,
) -> Stale {
    let edit = SwitchEdit::for_plugin(SwitchChange::Sweep, &compiled.manifest, approved);
    let kept = edit.apply(&status.switches);
    Stale {
        switches: (kept != status.switches).then_some(edit),
        hold: status.live_hold && !approved.contains(&Capability::LiveControl),
    }
}

/// Sweeps every instance whenever Plugins or instances change, while leading.
pub async fn run(calls: Calls, status: Arc<dyn StatusWriter>, mut leading: watch::Receiver<bool>) {
    let mut plugins = calls.index().changed.plugins.subscribe();
    let mut instances = calls.index().changed.instances.subscribe();
    loop {
        super::until_leading(&mut leading).await;
        plugins.mark_unchanged();
        instances.mark_unchanged();
        sweep_all(&calls, status.as_ref()).await;
        tokio::select! {
            _ = plugins.changed() => {}
            _ = instances.changed() => {}
            _ = super::until_not_leading(&mut leading) => {}
        }
    }
}

async fn sweep_all(calls: &Calls, status_writer: &dyn StatusWriter) {
    let index = calls.index();
    for instance in index.instances.state() {
        let Some(status) = instance.status.as_ref() else {
            continue;
        };
        if status.switches.is_empty() && !status.live_hold {
            continue;
        }
        let Some(plugin) = index.plugin(&instance.spec.plugin) else {
            continue;
        };
        let Ok(compiled) = index.manifests.get(&plugin) else {
            continue;
        };
        let found = stale(status, &compiled, &approved(&plugin, &compiled));
        let key = InstanceKey::new(
            &instance.namespace().unwrap_or_default(),
            &instance.name_any(),
        );
        if let Some(edit) = &found.switches {
            match status_writer.switches(&key, edit).await {
                Ok(_) => {
                    tracing::info!(instance = %key, "dropped the state of switches the plugin no longer shows")
                }
                Err(e) => {
                    tracing::warn!(instance = %key, error = %e, "could not drop stale switch state")
                }
            }
        }
        if found.hold {
            match status_writer.live_hold(&key, false).await {
                Ok(_) => {
                    tracing::info!(instance = %key, "let the live session go: live.control is not approved")
                }
                Err(e) => {
                    tracing::warn!(instance = %key, error = %e, "could not let the live session go")
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use model::resources::SwitchState;

    fn compiled() -> Compiled {
        Compiled::new(
            model::manifest::from_value(&serde_json::json!({
                "id": "echo", "name": "Echo", "version": "1", "api": "1",
                "capabilities": ["ui.composer_switch", "live.control"],
                "ui": { "composer_switches": [
                    { "id": "mode", "label": "Mode", "icon": "ui/mode.svg" }
                ] },
                "live": { "control": ["x"] },
            }))
            .unwrap(),
        )
    }

    fn on(id: &str) -> SwitchState {
        SwitchState {
            id: id.into(),
            on: true,
            title: None,
            error: false,
            busy: false,
        }
    }

    #[test]
    fn state_outside_what_the_plugin_may_show_is_stale() {
        let all: BTreeSet<_> = [Capability::UiComposerSwitch, Capability::LiveControl].into();
        let status = PluginInstanceStatus {
            switches: vec![on("mode")],
            live_hold: true,
            ..Default::default()
        };
        assert_eq!(stale(&status, &compiled(), &all), Stale::default());
        let gone = PluginInstanceStatus {
            switches: vec![on("mode"), on("removed")],
            ..status.clone()
        };
        let found = stale(&gone, &compiled(), &all);
        assert_eq!(
            found.switches.unwrap().apply(&gone.switches),
            vec![on("mode")]
        );
        let none = BTreeSet::new();
        let found = stale(&status, &compiled(), &none);
        assert!(found.hold);
        assert!(found.switches.unwrap().apply(&status.switches).is_empty());
    }
}
