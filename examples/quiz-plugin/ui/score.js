// The score card: the run's score, as the plugin posted it with the card (context.get's data),
// in the host's theme.
import { applyTheme, connect } from "./bridge.js";

const request = await connect();
const result = document.getElementById("result");
try {
  const [context, theme] = await Promise.all([request("context.get"), request("theme.get")]);
  applyTheme(theme);
  if (typeof context.data?.text === "string") result.textContent = context.data.text;
} catch (e) {
  result.textContent = `The host refused: ${e.message}`;
}
