// The quiz panel: the chat it is open in and the quiz this chat's settings ask for, in the
// host's theme (context.get, settings.get, theme.get over the bridge).
import { applyTheme, connect } from "../bridge.js";

const $ = (id) => document.getElementById(id);
$("status").dataset.loaded = "true";

const request = await connect();
try {
  const [context, settings, theme] = await Promise.all([
    request("context.get"),
    request("settings.get"),
    request("theme.get"),
  ]);
  applyTheme(theme);
  $("chat").textContent = context.chat;
  $("questions").textContent = String(settings.questions ?? 3);
  $("level").textContent = settings.level ?? "easy";
  $("settings").hidden = false;
} catch (e) {
  $("status").textContent = `The host refused: ${e.message}`;
}
