// Type-checked by hack/bridge-typecheck.sh against index.d.ts (never run): a panel's use of
// every export, and misuses that must not compile (each @ts-expect-error fails the check if the
// line below it compiles).
import {
  connect, createBridge, applyTheme, syncTheme, createStorage,
  BridgeError, ErrorCode, THEME_VARS,
  type Bridge, type Context, type Theme, type ApiResponse, type BridgeStorage, type ThemeVar,
} from "../index.js";

async function panel(): Promise<void> {
  const bridge: Bridge = await connect({ timeoutMs: 5000, callTimeoutMs: 40_000 });
  const context: Context = await bridge.context.get();
  const where: string = context.panel ?? context.card ?? "";
  const kind: "channel" | "thread" | "worktree" = context.kind;

  const settings = await bridge.settings.get<{ verbose: boolean }>();
  const verbose: boolean = settings.verbose;

  const answer: ApiResponse<{ text: string }> = await bridge.api.request<{ text: string }>({
    method: "POST",
    path: `/x/echo`,
    body: { text: "hi", n: [1, 2, null] },
    headers: { "content-type": "application/json" },
  }, { timeoutMs: 1000 });
  const text: string = answer.body.text;
  const status: number = answer.status;
  await bridge.api.request({ path: "/x/items" });

  const seen = await bridge.state.get<{ seen: number }>();
  await bridge.state.set({ seen: (seen?.seen ?? 0) + 1 });
  await bridge.state.set(null);
  await bridge.ui.resize(document.body.scrollHeight);

  const theme: Theme = await bridge.theme.get();
  const scheme: "light" | "dark" = theme.scheme;
  const off = bridge.theme.on((t) => applyTheme(t.vars));
  off();
  bridge.events.on<{ text: string }>("message.created", (data, event) => {
    const t: string = data.text;
    const thread: string | undefined = event.thread_id;
  })();

  const raw: number[] = await bridge.call<number[]>("custom.thing", { a: 1 });
  bridge.notify("page.ready");
  bridge.on<{ n: number }>("future.thing", (p) => p.n.toFixed())();

  applyTheme({ "--bg": "#fff" }, document.documentElement);
  const stop: () => void = await syncTheme(bridge);
  stop();

  const storage: BridgeStorage = await createStorage(bridge, { onError: (e) => console.warn(e) });
  storage.setItem("k", "v");
  const value: string | null = storage.getItem("k");
  const n: number = storage.length;
  await storage.flush();

  const names: readonly ThemeVar[] = THEME_VARS;
  const code: -32010 = ErrorCode.TIMEOUT;
  try {
    await bridge.context.get();
  } catch (e) {
    if (e instanceof BridgeError && e.code === ErrorCode.NOT_ENABLED) console.log(e.message, e.data?.reason);
  }
  const other: Bridge = createBridge(new MessageChannel().port1, { callTimeoutMs: 10 });
  other.close();
  const closed: boolean = other.closed;
  void [where, kind, verbose, text, status, scheme, raw, value, n, names, code, closed];

  // Misuses the declarations must refuse:
  // @ts-expect-error a request needs a path
  await bridge.api.request({ method: "GET" });
  // @ts-expect-error not an HTTP method the bridge takes
  await bridge.api.request({ method: "HEAD", path: "/x/a" });
  // @ts-expect-error a height is a number
  await bridge.ui.resize("200px");
  // @ts-expect-error storage keeps strings; getItem may answer null
  const s: string = storage.getItem("k");
  // @ts-expect-error a state is JSON
  await bridge.state.set(() => 1);
  // @ts-expect-error a scheme is light or dark
  const bad: Theme = { vars: {}, scheme: "blue" };
  // @ts-expect-error theme variables are the ten
  const wrong: ThemeVar = "--evil";
  // @ts-expect-error ErrorCode is read-only
  ErrorCode.TIMEOUT = 1;
  void [s, bad, wrong];
}

void panel;
