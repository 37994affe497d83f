// Type declarations for loop-plugin-ui (index.js). The protocol is docs/bridge.md.

/** The error codes of docs/bridge.md; TIMEOUT and CLOSED are this module's own. */
export declare const ErrorCode: {
  readonly INVALID_REQUEST: -32600;
  readonly METHOD_NOT_FOUND: -32601;
  readonly INVALID_PARAMS: -32602;
  readonly INTERNAL: -32603;
  readonly FORBIDDEN: -32000;
  readonly NOT_ENABLED: -32001;
  readonly UPSTREAM: -32002;
  readonly TIMEOUT: -32010;
  readonly CLOSED: -32011;
};

/** The theme's ten CSS variables. */
export type ThemeVar =
  | "--bg" | "--surface" | "--fg" | "--muted" | "--border"
  | "--accent" | "--success" | "--danger" | "--font" | "--mono";

export declare const THEME_VARS: readonly ThemeVar[];

/** `data` of a host error: the host API's error code and status behind it. */
export interface BridgeErrorData {
  reason?: string;
  status?: number;
  [key: string]: unknown;
}

/** An error the host answered, or TIMEOUT / CLOSED from this module. */
export declare class BridgeError extends Error {
  constructor(code: number, message: string, data?: unknown);
  readonly name: "BridgeError";
  readonly code: number;
  readonly data?: BridgeErrorData;
}

export type JsonValue =
  | string | number | boolean | null
  | JsonValue[]
  | { [key: string]: JsonValue };

export interface CallOptions {
  /** Rejects with ErrorCode.TIMEOUT when no answer came in this time; 0 waits for ever. */
  timeoutMs?: number;
}

export interface ConnectOptions {
  /** How long to wait for the host's loop-plugin:init (default 10000 ms). */
  timeoutMs?: number;
  /** The default timeoutMs of every call (default 0: none; the host answers every request). */
  callTimeoutMs?: number;
  /** The window to listen on (default globalThis.window). */
  window?: EventTarget & { parent?: unknown };
}

export type HttpMethod = "GET" | "POST" | "PUT" | "PATCH" | "DELETE";

export interface ApiRequest {
  /** Default "GET". */
  method?: HttpMethod;
  /** Starts with /x/; may carry a query string. */
  path: string;
  /** A string is sent as it is; any other value as JSON. */
  body?: JsonValue;
  /** Only Content-Type reaches the container. */
  headers?: Record<string, string>;
}

export interface ApiResponse<B = unknown> {
  status: number;
  /** Lower-case names. */
  headers: Record<string, string>;
  /** Parsed JSON for a JSON answer, else its text. */
  body: B;
}

export interface Context {
  namespace: string;
  /** The Channel (channel, thread or worktree thread) whose container api.request reaches. */
  chat: string;
  kind: "channel" | "thread" | "worktree";
  /** A thread's channel; absent for a channel. */
  parent?: string;
  /** The plugin's id. */
  plugin: string;
  /** In a pane: the manifest's panel id. */
  panel?: string;
  /** In a card: the manifest's card id. */
  card?: string;
  /** In a card: the posted card's id (card-…). */
  entry?: string;
  /** In a card: the posted data. */
  data?: unknown;
}

export type Settings = Record<string, unknown>;

export interface Theme {
  vars: Partial<Record<ThemeVar, string>>;
  scheme: "light" | "dark";
}

/** An `event` notification: a Loop event as the plugin's POST /events takes it. */
export interface LoopEvent<D = unknown> {
  type: string;
  data: D;
  thread_id?: string;
}

export type Unsubscribe = () => void;

export interface Bridge {
  api: {
    request<B = unknown>(request: ApiRequest, options?: CallOptions): Promise<ApiResponse<B>>;
  };
  context: { get(options?: CallOptions): Promise<Context> };
  settings: { get<S = Settings>(options?: CallOptions): Promise<S> };
  state: {
    get<T = unknown>(options?: CallOptions): Promise<T | null>;
    /** null clears it. */
    set(value: JsonValue | undefined, options?: CallOptions): Promise<void>;
  };
  events: {
    /** fn(data, event) for each event of that type; "*" takes every type. */
    on<D = unknown>(type: string, fn: (data: D, event: LoopEvent<D>) => void): Unsubscribe;
  };
  ui: {
    /** A card's height in CSS pixels; nothing in a pane. */
    resize(height: number, options?: CallOptions): Promise<void>;
  };
  theme: {
    get(options?: CallOptions): Promise<Theme>;
    on(fn: (theme: Theme) => void): Unsubscribe;
  };
  /** A request by name: the result, or a BridgeError. */
  call<T = unknown>(
    method: string,
    params?: Record<string, unknown>,
    options?: CallOptions,
  ): Promise<T>;
  /** A notification to the host (none are defined; the host ignores them). */
  notify(method: string, params?: Record<string, unknown>): void;
  /** fn(params) on each host notification of that method. */
  on<P = unknown>(method: string, fn: (params: P) => void): Unsubscribe;
  /** Closes the port; calls in flight and later reject with ErrorCode.CLOSED. */
  close(): void;
  readonly closed: boolean;
}

/** Waits for the host's loop-plugin:init; the bridge over its port (the same one each time). */
export declare function connect(options?: ConnectOptions): Promise<Bridge>;

/** The bridge over a port already taken from loop-plugin:init. */
export declare function createBridge(
  port: MessagePort,
  options?: { callTimeoutMs?: number },
): Bridge;

/** The part of an element applyTheme and syncTheme use. */
export interface ThemeRoot {
  style: { setProperty(name: string, value: string): void; colorScheme?: string };
}

/**
 * Sets those of the ten theme variables that vars holds (as strings) on root (default
 * document.documentElement); other keys are ignored.
 */
export declare function applyTheme(
  vars: Record<string, unknown> | null | undefined,
  root?: ThemeRoot,
): void;

/** Applies the host's theme and follows theme.changed; resolves to the unsubscribe. */
export declare function syncTheme(bridge: Bridge, root?: ThemeRoot): Promise<Unsubscribe>;

/** A localStorage stand-in kept in the frame's state. */
export interface BridgeStorage {
  readonly length: number;
  key(index: number): string | null;
  getItem(key: string): string | null;
  setItem(key: string, value: string): void;
  removeItem(key: string): void;
  clear(): void;
  /** Resolves when every change so far is stored; rejects with the last failed write. */
  flush(): Promise<void>;
}

export interface StorageOptions {
  /** Where failed writes go (default console.error). */
  onError?: (error: unknown) => void;
}

/** Loads the frame's state once and returns a storage that writes each change through. */
export declare function createStorage(
  bridge: Bridge,
  options?: StorageOptions,
): Promise<BridgeStorage>;
