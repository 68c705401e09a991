// The page: server health, tabs, and the three panels (each its own module, no build step).
import { showError } from "./common.js";
import { interpreterPanel } from "./interpreter.js";
import { talkPanel } from "./talk.js";
import { transcribePanel } from "./transcribe.js";

const SERVICES = { transcription: "tab-transcribe", agent: "tab-talk", interpreter: "tab-interpreter" };

async function checkHealth() {
  const pill = document.getElementById("health");
  try {
    const response = await fetch("/health", { cache: "no-store" });
    const body = await response.json();
    if (response.ok) {
      pill.dataset.state = "ready";
      pill.textContent = "server ready";
      for (const [service, tab] of Object.entries(SERVICES)) {
        const served = body.services?.[service] !== false;
        const button = document.getElementById(tab);
        button.disabled = !served;
        button.title = served ? "" : "not enabled on this server";
      }
    } else {
      pill.dataset.state = "loading";
      pill.textContent = "server loading…";
    }
  } catch {
    pill.dataset.state = "down";
    pill.textContent = "server unreachable";
  }
}

function tabs() {
  const buttons = [...document.querySelectorAll('[role="tab"]')];
  const select = (chosen) => {
    for (const button of buttons) {
      const selected = button === chosen;
      button.setAttribute("aria-selected", String(selected));
      document.getElementById(button.getAttribute("aria-controls")).hidden = !selected;
    }
    history.replaceState(null, "", `#${chosen.id.replace("tab-", "")}`);
  };
  buttons.forEach((button) => button.addEventListener("click", () => select(button)));
  const fromHash = document.getElementById(`tab-${location.hash.slice(1)}`);
  if (fromHash) select(fromHash);
}

tabs();
transcribePanel(showError);
talkPanel(showError);
interpreterPanel(showError);
checkHealth();
setInterval(checkHealth, 5000);
