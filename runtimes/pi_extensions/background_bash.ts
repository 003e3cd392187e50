/**
 * amux: Pi's `bash` tool for ticket workers — a command still running after a few seconds
 * moves to the background, so the worker's next step (and a person's new message) is not
 * held up by a slow build.
 *
 * Loaded with `pi -e <this file>` when the adapter sets AMUX_RUNTIME_BACKGROUND_AFTER
 * (seconds). It replaces the built-in `bash` tool by registering a tool of the same name,
 * built from Pi's own definition (same schema, truncation and result shape) with its own
 * process backend:
 *
 * - each command runs in the work directory in its own process group (`setsid`), its
 *   stdout and stderr going to a log file under $TMPDIR/amux-background/;
 * - if it ends within the limit, the tool returns its output as usual (and the log is
 *   removed);
 * - otherwise it is left running detached and the tool returns at once with what it has
 *   printed so far, its pid and process group, the log file and how to check on it or stop
 *   it; when it ends, "[amux: exited with code N]" is appended to the log;
 * - an abort before the limit kills the group (as the built-in does); a `timeout` the model
 *   asked for still applies after the move;
 * - background groups are killed when Pi shuts down (session_shutdown and process exit);
 *   the adapter also kills every process carrying the session's AMUX_RUNTIME_TAG.
 */

import { spawn } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";

import type { BashOperations, ExtensionAPI } from "@mariozechner/pi-coding-agent";
import { createBashToolDefinition, getShellConfig } from "@mariozechner/pi-coding-agent";

const POLL_MS = 100;

function killGroup(pid: number, signal: NodeJS.Signals = "SIGKILL"): void {
	try {
		process.kill(-pid, signal);
	} catch {
		try {
			process.kill(pid, signal);
		} catch {
			// already gone
		}
	}
}

export default function (pi: ExtensionAPI) {
	const after = Number(process.env.AMUX_RUNTIME_BACKGROUND_AFTER);
	if (!Number.isFinite(after) || after <= 0) return; // not a worker: keep the built-in
	const logDir = path.join(os.tmpdir(), "amux-background");
	const background = new Set<number>(); // process groups left running
	let counter = 0;

	const killBackground = () => {
		for (const pid of background) killGroup(pid);
		background.clear();
	};
	pi.on("session_shutdown", async () => killBackground());
	process.on("exit", killBackground);

	const operations: BashOperations = {
		exec: (command, cwd, { onData, signal, timeout, env }) =>
			new Promise((resolve, reject) => {
				if (!fs.existsSync(cwd)) {
					reject(new Error(`Working directory does not exist: ${cwd}\nCannot execute bash commands.`));
					return;
				}
				fs.mkdirSync(logDir, { recursive: true });
				counter += 1;
				const log = path.join(logDir, `bash-${Date.now()}-${process.pid}-${counter}.log`);
				const out = fs.openSync(log, "w");
				const { shell, args } = getShellConfig();
				let child;
				try {
					child = spawn(shell, [...args, command], {
						cwd,
						detached: true, // setsid: its own process group, outliving this call
						env: env ?? process.env,
						stdio: ["ignore", out, out],
					});
				} catch (err) {
					fs.closeSync(out);
					fs.rmSync(log, { force: true });
					reject(err);
					return;
				}
				fs.closeSync(out); // the child holds its own copy
				const pid = child.pid;
				const reader = fs.openSync(log, "r");
				let offset = 0;
				let settled = false;
				let backgrounded = false;
				let timedOut = false;
				let moveTimer: NodeJS.Timeout | undefined;
				const buffer = Buffer.alloc(64 * 1024);

				const pump = () => {
					if (backgrounded) return;
					for (;;) {
						const n = fs.readSync(reader, buffer, 0, buffer.length, offset);
						if (n <= 0) return;
						offset += n;
						onData(Buffer.from(buffer.subarray(0, n)));
					}
				};
				const poller = setInterval(pump, POLL_MS);
				const cleanup = () => {
					clearInterval(poller);
					clearTimeout(moveTimer);
					if (signal) signal.removeEventListener("abort", onAbort);
				};
				const onAbort = () => {
					if (!backgrounded && pid) killGroup(pid);
				};
				if (signal) {
					if (signal.aborted) onAbort();
					else signal.addEventListener("abort", onAbort, { once: true });
				}
				const timeoutTimer =
					timeout !== undefined && timeout > 0
						? setTimeout(() => {
								timedOut = true;
								if (backgrounded) {
									fs.appendFileSync(log, `\n[amux: stopped after its timeout of ${timeout} s]\n`);
								}
								if (pid) killGroup(pid);
							}, timeout * 1000)
						: undefined;
				if (timeoutTimer && typeof timeoutTimer.unref === "function") timeoutTimer.unref();

				moveTimer = setTimeout(() => {
					if (settled || !pid) return;
					pump();
					backgrounded = true;
					settled = true;
					cleanup();
					fs.closeSync(reader);
					background.add(pid);
					const limit = timeoutTimer ? ` It is stopped after its timeout of ${timeout} s.` : "";
					onData(
						Buffer.from(
							`\n[Still running after ${after} s: moved to the background so you can go on.` +
								` pid ${pid} (its own process group); output goes to ${log}.` +
								` Check it with \`cat ${log}\` (a last line "[amux: exited with code N]" means it ended);` +
								` stop it with \`kill -- -${pid}\`.${limit}]\n`,
						),
					);
					resolve({ exitCode: 0 });
				}, after * 1000);

				child.on("error", (err) => {
					if (settled) return;
					settled = true;
					cleanup();
					if (timeoutTimer) clearTimeout(timeoutTimer);
					fs.closeSync(reader);
					fs.rmSync(log, { force: true });
					reject(err);
				});
				child.on("exit", (code, sig) => {
					if (backgrounded) {
						background.delete(pid as number);
						if (timeoutTimer) clearTimeout(timeoutTimer);
						const how = code === null ? `was killed (${sig})` : `exited with code ${code}`;
						try {
							fs.appendFileSync(log, `\n[amux: ${how}]\n`);
						} catch {
							// the log went away: nothing to tell
						}
						return;
					}
					if (settled) return;
					settled = true;
					pump();
					cleanup();
					if (timeoutTimer) clearTimeout(timeoutTimer);
					fs.closeSync(reader);
					fs.rmSync(log, { force: true });
					if (signal?.aborted) reject(new Error("aborted"));
					else if (timedOut) reject(new Error(`timeout:${timeout}`));
					else resolve({ exitCode: code });
				});
			}),
	};

	const builtin = createBashToolDefinition(process.cwd(), { operations });
	pi.registerTool({
		...builtin,
		description:
			`${builtin.description} A command still running after ${after} seconds is moved to the` +
			" background: the result then says so and names its log file and process group; read" +
			" the log to follow it.",
	});
}
