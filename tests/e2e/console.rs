//! The console (`/console/` on the API server, `crates/server/src/console`) in a real browser:
//! headless Chromium, Debian's package, driven over the DevTools protocol by
//! `testkit::browser`, signed in as a person holding the chart's host API callers' role. Every
//! assertion reads the browser: the console's and the frames' DOM, the bridge's own counts,
//! the browser's console and Log reports (a refused frame navigation), and for the host's
//! state the host API itself.
//!
//! - `the_echo_panel_appears_and_its_bridge_answers`: signing in through the URL's fragment
//!   (the token gone from the address), the chats listed, the echo example's panel framed from
//!   its signed link, its `context.get`, `settings.get` and an `/x` call through `api.request`
//!   answered; a frame that navigates itself out of the bundles refused by the browser;
//!   signing out, and in again with the token pasted into the form.
//! - `a_posted_card_shows_in_the_drawer_until_marked_read_and_as_a_note_once_its_plugin_is_removed`:
//!   the card a plugin posts appears with the unread counts (drawer and sidebar), its page
//!   framed with its context and data, grown by `ui.resize`, told `theme.changed` when the
//!   theme toggles; the agent run the plugin started listed; "Mark read" clears both counts;
//!   the plugin removed, the card shows the note.
//! - `a_switch_click_and_stop_change_what_the_console_shows`: a composer switch's click goes
//!   to the plugin and the pill shows its answer; Stop stops the container and the console
//!   lists again on `plugins.changed`; once the project stops enabling the plugin, the pane
//!   already open says so, until it enables it again.
//! - `the_keyboard_reaches_the_chats_the_panes_and_the_drawer`: Tab alone, from the top,
//!   reaches a chat, the pane's frame and the drawer's buttons in that order, with a visible
//!   focus ring; Enter chooses a chat, and the focus stays on it while the lists refresh.
//!
//! - `an_agents_tool_call_waits_in_the_drawer_until_a_person_approves_or_denies_it`: an
//!   agent run's call of the plugin's tool (the project's risk profile asks for every tool)
//!   shows as a card in the drawer, with its input and the time left, and a count on the
//!   chat's row; Approve once runs it with that input and the run ends on its result; Deny
//!   with a reason refuses the next run's call with that reason and the run ends on that; the
//!   decisions are listed with who made them.
//!
//! - `settings_a_setting_edited_reaches_the_pane_and_a_project_edit_waits_for_the_trust`:
//!   Settings → Plugins as a person with the chart's project editor and trustee roles: a
//!   setting saved reaches the pane as `settings.changed`; turning the plugin off waits for the
//!   owner's trust, then takes it out of the chat; the global config refuses, naming the right;
//!   open, it lists again on `plugins.changed` (a change made elsewhere shows, a form being
//!   edited is kept and says it moved).
//! - `settings_upgrade_reviews_the_new_capability_then_upgrades_and_remove_deletes_the_plugin`:
//!   Global → Review upgrade of the version pushed under the installed tag shows the
//!   capability it newly asks for; approved, Upgrade replaces the Plugin (admitted again);
//!   Remove deletes it; as a person bound to the chart's plugin-operator role.
//! - `tasks_a_task_made_edited_turned_off_and_deleted_from_the_tasks_panel_once_trusted`: New
//!   task → Plugin writes the project's entry and the task is listed once the config is
//!   trusted; its own options (Worktree, Auto-delete) set in a row under it, a bad value
//!   refused there first; its schedule edited, turned off and deleted the same way.
//! - `the_agent_view_shows_a_runs_prompt_tool_call_and_answer_beside_its_plugins_pane`: once the
//!   plugin started a run, its pane's agent label opens the run's chat beside the panel (the
//!   prompt, the tool call with its input and answer, the final message), read-only.
//! - `panes_are_added_from_the_menu_closed_and_kept_and_a_singleton_is_shown_once`: the
//!   add-pane menu lists the chat's plugins' panels, a singleton shown already disabled and
//!   refused; a pane closed stays closed across a reload (the layout kept per person and chat
//!   in the browser), and comes back from the menu.
//! - `a_plugins_ui_command_is_carried_out_in_the_console_and_answered_step_by_step`: the
//!   console following the chosen chat's UI commands carries out a plugin's command (the chat
//!   chosen, its pane brought forward, its message shown) and answers each step, the composer
//!   it does not have as `unsupported`.
//!
//! The screenshots of the README (`docs/images/console-*.png`) are the first two tests'; set
//! `LOOP_PLUGINS_CONSOLE_SHOTS=docs/images` to write them there.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context, ensure};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{ListParams, Patch, PatchParams};
use kube::{Api, ResourceExt};
use model::resources::Plugin;
use serde_json::{Value, json};
use testkit::chat_model::Step;

use crate::console_support::{ConsoleWorld, SHOW};
use crate::controller_support::{apply, apply_trusted, bind_approver, entry, project};
use crate::runs::{put_back, start_model, use_runner_with};
use crate::support::{E2eTest, Ns, test};

pub fn tests() -> Vec<E2eTest> {
    let timeout = Duration::from_secs(240);
    vec![
        test(
            "console::the_echo_panel_appears_and_its_bridge_answers",
            the_echo_panel_appears_and_its_bridge_answers,
        )
        .timeout(timeout),
        test(
            "console::a_posted_card_and_a_notification_show_in_the_drawer_until_marked_read_and_a_card_as_a_note_once_its_plugin_is_removed",
            a_posted_card_in_the_drawer,
        )
        .timeout(timeout),
        test(
            "console::a_switch_click_and_stop_change_what_the_console_shows",
            a_switch_click_and_stop,
        )
        .timeout(timeout),
        test(
            "console::the_keyboard_reaches_the_chats_the_panes_and_the_drawer",
            the_keyboard_reaches_everything,
        )
        .timeout(timeout),
        test(
            "console::an_agents_tool_call_waits_in_the_drawer_until_a_person_approves_or_denies_it",
            an_agents_call_waits_in_the_drawer,
        )
        .timeout(timeout),
        test(
            "console::settings_a_setting_edited_reaches_the_pane_and_a_project_edit_waits_for_the_trust",
            settings_edit_and_trust,
        )
        .timeout(timeout),
        test(
            "console::settings_upgrade_reviews_the_new_capability_then_upgrades_and_remove_deletes_the_plugin",
            settings_upgrade_and_remove,
        )
        .timeout(timeout),
        test(
            "console::tasks_a_task_made_edited_turned_off_and_deleted_from_the_tasks_panel_once_trusted",
            tasks_panel,
        )
        .timeout(timeout),
        test(
            "console::the_agent_view_shows_a_runs_prompt_tool_call_and_answer_beside_its_plugins_pane",
            the_agent_view,
        )
        .timeout(timeout),
        test(
            "console::panes_are_added_from_the_menu_closed_and_kept_and_a_singleton_is_shown_once",
            panes_from_the_menu,
        )
        .timeout(timeout),
        test(
            "console::a_plugins_ui_command_is_carried_out_in_the_console_and_answered_step_by_step",
            a_ui_command_is_carried_out,
        )
        .timeout(timeout),
    ]
}

/// Settings → Plugins as a person with the chart's project editor and trustee roles: a
/// setting edited reaches the echo pane as settings.changed; turning the plugin off waits for
/// the owner's trust, then takes it out of the chat; the global config, which the person may
/// not edit, refuses saying which right is missing.
async fn settings_edit_and_trust(ns: Ns) -> anyhow::Result<()> {
    // Bound before the console signs in: the host API keeps each RBAC answer for a while.
    crate::controller_support::bind_chart_role(&ns, "person", "project-editor").await?;
    crate::controller_support::bind_chart_role(&ns, "person", "project-trustee").await?;
    let world = ConsoleWorld::start(&ns).await?;
    let page = &world.page;
    let frame = echo_pane_connected(&world).await?;
    let plugin = world.plugin.clone();
    let form = format!("#settings-body fieldset[data-plugin=\"{plugin}\"]");
    let control = |what: &str| format!("set-{plugin}-{what}");
    page.click("#settings-open").await?;
    world
        .wait(
            "the settings of the project's plugins",
            &format!(
                "document.getElementById('settings').open \
                 && document.querySelector('{form} #{}') !== null \
                 && /runs in this project/.test(document.querySelector('{form}').textContent) \
                 && document.querySelector('#settings-body .settings-trust')?.dataset.trust === 'Trusted'",
                control("setting-verbose")
            ),
        )
        .await?;
    // A setting: saved, and the pane told. Each value is set as typing sets it, with its
    // change event: a form being edited is kept when Settings lists again on plugins.changed.
    page.evaluate(&format!(
        "(() => {{ const e = document.getElementById('{}'); e.value = 'true'; \
         e.dispatchEvent(new Event('change', {{bubbles: true}})); return true; }})()",
        control("setting-verbose")
    ))
    .await?;
    page.click(&format!("{form} .settings-save")).await?;
    world
        .wait(
            "the setting saved",
            "/^Saved /.test(document.getElementById('settings-status').textContent)",
        )
        .await?;
    if let Err(e) = frame
        .wait_for(
            "document.getElementById('verbose')?.textContent === 'on'",
            SHOW,
        )
        .await
    {
        anyhow::bail!("the pane's settings.changed: {e}\n  {}", world.reports());
    }
    // Turned off in the project: saved, but it waits for the trust.
    page.evaluate(&format!(
        "(() => {{ const e = document.getElementById('{}'); e.value = 'false'; \
         e.dispatchEvent(new Event('change', {{bubbles: true}})); return true; }})()",
        control("enabled")
    ))
    .await?;
    page.click(&format!("{form} .settings-save")).await?;
    world
        .wait(
            "the project's change waiting for the trust",
            &format!(
                "document.querySelector('#settings-body .settings-trust')?.dataset.trust === 'LastApproved' \
                 && document.getElementById('settings-trust') !== null \
                 && /runs in this project · a change waits/.test(document.querySelector('{form}').textContent)"
            ),
        )
        .await?;
    world.screenshot(&ns, "settings").await?;
    // Readable in the dark theme too (the dialog takes the page's variables).
    page.evaluate("document.getElementById('theme').click(); true")
        .await?;
    world
        .wait(
            "the dark theme behind the dialog",
            "document.documentElement.dataset.scheme === 'dark'",
        )
        .await?;
    world.screenshot(&ns, "settings-dark").await?;
    page.evaluate("document.getElementById('theme').click(); true")
        .await?;
    // The global config: this person may not edit it, and is told which right is missing.
    page.click("#settings-global").await?;
    page.evaluate(&format!(
        "(() => {{ const e = document.getElementById('{}'); e.value = 'true'; \
         e.dispatchEvent(new Event('change', {{bubbles: true}})); return true; }})()",
        control("setting-verbose")
    ))
    .await?;
    page.click(&format!("{form} .settings-save")).await?;
    world
        .wait(
            "the global edit refused",
            "document.getElementById('settings-status').classList.contains('error') \
             && /hostconfigs/.test(document.getElementById('settings-status').textContent)",
        )
        .await?;
    world.screenshot(&ns, "settings-refused").await?;
    // Trusted: the plugin no longer runs in the project, and its open pane says so.
    page.click("#settings-project").await?;
    page.click("#settings-trust").await?;
    world
        .wait(
            "the config trusted",
            &format!(
                "document.querySelector('#settings-body .settings-trust')?.dataset.trust === 'Trusted' \
                 && /does not run in this project/.test(document.querySelector('{form}').textContent)"
            ),
        )
        .await?;
    page.click("#settings-close").await?;
    world
        .wait(
            "the pane saying its plugin no longer runs here",
            "[...document.querySelectorAll('#panes section.pane .note')].some(n => !n.hidden)",
        )
        .await?;
    // Open Settings lists the plugins again on plugins.changed (as the reference's does): a
    // change made elsewhere (here through the Kubernetes API) shows without a click, and a
    // form the person is editing keeps what they typed.
    page.click("#settings-open").await?;
    world
        .wait(
            "the settings opened again, verbose on",
            &format!(
                "document.getElementById('settings').open \
                 && document.getElementById('{}')?.value === 'true'",
                control("setting-verbose")
            ),
        )
        .await?;
    page.evaluate(&format!(
        "(() => {{ const e = document.getElementById('{}'); e.value = 'true'; \
         e.dispatchEvent(new Event('change', {{bubbles: true}})); return true; }})()",
        control("enabled")
    ))
    .await?;
    ns.api::<model::resources::Project>()
        .patch(
            "proj",
            &PatchParams::default(),
            &Patch::Merge(json!({
                "spec": { "plugins": { plugin.clone(): { "settings": { "verbose": false } } } }
            })),
        )
        .await?;
    world
        .wait(
            "the change made elsewhere shown, the edit in progress kept",
            &format!(
                "document.querySelector('#settings-body .settings-trust')?.dataset.trust === 'LastApproved' \
                 && document.getElementById('{}')?.value === 'true' \
                 && document.querySelector('{form} .stale') !== null",
                control("enabled")
            ),
        )
        .await?;
    page.evaluate(&format!(
        "document.querySelector('{form}').scrollIntoView({{block: 'center'}}); true"
    ))
    .await?;
    world.screenshot(&ns, "settings-stale").await?;
    page.click("#settings-close").await?;
    // By keyboard alone: Enter on Settings opens it with the focus inside, Escape closes it
    // and gives the focus back.
    page.evaluate("document.getElementById('settings-open').focus(); true")
        .await?;
    page.press("Enter", false).await?;
    world
        .wait(
            "the settings opened by Enter, the focus inside",
            "document.getElementById('settings').open \
             && document.getElementById('settings').contains(document.activeElement)",
        )
        .await?;
    page.press("Escape", false).await?;
    world
        .wait(
            "the settings closed by Escape, the focus back on Settings",
            "!document.getElementById('settings').open \
             && document.activeElement?.id === 'settings-open'",
        )
        .await?;
    Ok(())
}

/// Settings → Plugins → Global as a person bound to the chart's plugin-operator role: Review
/// upgrade pulls the version pushed under the installed tag and shows the capability it newly
/// asks for; approved there, Upgrade replaces the Plugin (the new image, the approval; the
/// controller admits it); Remove deletes it.
async fn settings_upgrade_and_remove(ns: Ns) -> anyhow::Result<()> {
    // The chart's roles applied (with the controller), then bound before the console signs
    // in: the host API keeps each RBAC answer for a while.
    crate::controller_support::setup(&ns).await?;
    let binding = crate::operate::bind_operator_role(&ns, "person").await?;
    // The host API keeps each RBAC answer for a while: the console signs in only once the
    // authorizer has the binding (a refusal seen before would be kept).
    let user = format!("system:serviceaccount:{}:person", ns.name());
    let update = crate::chart::Check::cluster("update", "plugins.loop.dev", "plugins");
    let until = tokio::time::Instant::now() + Duration::from_secs(30);
    while !crate::chart::allowed(ns.client(), &user, &update).await? {
        ensure!(
            tokio::time::Instant::now() < until,
            "the plugin-operator binding not in force after 30 s"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let outcome = upgrade_and_remove(&ns).await;
    binding.remove().await?;
    outcome
}

async fn upgrade_and_remove(ns: &Ns) -> anyhow::Result<()> {
    let world = ConsoleWorld::start(ns).await?;
    let page = &world.page;
    let plugin = world.plugin.clone();
    let form = format!("#settings-body fieldset[data-plugin=\"{plugin}\"]");
    let next = crate::console_support::push_next_version(ns, &plugin).await?;
    page.click("#settings-open").await?;
    world
        .wait(
            "the settings open",
            &format!("document.querySelector('{form}') !== null"),
        )
        .await?;
    page.click("#settings-global").await?;
    world
        .wait(
            "the global config's form with Upgrade",
            &format!("document.querySelector('{form} .upgrade-review-open') !== null"),
        )
        .await?;
    page.click(&format!("{form} .upgrade-review-open")).await?;
    world
        .wait(
            "the review: memory.read new, asked for",
            &format!(
                "/0\\.1\\.0 → 0\\.2\\.0 · asks for 1 new capability/.test(document.querySelector('{form} .upgrade-summary')?.textContent ?? '') \
                 && document.querySelector('{form} li[data-before=new] input[data-capability=\"memory.read\"]') !== null \
                 && !document.querySelector('{form} .upgrade-apply').disabled"
            ),
        )
        .await?;
    page.evaluate(&format!(
        "document.querySelector('{form} .plugin-upgrade').scrollIntoView({{block: 'center'}}); true"
    ))
    .await?;
    world.screenshot(ns, "settings-upgrade").await?;
    page.click(&format!("{form} input[data-capability=\"memory.read\"]"))
        .await?;
    page.click(&format!("{form} .upgrade-apply")).await?;
    world
        .wait(
            "the upgrade written",
            "/^Upgraded /.test(document.getElementById('settings-status').textContent)",
        )
        .await?;
    let plugins: Api<Plugin> = Api::all(ns.client());
    crate::support::wait::matches(
        &plugins,
        &plugin,
        "the new version admitted, memory.read approved",
        Duration::from_secs(60),
        |p: &Plugin| {
            p.spec.image == next
                && p.spec
                    .approved_capabilities
                    .iter()
                    .any(|c| c == "memory.read")
                && p.status.as_ref().is_some_and(|s| {
                    s.observed_generation == p.metadata.generation
                        && s.conditions.iter().any(|c| {
                            c.r#type == model::resources::ADMITTED
                                && c.status == model::resources::ConditionStatus::True
                        })
                })
        },
    )
    .await?;
    // Remove, confirmed: the Plugin goes, and with it its form. First the form as listed
    // again after the upgrade (its clicks land on what is drawn now, not on what moves).
    world
        .wait(
            "the form listed again at 0.2.0",
            &format!(
                "/0\\.2\\.0\\)/.test(document.querySelector('{form} legend')?.textContent ?? '') \
                 && document.querySelector('{form} .upgrade-summary') === null"
            ),
        )
        .await?;
    page.click(&format!("{form} .plugin-remove")).await?;
    world
        .wait(
            "Remove asking to confirm",
            &format!("document.querySelector('{form} .plugin-remove-confirm') !== null"),
        )
        .await?;
    page.click(&format!("{form} .plugin-remove-confirm"))
        .await?;
    crate::support::wait::deleted(&plugins, &plugin, Duration::from_secs(60)).await?;
    world
        .wait(
            "the removed plugin gone from Settings",
            &format!(
                "/^Removed /.test(document.getElementById('settings-status').textContent) \
                 && document.querySelector('{form}') === null"
            ),
        )
        .await?;
    Ok(())
}

/// The Tasks panel as a person with the chart's project editor and trustee roles: New task →
/// the plugin's `tick` makes the project's entry, which counts once trusted (the CronJob then
/// listed); its schedule edited, turned off and deleted the same way.
async fn tasks_panel(ns: Ns) -> anyhow::Result<()> {
    // Bound before the console signs in: the host API keeps each RBAC answer for a while.
    crate::controller_support::bind_chart_role(&ns, "person", "project-editor").await?;
    crate::controller_support::bind_chart_role(&ns, "person", "project-trustee").await?;
    let world = ConsoleWorld::start(&ns).await?;
    let page = &world.page;
    let plugin = world.plugin.clone();
    let row = format!("#tasks tr[data-plugin=\"{plugin}\"][data-action=tick]");
    world
        .wait(
            "no task yet, and the New task menu offering the plugin's tick",
            &format!(
                "document.querySelector('#tasks p.empty') !== null \
                 && [...document.querySelectorAll('#new-task-action option')].some(o => o.value === '{plugin}/tick')"
            ),
        )
        .await?;
    // Trusts the change just written, then waits until the console sees the config trusted:
    // a note still shown from the step before would otherwise be clicked next time, trusting
    // the version before the change (409, the change never counting: seen on kind in CI).
    let trust = || async {
        world
            .wait(
                "the trust's note",
                "document.getElementById('tasks-trust-now') !== null \
                 && !document.getElementById('tasks-trust').hidden",
            )
            .await?;
        page.click("#tasks-trust-now").await?;
        world
            .wait(
                "the config trusted, the note gone",
                "document.getElementById('tasks-trust').hidden === true",
            )
            .await?;
        anyhow::Ok(())
    };
    // New task → Plugin: the entry written, the task there once trusted.
    page.click("#new-task > summary").await?;
    page.evaluate(&format!(
        "document.getElementById('new-task-action').value = '{plugin}/tick'; true"
    ))
    .await?;
    page.click("#new-task-form button[type=submit]").await?;
    trust().await?;
    world
        .wait(
            "the task listed, the project's own, with its next run",
            &format!(
                "document.querySelector('{row}')?.dataset.enabled === 'true' \
                 && /project entry/.test(document.querySelector('{row}').textContent) \
                 && / UTC$/.test(document.querySelector('{row}').children[2].textContent) \
                 && document.querySelector('{row} .task-delete') !== null"
            ),
        )
        .await?;
    world.screenshot(&ns, "tasks").await?;
    // Its own options: Worktree and Auto-delete; a bad Auto-delete refused in the row first,
    // then saved on its CronJob and shown on its row.
    page.click(&format!("{row} .task-options")).await?;
    let form = "#tasks .task-options-row";
    world
        .wait(
            "the options under the task, the focus on Worktree",
            &format!(
                "document.querySelector('{form}') !== null \
                 && document.activeElement?.id?.endsWith('-options-worktree') \
                 && document.querySelector('{row} .task-options').getAttribute('aria-expanded') === 'true'"
            ),
        )
        .await?;
    page.evaluate(&format!(
        "document.querySelector('{form} input[id$=-worktree]').checked = true; \
         document.querySelector('{form} input[id$=-auto-delete]').value = '0'; true"
    ))
    .await?;
    page.click(&format!("{form} .task-options-save")).await?;
    world
        .wait(
            "a bad Auto-delete refused in the row, naming the field",
            &format!(
                "/^Auto-delete: between 1 and/.test(document.querySelector('{form} .error:not([hidden])')?.textContent ?? '')"
            ),
        )
        .await?;
    page.evaluate(&format!(
        "document.querySelector('{form} input[id$=-auto-delete]').value = '3600'; true"
    ))
    .await?;
    world.screenshot(&ns, "task-options").await?;
    page.click(&format!("{form} .task-options-save")).await?;
    world
        .wait(
            "the options on the task's row, the form closed",
            &format!(
                "document.querySelector('{form}') === null \
                 && /worktree/.test(document.querySelector('{row} .task-option-words')?.textContent ?? '') \
                 && /auto-delete 1h/.test(document.querySelector('{row} .task-option-words')?.textContent ?? '')"
            ),
        )
        .await?;
    let task = model::names::cronjob_name(&plugin, "general", "tick");
    let cronjob = ns
        .api::<k8s_openapi::api::batch::v1::CronJob>()
        .get(&task)
        .await?;
    let written = cronjob
        .metadata
        .annotations
        .unwrap_or_default()
        .get(model::task::ANNOTATION_TASK_OPTIONS)
        .cloned()
        .unwrap_or_default();
    anyhow::ensure!(
        written == r#"{"worktree":true,"updateBeforeRun":false,"autoDeleteSeconds":3600}"#,
        "the CronJob's options: {written}"
    );
    // The same by keyboard alone: Options opens on Enter with the focus on Worktree; Tab
    // walks to Update before run (Space turns it on), Auto-delete, then Save.
    page.evaluate(&format!(
        "document.querySelector('{row} .task-options').focus(); true"
    ))
    .await?;
    page.press("Enter", false).await?;
    let focused =
        |suffix: &str| format!("document.activeElement?.id?.endsWith('{suffix}') === true");
    world
        .wait("the focus on Worktree", &focused("-options-worktree"))
        .await?;
    page.press("Tab", false).await?;
    world
        .wait(
            "the focus on Update before run",
            &focused("-options-update"),
        )
        .await?;
    page.press(" ", false).await?;
    page.press("Tab", false).await?;
    world
        .wait("the focus on Auto-delete", &focused("-options-auto-delete"))
        .await?;
    page.press("Tab", false).await?;
    world
        .wait(
            "the focus on Save options",
            "document.activeElement?.classList.contains('task-options-save') === true",
        )
        .await?;
    page.press("Enter", false).await?;
    world
        .wait(
            "Update before run on the task's row",
            &format!(
                "/update before run/.test(document.querySelector('{row} .task-option-words')?.textContent ?? '')"
            ),
        )
        .await?;
    // Readable in the dark theme.
    page.evaluate("document.getElementById('theme').click(); true")
        .await?;
    world
        .wait(
            "the dark theme",
            "document.documentElement.dataset.scheme === 'dark'",
        )
        .await?;
    world.screenshot(&ns, "tasks-dark").await?;
    page.evaluate("document.getElementById('theme').click(); true")
        .await?;
    // Its schedule edited.
    page.click(&format!("{row} .task-edit")).await?;
    page.evaluate(&format!(
        "document.querySelector('{row} select').value = 'interval'; \
         document.querySelector('{row} input').value = '30m'; true"
    ))
    .await?;
    page.click(&format!("{row} .task-save")).await?;
    trust().await?;
    world
        .wait(
            "the task on its new schedule",
            &format!("document.querySelector('{row} code')?.textContent === 'interval 30m'"),
        )
        .await?;
    // Turned off.
    page.click(&format!("{row} .task-toggle")).await?;
    trust().await?;
    world
        .wait(
            "the task turned off",
            &format!(
                "document.querySelector('{row}')?.dataset.enabled === 'false' \
                 && document.querySelector('{row}').children[2].textContent === '—'"
            ),
        )
        .await?;
    // Deleted: the project's entry removed, the task gone.
    page.click(&format!("{row} .task-delete")).await?;
    trust().await?;
    world
        .wait(
            "the task deleted",
            &format!("document.querySelector('{row}') === null"),
        )
        .await?;
    Ok(())
}

/// The agent view: once the plugin started a run in the chat its pane shows the agent label,
/// which opens the run's chat beside the panel: the prompt, the tool call with its input and
/// answer (the transcript the host records), and the final message.
async fn the_agent_view(ns: Ns) -> anyhow::Result<()> {
    let world = ConsoleWorld::start_exclusive(&ns).await?;
    echo_pane_connected(&world).await?;
    let tool = format!("plugin_{}-echo", world.plugin);
    let model = start_model(vec![
        Step::call(&tool, r#"{"text": "hi from the agent view"}"#)
            .after_message_containing("show me"),
        Step::answer("All done: the tool was called."),
    ])
    .await?;
    use_runner_with(&ns, &model, world.host.url_for_pods.clone(), |h| h).await?;
    let result = agent_view_of_a_run(&world, &ns).await;
    put_back(&ns, result).await?;
    ensure!(
        model.failures().is_empty(),
        "the model objected to {:?}",
        model.failures()
    );
    Ok(())
}

async fn agent_view_of_a_run(world: &ConsoleWorld, ns: &Ns) -> anyhow::Result<()> {
    let page = &world.page;
    let run = world.post_run(ns, "show me the agent view").await?;
    world
        .wait(
            "the agent label on the plugin's pane",
            "document.querySelector('#panes section.pane .agent-label') !== null",
        )
        .await?;
    page.click("#panes section.pane .agent-label").await?;
    world
        .wait(
            "the run's chat beside the panel, to its final message",
            &format!(
                "(() => {{ const v = document.querySelector('#panes section.pane.with-agent .agent-chat'); \
                   return v?.dataset.phase === 'Succeeded' \
                     && v.textContent.includes('{run}') \
                     && v.querySelector('.entry.user pre')?.textContent === 'show me the agent view' \
                     && v.querySelector('.entry.tool pre.input')?.textContent.includes('hi from the agent view') \
                     && v.querySelector('.entry.tool pre.answer')?.textContent.length > 0 \
                     && v.querySelector('.entry.agent')?.textContent.includes('All done') \
                     && v.querySelector('.run-mark.live') === null; }})()"
            ),
        )
        .await?;
    world.screenshot(ns, "agent-view").await?;
    // Closed again: the pane is the panel alone.
    page.click("#panes section.pane .agent-label").await?;
    world
        .wait(
            "the agent view closed",
            "document.querySelector('#panes section.pane.with-agent') === null",
        )
        .await?;
    Ok(())
}

/// The add-pane menu: the echo panel (a singleton) offered once per layout; its pane closed,
/// the layout kept across a reload, and the pane added back from the menu.
async fn panes_from_the_menu(ns: Ns) -> anyhow::Result<()> {
    let world = ConsoleWorld::start(&ns).await?;
    let page = &world.page;
    echo_pane_connected(&world).await?;
    let item = format!(
        "#add-pane-list button.add-pane-item[data-plugin=\"{}\"][data-panel=main]",
        world.plugin
    );
    // Shown already: the menu offers it no more, and says why.
    page.click("#add-pane > summary").await?;
    world
        .wait(
            "the menu with the singleton shown",
            &format!(
                "document.querySelector('{item}')?.disabled === true \
                 && /once per layout/.test(document.querySelector('{item}').title)"
            ),
        )
        .await?;
    world.screenshot(&ns, "add-pane").await?;
    // A second one is refused however it is asked for.
    let refused = page
        .evaluate(&format!(
            "(() => {{ document.querySelector('{item}').click(); \
               return document.querySelectorAll('#panes section.pane').length; }})()"
        ))
        .await?;
    ensure!(refused == 1, "a second echo pane: {refused} panes");
    page.click("#add-pane > summary").await?;

    // Closed: gone, kept so across a reload.
    page.click("#panes section.pane .pane-close").await?;
    world
        .wait(
            "the pane closed",
            "document.querySelectorAll('#panes section.pane').length === 0 \
             && /add one from the menu/.test(document.querySelector('#panes p.empty')?.textContent)",
        )
        .await?;
    page.evaluate("location.reload(); true").await?;
    world
        .wait(
            "the console again, without the pane",
            "window.loopConsole?.ready === true \
             && window.loopConsole.chat === 'general' \
             && document.querySelector('#panes p.empty') !== null \
             && document.querySelectorAll('#panes section.pane').length === 0",
        )
        .await?;

    // Added back from the menu: connected again, and the menu offers it no more.
    page.click("#add-pane > summary").await?;
    world
        .wait(
            "the menu offering the panel",
            &format!("document.querySelector('{item}')?.disabled === false"),
        )
        .await?;
    page.click(&item).await?;
    echo_pane_connected(&world).await?;
    world
        .wait(
            "the menu again",
            &format!("document.querySelector('{item}')?.disabled === true"),
        )
        .await?;
    Ok(())
}

/// The plugin's UI command, as the console following the chat carries it out: the chat
/// chosen, the pane brought forward, the message shown; the composer it does not have said so.
async fn a_ui_command_is_carried_out(ns: Ns) -> anyhow::Result<()> {
    let world = ConsoleWorld::start(&ns).await?;
    echo_pane_connected(&world).await?;
    // The console follows the chat's commands once its chat is shown.
    world
        .wait(
            "the console following the chat's UI commands",
            "window.loopConsole.followCommands?.chat === 'general' \
             && window.loopConsole.commandsRefused === null",
        )
        .await?;
    let command = json!({
        "steps": [
            { "type": "select_chat" },
            { "type": "open_panel", "panel": "main" },
            { "type": "notify", "message": "The weekly report is ready", "level": "warning" },
            { "type": "compose", "text": "/report" },
        ],
        "timeout_seconds": 60,
    });
    let sent = {
        let world = &world;
        let ns = &ns;
        async move { world.post_ui_command(ns, command).await }
    };
    let shown = world.wait(
        "the command's message and the pane brought forward",
        "[...document.querySelectorAll('#toasts .toast.warning .toast-message')]\
           .some(m => m.textContent === 'The weekly report is ready') \
         && document.querySelector('#panes section.pane.called') !== null",
    );
    let (sent, shown) = tokio::join!(sent, shown);
    let (status, answer) = sent?;
    shown?;
    world.screenshot(&ns, "ui-command").await?;
    ensure!(status == 200, "POST /ui/commands: {status} {answer}");
    ensure!(
        answer["ran"] == false
            && answer["steps"]
                == json!([
                    { "type": "select_chat", "status": "ran" },
                    { "type": "open_panel", "status": "ran" },
                    { "type": "notify", "status": "ran" },
                    { "type": "compose", "status": "unsupported", "error": "this console has no composer" },
                ]),
        "the plugin got {answer}"
    );
    // The drawer opened, the chat chosen again: all ran.
    let (status, answer) = world
        .post_ui_command(
            &ns,
            json!({ "steps": [
                { "type": "open_drawer" },
                { "type": "select_chat" },
            ] }),
        )
        .await?;
    ensure!(
        status == 200 && answer["ran"] == true,
        "open_drawer and select_chat: {status} {answer}"
    );
    Ok(())
}

/// The src of the first frame `selector` names in the console.
async fn frame_src(world: &ConsoleWorld, selector: &str) -> anyhow::Result<String> {
    let quoted = serde_json::to_string(selector)?;
    world
        .wait(
            &format!("a frame {selector}"),
            &format!("document.querySelector({quoted})?.src?.length > 0"),
        )
        .await?;
    let src = world
        .page
        .evaluate(&format!("document.querySelector({quoted}).src"))
        .await?;
    src.as_str().map(str::to_string).context("the frame's src")
}

/// Waits until the echo pane took the bridge's port and showed its context and settings.
async fn echo_pane_connected(world: &ConsoleWorld) -> anyhow::Result<testkit::browser::Frame> {
    let src = frame_src(world, "iframe.pane-frame").await?;
    ensure!(
        src.starts_with(&world.bundles()) && src.ends_with("/main/index.html"),
        "{src}"
    );
    let frame = world.page.wait_for_frame(&src, SHOW).await?;
    let shown = "document.getElementById('status')?.textContent === 'Connected' \
                 && document.getElementById('chat')?.textContent === 'general' \
                 && ['on', 'off'].includes(document.getElementById('verbose')?.textContent)";
    if let Err(e) = frame.wait_for(shown, SHOW).await {
        anyhow::bail!("the echo pane: {e}\n  {}", world.reports());
    }
    Ok(frame)
}

/// The bridge's answers so far to the first pane, by method.
async fn pane_calls(world: &ConsoleWorld) -> anyhow::Result<Value> {
    let text = world
        .page
        .evaluate("JSON.stringify([...window.loopConsole.panes.values()][0].bridge.calls)")
        .await?;
    Ok(serde_json::from_str(text.as_str().unwrap_or("{}"))?)
}

async fn the_echo_panel_appears_and_its_bridge_answers(ns: Ns) -> anyhow::Result<()> {
    let world = ConsoleWorld::start(&ns).await?;
    // Signed in from the fragment, which the page then took out of the address.
    let page = &world.page;
    ensure!(
        page.evaluate("location.hash").await? == "",
        "the token stayed in the URL"
    );
    ensure!(
        page.evaluate("sessionStorage.getItem('loop-console:token')")
            .await?
            == world.token.as_str(),
        "the token is kept for the tab"
    );
    // The namespace's chats, the hidden ones left out; general chosen, with the plugin.
    let chats = page
        .evaluate(
            "[...document.querySelectorAll('#chat-list [data-chat]')].map(b => b.dataset.chat)",
        )
        .await?;
    ensure!(
        chats == json!(["general", "general-t1", "random"]),
        "{chats}"
    );
    ensure!(
        page.evaluate("document.querySelector('[data-chat=general]').getAttribute('aria-current')")
            .await?
            == "page"
    );

    // The echo panel: its context and settings came over the bridge.
    let frame = echo_pane_connected(&world).await?;
    ensure!(
        frame
            .evaluate("document.getElementById('verbose').textContent")
            .await?
            == "off",
        "the verbose setting's default"
    );
    // An /x call through api.request: the echo container answers what it was sent.
    frame
        .evaluate(
            "document.getElementById('text').value = 'hello from the console'; \
             document.getElementById('send').click(); true",
        )
        .await?;
    if let Err(e) = frame
        .wait_for(
            "document.getElementById('echo').textContent === 'hello from the console'",
            SHOW,
        )
        .await
    {
        anyhow::bail!("the /x call: {e}\n  {}", world.reports());
    }
    let calls = pane_calls(&world).await?;
    for method in ["context.get", "settings.get", "api.request"] {
        ensure!(calls[method] == 1, "{method} answered once: {calls}");
    }
    world.screenshot(&ns, "panel").await?;

    // A settings-only edit of the chat's project (settings apply without the owner's trust):
    // plugins.changed tells the console, which sends the pane settings.changed as the bridge's
    // `event`, since the plugin subscribes to it; the pane shows the new value without asking.
    let mut verbose = entry(true, &[]);
    verbose.settings.insert("verbose".into(), json!(true));
    apply(
        &ns,
        &project("proj", BTreeMap::from([(world.plugin.clone(), verbose)])),
    )
    .await?;
    if let Err(e) = frame
        .wait_for(
            "document.getElementById('verbose').textContent === 'on'",
            SHOW,
        )
        .await
    {
        anyhow::bail!("the pane's settings.changed: {e}\n  {}", world.reports());
    }
    let calls = pane_calls(&world).await?;
    ensure!(
        calls["settings.get"] == 1,
        "settings.get asked again: {calls}"
    );

    // The pane navigates itself out of its signed link, to this server outside the bundles:
    // the console's frame-src refuses it, and the browser says so.
    let out = format!("{}/console/elsewhere", world.host.url);
    frame
        .evaluate(&format!(
            "setTimeout(() => {{ location.href = {}; }}, 0); true",
            serde_json::to_string(&out)?
        ))
        .await?;
    let refused = page
        .wait_for_console("the navigation out refused", SHOW, |e| {
            e.text.contains("frame-src") && e.text.contains("/console/elsewhere")
        })
        .await;
    ensure!(refused.is_ok(), "no refusal: {}", world.reports());
    // The console's own page never left.
    ensure!(page.evaluate("location.pathname").await? == "/console/");

    // Signing out forgets the token; pasting it into the form signs in again.
    page.click("#sign-out").await?;
    world
        .wait(
            "signed out",
            "!document.getElementById('signin').hidden \
             && sessionStorage.getItem('loop-console:token') === null \
             && document.activeElement?.id === 'token'",
        )
        .await?;
    page.type_text(&world.token).await?;
    // The namespace is remembered for the tab.
    ensure!(
        page.evaluate("document.getElementById('signin-namespace').value")
            .await?
            == ns.name()
    );
    page.click("#signin-form button[type=submit]").await?;
    world
        .wait(
            "signed in again with the pasted token",
            "document.getElementById('signin').hidden \
             && document.querySelector('#plugins tr[data-plugin]') !== null \
             && document.querySelector('iframe.pane-frame') !== null",
        )
        .await?;
    Ok(())
}

async fn a_posted_card_in_the_drawer(ns: Ns) -> anyhow::Result<()> {
    let world = ConsoleWorld::start(&ns).await?;
    let page = &world.page;
    echo_pane_connected(&world).await?;
    let id = world
        .post_card(
            &ns,
            "Quiz: 3 of 4",
            json!({ "title": "Quiz: 3 of 4",
                    "lines": ["Rust ownership ✓", "Borrowing ✓", "Lifetimes ✗", "Traits ✓"] }),
        )
        .await?;
    let run = world.post_run(&ns, "Say hello to the chat.").await?;
    let card = format!("[data-card=\"{id}\"]");
    // In the drawer, unread, counted there and in the sidebar (the console reads it again
    // every few seconds).
    world
        .wait(
            "the card in the drawer, unread",
            &format!(
                "document.querySelector('article{card}.unread iframe.card-frame') !== null \
                 && document.getElementById('unread').textContent === '1' \
                 && document.querySelector('[data-chat=general] .badge')?.textContent === '1'"
            ),
        )
        .await?;
    // Its page took the bridge: its context (the card, the posted entry and data), its state,
    // and ui.resize made its frame as tall as it is.
    let src = frame_src(&world, &format!("iframe.card-frame{card}")).await?;
    let frame = page.wait_for_frame(&src, SHOW).await?;
    if let Err(e) = frame.wait_for("window.cardDone !== undefined", SHOW).await {
        anyhow::bail!("the card's page: {e}\n  {}", world.reports());
    }
    let done = frame.evaluate("window.cardDone").await?;
    ensure!(
        done["context"]["card"] == "score"
            && done["context"]["entry"] == id.as_str()
            && done["context"]["chat"] == "general"
            && done["context"]["data"]["title"] == "Quiz: 3 of 4"
            && done["state"] == json!({ "opened": id }),
        "{done}"
    );
    let height = done["height"].as_u64().context("the card's height")?;
    ensure!(height != 160 && height > 0, "{done}");
    let framed = page
        .evaluate(&format!(
            "document.querySelector('iframe.card-frame{card}').style.height"
        ))
        .await?;
    ensure!(
        framed == format!("{height}px").as_str(),
        "{framed} vs {height}"
    );
    // The run the plugin started lists under the drawer.
    world
        .wait(
            "the plugin's run listed",
            &format!(
                "document.querySelector('#runs li.run[data-run=\"{run}\"] .pill')?.textContent?.length > 0"
            ),
        )
        .await?;
    world.screenshot(&ns, "drawer").await?;

    // The theme toggle: the console turns dark and tells the card (theme.changed).
    page.click("#theme").await?;
    world
        .wait(
            "the dark theme",
            "document.documentElement.dataset.scheme === 'dark' \
             && document.getElementById('theme').getAttribute('aria-pressed') === 'true'",
        )
        .await?;
    if let Err(e) = frame
        .wait_for(
            "getComputedStyle(document.documentElement).getPropertyValue('--bg').trim() === '#15181d'",
            SHOW,
        )
        .await
    {
        anyhow::bail!("the card's theme.changed: {e}\n  {}", world.reports());
    }
    world.screenshot(&ns, "dark").await?;

    // Mark read: both counts clear, and the host API says so.
    page.click(&format!("article{card} .mark-read")).await?;
    world
        .wait(
            "the card read",
            &format!(
                "document.querySelector('article{card}.unread') === null \
                 && document.getElementById('unread').hidden \
                 && document.querySelector('[data-chat=general] .badge') === null"
            ),
        )
        .await?;
    let drawer = host_get(&world, &ns, "/channels/general/cards").await?;
    ensure!(drawer["unread"] == 0, "{drawer}");

    // A notification: under the cards with its level and body, unread in both counts, and
    // marked read apart (the card stays read, nothing else changes).
    let note = world
        .post_notification(
            &ns,
            json!({ "title": "Sync failed", "body": "github.com answered 503", "level": "warning" }),
        )
        .await?;
    let item = format!("#notifications li.notification[data-notification=\"{note}\"]");
    world
        .wait(
            "the notification in the drawer, unread",
            &format!(
                "document.querySelector('{item}.unread.level-warning .notification-body')?.textContent === 'github.com answered 503' \
                 && document.getElementById('notifications-unread').textContent === '1' \
                 && document.querySelector('[data-chat=general] .badge')?.textContent === '1' \
                 && document.getElementById('unread').hidden"
            ),
        )
        .await?;
    world.screenshot(&ns, "notification").await?;
    page.click("#notifications-read-all").await?;
    world
        .wait(
            "the notification read",
            &format!(
                "document.querySelector('{item}') !== null \
                 && document.querySelector('{item}.unread') === null \
                 && document.getElementById('notifications-unread').hidden \
                 && document.querySelector('[data-chat=general] .badge') === null"
            ),
        )
        .await?;
    let notifications = host_get(&world, &ns, "/channels/general/notifications").await?;
    ensure!(
        notifications["unread"] == 0 && notifications["notifications"][0]["id"] == note.as_str(),
        "{notifications}"
    );

    // The plugin removed: its card shows the note. (Removing a plugin drops its cards with
    // its instances; the test holds the chat's inbox with a finalizer of its own, so the
    // moment between the two lasts.)
    let maps: Api<ConfigMap> = ns.api();
    let inbox = maps
        .list(&ListParams::default().labels("app.kubernetes.io/component=inbox"))
        .await?
        .items
        .into_iter()
        .find(|m| {
            m.labels()
                .get(model::names::LABEL_CHANNEL)
                .map(String::as_str)
                == Some("general")
        })
        .context("the chat's inbox")?
        .name_any();
    let hold =
        |finalizers: Value| Patch::Merge(json!({ "metadata": { "finalizers": finalizers } }));
    maps.patch(
        &inbox,
        &PatchParams::default(),
        &hold(json!(["e2e.loop.dev/hold"])),
    )
    .await?;
    let plugins: Api<Plugin> = Api::all(ns.client());
    plugins.delete(&world.plugin, &Default::default()).await?;
    let noted = world
        .wait(
            "the removed plugin's card as a note",
            &format!("document.querySelector('article{card} .note[data-reason=removed]') !== null"),
        )
        .await;
    let note = page
        .evaluate(&format!(
            "document.querySelector('article{card} .note')?.textContent"
        ))
        .await;
    maps.patch(&inbox, &PatchParams::default(), &hold(Value::Null))
        .await?;
    noted?;
    let note = note?;
    ensure!(
        note.as_str().is_some_and(|n| n.contains("removed")),
        "{note}"
    );
    Ok(())
}

/// A host API GET as the person.
async fn host_get(world: &ConsoleWorld, ns: &Ns, rest: &str) -> anyhow::Result<Value> {
    let http = reqwest::Client::builder().no_proxy().build()?;
    let url = format!(
        "{}{}/namespaces/{}{rest}",
        world.host.url,
        server::host_api::PREFIX,
        ns.name()
    );
    let answer = http.get(&url).bearer_auth(&world.token).send().await?;
    ensure!(
        answer.status().is_success(),
        "GET {rest}: {}",
        answer.status()
    );
    Ok(answer.json().await?)
}

/// A click reaches the plugin (starting its container) and its pill shows the answer, even when
/// the chat's switches are listed again while the click waits: on kind, where the start takes
/// seconds, other tests' plugins.changed re-listed them meanwhile, and the list read before
/// the answer replaced the pill (issue 27; `switches.js`). Stop stops the container.
async fn a_switch_click_and_stop(ns: Ns) -> anyhow::Result<()> {
    let world = ConsoleWorld::start(&ns).await?;
    let page = &world.page;
    let pill = ".switch[data-switch=mode]";
    world
        .wait(
            "the mode switch, off",
            &format!("document.querySelector('{pill}')?.getAttribute('aria-pressed') === 'false'"),
        )
        .await?;
    // The click goes to the plugin (starting its container); the pill shows its answer.
    page.click(pill).await?;
    world
        .wait(
            "the mode switch on, as the plugin answered",
            &format!(
                "document.querySelector('{pill}').getAttribute('aria-pressed') === 'true' \
                 && document.querySelector('{pill}').title === 'Mode is on'"
            ),
        )
        .await?;
    let switches = host_get(
        &world,
        &ns,
        &format!("/channels/general/plugins/{}/switches", world.plugin),
    )
    .await?;
    ensure!(switches["switches"][0]["on"] == true, "{switches}");

    // The container runs now; Stop stops it, and the console hears it as plugins.changed.
    let row = format!("#plugins tr[data-plugin=\"{}\"]", world.plugin);
    world
        .wait(
            "the instance running",
            &format!("document.querySelector('{row} .pill')?.textContent === 'Running'"),
        )
        .await?;
    page.click(&format!("{row} button.stop")).await?;
    let plugin = serde_json::to_string(&world.plugin)?;
    world
        .wait(
            "the instance stopped, heard as plugins.changed",
            &format!(
                "document.querySelector('{row} .pill')?.textContent === 'Stopped' \
                 && window.loopConsole.changes.some(c => c.plugin === {plugin} \
                    && c.change === 'instance' && c.instance?.phase === 'Stopped')"
            ),
        )
        .await?;
    let chats = host_get(&world, &ns, "/chats").await?;
    let general = chats["chats"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["name"] == "general")
        .context("general")?;
    ensure!(general["plugins"][0]["stoppedAt"].is_string(), "{general}");

    // The project stops enabling the plugin: the pane already open says so.
    apply_trusted(
        &ns,
        "proj",
        BTreeMap::from([(world.plugin.clone(), entry(false, &[]))]),
    )
    .await?;
    world
        .wait(
            "the open pane saying its plugin is no longer enabled",
            "[...document.querySelectorAll('.pane .note')].some(n => !n.hidden \
               && /no longer|not enable|does not enable/.test(n.textContent))",
        )
        .await?;
    // Enabled again: the note goes, the pane stays the same frame.
    apply_trusted(
        &ns,
        "proj",
        BTreeMap::from([(world.plugin.clone(), entry(true, &[]))]),
    )
    .await?;
    world
        .wait(
            "the pane's note gone once the plugin is enabled again",
            "[...document.querySelectorAll('.pane .note')].every(n => n.hidden) \
             && document.querySelectorAll('iframe.pane-frame').length === 1",
        )
        .await?;
    Ok(())
}

async fn the_keyboard_reaches_everything(ns: Ns) -> anyhow::Result<()> {
    let world = ConsoleWorld::start(&ns).await?;
    let page = &world.page;
    echo_pane_connected(&world).await?;
    world
        .post_card(&ns, "Keyboard", json!({ "title": "Keyboard" }))
        .await?;
    world
        .wait(
            "the card's Mark read button",
            "document.querySelector('.mark-read:not([hidden])') !== null",
        )
        .await?;
    // From the top of the page, Tab alone.
    page.evaluate("document.activeElement?.blur(); window.focus(); true")
        .await?;
    let describe = "(() => { const e = document.activeElement; if (!e || e === document.body) return 'body'; \
        const what = e.tagName.toLowerCase() + (e.id ? '#' + e.id : '') \
          + [...e.classList].map(c => '.' + c).join(''); \
        const ring = getComputedStyle(e).outlineStyle !== 'none'; \
        return what + (ring ? ' ring' : ''); })()";
    let mut reached = Vec::new();
    for _ in 0..60 {
        page.press("Tab", false).await?;
        let now = page.evaluate(describe).await?;
        reached.push(now.as_str().unwrap_or("").to_string());
        if reached.last().is_some_and(|r| r.contains(".mark-read")) {
            break;
        }
    }
    let at = |what: &str| reached.iter().position(|r| r.contains(what));
    let (Some(chat), Some(pane), Some(drawer)) = (
        at(".chat-button"),
        at("iframe.pane-frame"),
        at(".mark-read"),
    ) else {
        anyhow::bail!("Tab did not reach a chat, the pane and the drawer: {reached:?}");
    };
    ensure!(chat < pane && pane < drawer, "{reached:?}");
    // Each button reached shows where the focus is.
    for r in reached.iter().filter(|r| r.starts_with("button")) {
        ensure!(r.ends_with(" ring"), "no visible focus on {r}: {reached:?}");
    }
    // Enter on a chat button chooses the chat.
    page.evaluate("document.querySelector('[data-chat=random]').focus(); true")
        .await?;
    page.press("Enter", false).await?;
    world
        .wait(
            "random chosen with Enter",
            "document.getElementById('chat-title').textContent === '# random'",
        )
        .await?;
    // The lists are read again every few seconds; the keyboard keeps its place through it.
    tokio::time::sleep(Duration::from_secs(5)).await;
    ensure!(
        page.evaluate("document.activeElement?.dataset?.chat")
            .await?
            == "random",
        "the focus left the chat button: {}",
        page.evaluate("document.activeElement?.outerHTML").await?
    );
    Ok(())
}

/// Two runs of the plugin's agent, each calling the plugin's tool once through its run's MCP
/// endpoint (the real runner against a scripted model): the person approves the first call
/// in the console and denies the second with a reason, and each run ends as that made it end.
async fn an_agents_call_waits_in_the_drawer(ns: Ns) -> anyhow::Result<()> {
    let world = ConsoleWorld::start_exclusive(&ns).await?;
    let tool = format!("plugin_{}-echo", world.plugin);
    let model = start_model(vec![
        Step::call(&tool, r#"{"text": "hi from an agent"}"#).after_message_containing("approve me"),
        // The call reached the plugin, whose echo binary implements no tool of this name: it
        // says "no such tool" with its built-in manifest (the local kubelet stand-in), and
        // "declared in the manifest but not implemented" with its image's (kind).
        Step::answer("it ran").expecting(|request| {
            let last = testkit::chat_model::last_message(request);
            (last.contains("no such tool") || last.contains("not implemented"))
                .then_some(())
                .ok_or_else(|| format!("the tool's answer is {last:?}"))
        }),
        Step::call(&tool, r#"{"text": "and this one"}"#).after_message_containing("deny me"),
        Step::answer("told no").after_message_containing("not this one"),
    ])
    .await?;
    // The runs reach the console's own API server for their MCP endpoint.
    use_runner_with(&ns, &model, world.host.url_for_pods.clone(), |h| h).await?;
    // What the model was told, with a failure: why a run ended as it did.
    let result = approve_and_deny(&world, &ns).await.map_err(|e| {
        let told: Vec<String> = model
            .requests()
            .iter()
            .map(testkit::chat_model::last_message)
            .collect();
        e.context(format!(
            "the model objected to {:?}; the last messages it got: {told:?}",
            model.failures()
        ))
    });
    put_back(&ns, result).await?;
    ensure!(
        model.failures().is_empty(),
        "the model objected to {:?}",
        model.failures()
    );
    Ok(())
}

async fn approve_and_deny(world: &ConsoleWorld, ns: &Ns) -> anyhow::Result<()> {
    let page = &world.page;
    // The person may approve here; the project's profile, which HostConfig does not define,
    // asks for every tool of the plugin (the suite's default pre-approves every tool).
    bind_approver(ns, "person").await?;
    let mut asks = entry(true, &[]);
    asks.risk_profile = Some("console-asks".into());
    apply_trusted(ns, "proj", BTreeMap::from([(world.plugin.clone(), asks)])).await?;
    // The API server reads the project's new profile before the run calls.
    tokio::time::sleep(Duration::from_secs(1)).await;

    world.post_run(ns, "approve me").await?;
    let card = "#approvals .approval[data-approval]";
    world
        .wait(
            "the waiting call as a card in the drawer, with its input and time left",
            &format!(
                "document.querySelector('{card} pre.input')?.textContent.includes('hi from an agent') \
                 && /left$/.test(document.querySelector('{card} .left')?.textContent ?? '') \
                 && document.querySelector('#approvals-count')?.textContent === '1'"
            ),
        )
        .await?;
    world
        .wait(
            "the chat's row counting the call that waits",
            "document.querySelector('.chat-button[data-chat=general] .badge.waiting')\
               ?.getAttribute('aria-label') === '1 waiting for approval'",
        )
        .await?;
    let shot = world.screenshot(ns, "approval").await?;
    ensure!(shot.exists(), "no screenshot at {}", shot.display());

    // Approve once: the tool runs with the input shown, and the run goes on to its answer.
    page.click(&format!("{card} .decide[data-answer=once]"))
        .await?;
    let person = format!("system:serviceaccount:{}:person", ns.name());
    world
        .wait(
            "the decision listed with who made it, the card and the counts gone",
            &format!(
                "[...document.querySelectorAll('#decided li[data-decision=Approved]')]\
                   .some(li => li.textContent.includes('{person}')) \
                 && document.querySelector('{card}') === null \
                 && document.querySelector('#approvals-count').hidden \
                 && document.querySelector('.chat-button[data-chat=general] .badge.waiting') === null"
            ),
        )
        .await?;
    world
        .wait(
            "the approved run succeeded with the answer its tool's result led to",
            "[...document.querySelectorAll('#runs li.run')].some(li => \
               li.querySelector('.pill')?.textContent === 'Succeeded' \
               && li.textContent.includes('it ran'))",
        )
        .await?;

    // Deny, with a reason: the tool never runs, and the run ends on what the agent made of it.
    world.post_run(ns, "deny me").await?;
    world
        .wait(
            "the second call waiting",
            &format!(
                "document.querySelector('{card} pre.input')?.textContent.includes('and this one')"
            ),
        )
        .await?;
    page.click(&format!("{card} input.reason")).await?;
    page.type_text("not this one").await?;
    page.click(&format!("{card} .decide[data-answer=deny]"))
        .await?;
    world
        .wait(
            "the denial listed with its reason, and the run ended on it",
            "[...document.querySelectorAll('#decided li[data-decision=Denied]')]\
               .some(li => li.textContent.includes('not this one')) \
             && [...document.querySelectorAll('#runs li.run')].some(li => \
               li.querySelector('.pill')?.textContent === 'Succeeded' \
               && li.textContent.includes('told no'))",
        )
        .await?;
    world.screenshot(ns, "approval-decided").await?;
    let listed = host_get(world, ns, "/approvals?chat=general").await?;
    let decisions: Vec<&str> = listed["approvals"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|a| a["decision"].as_str())
        .collect();
    ensure!(decisions == ["Denied", "Approved"], "{listed}");
    Ok(())
}
