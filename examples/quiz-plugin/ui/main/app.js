// The panel's script: it only says when it loaded (the bridge module comes with the console).
document.getElementById("status").dataset.loaded = "true";
