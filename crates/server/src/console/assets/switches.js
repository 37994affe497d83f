// What the console shows of each composer switch: the state the host API listed, unless a
// click on it is out (the state asked for, busy) or was answered after the list was asked for
// (the plugin's answer). A chat's switches are listed again whenever plugins.changed says a
// plugin was installed or removed, which on a busy cluster happens while a click waits for a
// container to start: without this, the list read before the answer replaced the pill the
// answer was for, and the console showed the old state.

/** The key of a chat's switch. */
export function switchKey(chat, plugin, id) {
  return JSON.stringify([chat, plugin, id]);
}

export class SwitchBook {
  constructor() {
    /** key → {pending, on} while a click is out, then {pending: false, state, at} */
    this.clicks = new Map();
    this.clock = 0;
  }

  /** Taken before a list is asked for: anything recorded later is newer than the list. */
  mark() {
    return this.clock;
  }

  /** A click went out asking for `on`. */
  clicked(key, on) {
    this.clicks.set(key, { pending: true, on, at: ++this.clock });
  }

  /** The plugin answered the click with `state` (or the click failed: its shown state). */
  settled(key, state) {
    this.clicks.set(key, { pending: false, state, at: ++this.clock });
  }

  /** Whether a click on `key` is out. */
  pending(key) {
    return this.clicks.get(key)?.pending === true;
  }

  /** What to show for `listed`, a switch as a list asked for at `mark` gave it. */
  shown(key, listed, mark) {
    const click = this.clicks.get(key);
    if (!click) return listed;
    if (click.pending) return { ...listed, on: click.on, busy: true };
    if (click.at > mark) return { ...listed, ...click.state };
    return listed;
  }
}
