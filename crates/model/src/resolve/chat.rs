//! Whether a chat runs plugins, the one rule every part asks: plugins run only in desktop app
//! chats (the reference: "plugins don't run in Slack or Discord"), and never in hidden threads
//! such as a plugin's own `plugin:<id>` thread. Scheduled tasks go to desktop channels only:
//! threads and worktree threads run their channel's.

use crate::resources::{App, ChannelKind, ChannelSpec};

/// Whether plugins run in this chat at all.
pub fn runs_plugins(chat: &ChannelSpec) -> bool {
    chat.app == App::Desktop && !chat.hidden
}

/// Whether this chat gets the scheduled tasks of the plugins its project enables.
pub fn gets_schedules(chat: &ChannelSpec) -> bool {
    runs_plugins(chat) && chat.kind == ChannelKind::Channel
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chat(kind: ChannelKind, app: App, hidden: bool) -> ChannelSpec {
        ChannelSpec {
            project: "p".into(),
            kind,
            parent: (kind != ChannelKind::Channel).then(|| "general".into()),
            app,
            hidden,
            working_tree: None,
        }
    }

    #[test]
    fn only_visible_desktop_chats_run_plugins() {
        let cases = [
            (ChannelKind::Channel, App::Desktop, false, true, true),
            (ChannelKind::Thread, App::Desktop, false, true, false),
            (ChannelKind::Worktree, App::Desktop, false, true, false),
            (ChannelKind::Thread, App::Desktop, true, false, false),
            (ChannelKind::Channel, App::Slack, false, false, false),
            (ChannelKind::Channel, App::Discord, false, false, false),
        ];
        for (kind, app, hidden, runs, schedules) in cases {
            let c = chat(kind, app, hidden);
            assert_eq!(runs_plugins(&c), runs, "{kind:?} {app:?} hidden={hidden}");
            assert_eq!(
                gets_schedules(&c),
                schedules,
                "{kind:?} {app:?} hidden={hidden}"
            );
        }
    }
}
