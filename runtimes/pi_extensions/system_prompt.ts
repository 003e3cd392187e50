/**
 * amux: the system prompt of every Pi turn comes from a file amux rewrites before the turn.
 *
 * Loaded with `pi -e <this file>`; the adapter sets AMUX_RUNTIME_SYSTEM_PROMPT_FILE. Before
 * each agent start (one user prompt and every model request it makes) the file is read and
 * appended to Pi's own system prompt, so a prompt saved in amux reaches the next turn of a
 * running session without a restart, and a turn in flight keeps the prompt it started with.
 * An empty or missing file leaves Pi's prompt as it is.
 */

import * as fs from "node:fs";

import type { ExtensionAPI } from "@mariozechner/pi-coding-agent";

export default function (pi: ExtensionAPI) {
	const file = process.env.AMUX_RUNTIME_SYSTEM_PROMPT_FILE;
	if (!file) return;
	pi.on("before_agent_start", async (event) => {
		let text = "";
		try {
			text = fs.readFileSync(file, "utf8");
		} catch {
			return undefined; // no prompt written for this turn
		}
		if (!text.trim()) return undefined;
		return { systemPrompt: `${event.systemPrompt}\n\n${text.trim()}\n` };
	});
}
