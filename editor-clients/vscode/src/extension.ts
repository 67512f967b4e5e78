// kernellsp for VS Code: starts `kernellsp serve` for CUDA files (language id `cuda-cpp`), passes the
// `kernellsp` settings section to it, and adds what an editor needs around the server's own features
// (diagnostics, hover, code actions and `workspace/executeCommand` commands, which
// vscode-languageclient registers by itself): palette commands that ask for the kernel, a status bar
// item, the profile report in a webview, and the `kernellsp` output channel.
import * as vscode from 'vscode';
import {
  ExecuteCommandRequest,
  LanguageClient,
  LanguageClientOptions,
  ServerOptions,
  State,
} from 'vscode-languageclient/node';

import { ProfileReport, showReport } from './report';
import { findServer } from './server';
import { CLICK_COMMAND, ServerStatus, StatusItem } from './status';

const SECTION = 'kernellsp';
/** Keys of the `kernellsp` section that belong to this client; the server is not sent them. */
const CLIENT_KEYS = ['server', 'trace'];

/** Server commands (kernellsp/lsp/features/*.py). */
const SERVER = {
  optimize: 'kernellsp.optimize',
  revert: 'kernellsp.revert',
  showProfile: 'kernellsp.showProfile',
  addLaunchSpec: 'kernellsp.addLaunchSpec',
  checkFile: 'kernellsp.checkFile',
  checkWorkspace: 'kernellsp.checkWorkspace',
  status: 'kernellsp.status',
  cancelJob: 'kernellsp.cancelJob',
};

interface KernelSummary {
  name: string;
  line: number;
  hasSpec: boolean;
}

interface FileSummary {
  cancelled?: boolean;
  kernels?: KernelSummary[];
  /** Entries with a launch spec (kernels and host launchers): what optimize can run. */
  entries?: string[];
}

let client: LanguageClient | undefined;
let output: vscode.OutputChannel;
let status: StatusItem;

function log(line: string): void {
  output.appendLine(`[client ${new Date().toISOString().slice(11, 19)}] ${line}`);
}

function clientSettingsRemoved(section: unknown): unknown {
  if (!section || typeof section !== 'object' || Array.isArray(section)) {
    return section;
  }
  const copy: Record<string, unknown> = { ...(section as Record<string, unknown>) };
  for (const key of CLIENT_KEYS) {
    delete copy[key];
  }
  return copy;
}

function serverSection(): unknown {
  return clientSettingsRemoved(vscode.workspace.getConfiguration().get(SECTION));
}

function workspaceDirs(): string[] {
  return (vscode.workspace.workspaceFolders ?? []).filter((f) => f.uri.scheme === 'file').map((f) => f.uri.fsPath);
}

async function startClient(context: vscode.ExtensionContext): Promise<void> {
  status.starting();
  const configured = vscode.workspace.getConfiguration(SECTION).get<string>('server.path') ?? '';
  const lookup = findServer(configured, workspaceDirs());
  if (!lookup.found) {
    const why = 'language server not found';
    log(`${why}; looked at:\n  ${lookup.tried.join('\n  ')}`);
    status.failed(why);
    const choice = await vscode.window.showErrorMessage(
      'kernellsp: language server not found. Install it from a clone or release (pipx install PATH, or ' +
        'pip install PATH into the workspace\'s .venv), or set "kernellsp.server.path" to the kernellsp executable. ' +
        `Looked at: ${lookup.tried.join('; ')}.`,
      'Open Settings', 'Show Output');
    if (choice === 'Open Settings') {
      void vscode.commands.executeCommand('workbench.action.openSettings', 'kernellsp.server.path');
    } else if (choice === 'Show Output') {
      output.show(true);
    }
    return;
  }
  const { command, args, via } = lookup.found;
  log(`server: ${command} ${args.join(' ')} (found via ${via})`);
  const serverOptions: ServerOptions = { command, args, options: { cwd: workspaceDirs()[0] } };
  const clientOptions: LanguageClientOptions = {
    documentSelector: [
      { scheme: 'file', language: 'cuda-cpp' },
      { scheme: 'untitled', language: 'cuda-cpp' },
    ],
    outputChannel: output,
    initializationOptions: serverSection(),
    middleware: {
      workspace: {
        configuration: async (params, token, next) => {
          const result = await next(params, token);
          return Array.isArray(result) ? result.map(clientSettingsRemoved) : result;
        },
      },
      executeCommand: async (cmd, cmdArgs, next) => {
        if (cmd === SERVER.showProfile) {
          // Ask for the HTML page and show it, also when the command came from a code action.
          const uri = String(cmdArgs[0] ?? vscode.window.activeTextEditor?.document.uri.toString() ?? '');
          const report = (await next(cmd, [uri, 'html'])) as ProfileReport | string | undefined;
          showReport(uri, report);
          return report;
        }
        return next(cmd, cmdArgs);
      },
    },
  };
  const lc = new LanguageClient('kernellsp', 'kernellsp', serverOptions, clientOptions);
  client = lc;
  context.subscriptions.push(lc.onDidChangeState((e) => {
    if (e.newState === State.Stopped && client === lc) {
      status.failed('the language server stopped');
    }
  }));
  context.subscriptions.push(lc.onNotification('kernellsp/status', (s: ServerStatus) => status.update(s)));
  try {
    await lc.start();
  } catch (err) {
    const msg = err instanceof Error ? err.message : String(err);
    log(`the server did not start: ${msg}`);
    status.failed(`the language server did not start (${command})`);
    const choice = await vscode.window.showErrorMessage(
      `kernellsp: the language server (${command}, found via ${via}) did not start: ${msg}`, 'Show Output');
    if (choice) {
      output.show(true);
    }
    return;
  }
  try {
    status.update((await runServer(SERVER.status)) as ServerStatus);
  } catch (err) {
    log(`status unavailable: ${err instanceof Error ? err.message : String(err)}`);
  }
}

async function stopClient(): Promise<void> {
  const lc = client;
  client = undefined;
  if (lc) {
    try {
      await lc.stop();
    } catch (err) {
      log(`stopping the server: ${err instanceof Error ? err.message : String(err)}`);
    }
  }
}

/** A server command, straight to the server (no UI middleware). */
async function runServer(command: string, ...args: unknown[]): Promise<unknown> {
  if (!client || !client.isRunning()) {
    throw new Error('the kernellsp language server is not running (see the kernellsp output)');
  }
  return client.sendRequest(ExecuteCommandRequest.type, { command, arguments: args });
}

function activeCudaDocument(): vscode.TextDocument | undefined {
  const doc = vscode.window.activeTextEditor?.document;
  if (!doc || doc.languageId !== 'cuda-cpp') {
    void vscode.window.showWarningMessage('kernellsp: open a CUDA file (.cu, .cuh) first.');
    return undefined;
  }
  return doc;
}

/** The kernel the cursor is in or above (by the kernels' start lines), if any. */
function kernelAtCursor(kernels: KernelSummary[]): string | undefined {
  const line = vscode.window.activeTextEditor?.selection.active.line;
  if (line === undefined) {
    return undefined;
  }
  const above = kernels.filter((k) => k.line <= line).sort((a, b) => b.line - a.line);
  return above[0]?.name;
}

async function pick(names: string[], preferred: string | undefined, placeHolder: string): Promise<string | undefined> {
  if (names.length === 0) {
    return undefined;
  }
  if (names.length === 1) {
    return names[0];
  }
  const ordered = preferred && names.includes(preferred) ? [preferred, ...names.filter((n) => n !== preferred)] : names;
  return vscode.window.showQuickPick(ordered, { placeHolder });
}

async function fileSummary(doc: vscode.TextDocument): Promise<FileSummary | undefined> {
  const summary = (await runServer(SERVER.checkFile, doc.uri.toString())) as FileSummary;
  if (summary.cancelled) {
    void vscode.window.showInformationMessage('kernellsp: the file changed during the check; try again.');
    return undefined;
  }
  return summary;
}

async function optimizeCommand(): Promise<void> {
  const doc = activeCudaDocument();
  const summary = doc && (await fileSummary(doc));
  if (!doc || !summary) {
    return;
  }
  const entries = summary.entries ?? (summary.kernels ?? []).filter((k) => k.hasSpec).map((k) => k.name);
  if (entries.length === 0) {
    void vscode.window.showWarningMessage(
      'kernellsp: no kernel in this file has a launch spec; add one first ("kernellsp: Add launch spec").');
    return;
  }
  const entry = await pick(entries, kernelAtCursor(summary.kernels ?? []), 'Optimize which entry?');
  if (entry) {
    await vscode.commands.executeCommand(SERVER.optimize, doc.uri.toString(), entry);
  }
}

async function addLaunchSpecCommand(): Promise<void> {
  const doc = activeCudaDocument();
  const summary = doc && (await fileSummary(doc));
  if (!doc || !summary) {
    return;
  }
  const kernels = summary.kernels ?? [];
  const missing = kernels.filter((k) => !k.hasSpec).map((k) => k.name);
  if (missing.length === 0) {
    void vscode.window.showInformationMessage('kernellsp: every kernel in this file has a launch spec.');
    return;
  }
  const name = await pick(missing, kernelAtCursor(kernels), 'Add a launch spec for which kernel?');
  if (name) {
    const result = (await vscode.commands.executeCommand(SERVER.addLaunchSpec, doc.uri.toString(), name)) as
      | { applied: boolean; reason?: string | null }
      | undefined;
    if (result && !result.applied && result.reason) {
      void vscode.window.showWarningMessage(`kernellsp: ${result.reason}`);
    }
  }
}

async function revertCommand(): Promise<void> {
  const doc = activeCudaDocument();
  if (!doc) {
    return;
  }
  if (doc.isDirty) {
    void vscode.window.showWarningMessage('kernellsp: save or discard your changes before reverting a rewrite.');
    return;
  }
  const answer = await vscode.window.showWarningMessage(
    `Restore ${vscode.workspace.asRelativePath(doc.uri)} from the backup kernellsp kept before its last rewrite?`,
    { modal: true }, 'Revert');
  if (answer !== 'Revert') {
    return;
  }
  const result = (await vscode.commands.executeCommand(SERVER.revert, doc.uri.toString())) as
    | { reverted: boolean; message: string }
    | undefined;
  if (result) {
    const show = result.reverted ? vscode.window.showInformationMessage : vscode.window.showWarningMessage;
    void show(`kernellsp: ${result.message}`);
  }
}

async function showProfileCommand(): Promise<void> {
  const doc = activeCudaDocument();
  if (doc) {
    await vscode.commands.executeCommand(SERVER.showProfile, doc.uri.toString());
  }
}

async function checkWorkspaceCommand(): Promise<void> {
  const result = (await vscode.commands.executeCommand(SERVER.checkWorkspace)) as
    | { files: number; findings: number; bySeverity?: Record<string, number>; cancelled?: boolean; message?: string }
    | undefined;
  if (!result) {
    return;
  }
  if (result.cancelled) {
    void vscode.window.showInformationMessage('kernellsp: the workspace check was cancelled.');
    return;
  }
  const sev = result.bySeverity ?? {};
  const parts = ['error', 'warning', 'info', 'hint'].filter((k) => sev[k]).map((k) => `${sev[k]} ${k}`);
  const text = `kernellsp: ${result.findings} finding(s) in ${result.files} file(s)` +
    (parts.length ? ` (${parts.join(', ')})` : '') + (result.message ? `; ${result.message}` : '');
  const choice = await vscode.window.showInformationMessage(text, 'Open Problems');
  if (choice) {
    void vscode.commands.executeCommand('workbench.actions.view.problems');
  }
}

async function cancelJobCommand(): Promise<void> {
  const jobs = status.status?.jobs ?? [];
  if (jobs.length === 0) {
    void vscode.window.showInformationMessage('kernellsp: nothing is running.');
    return;
  }
  const chosen = jobs.length === 1 ? jobs[0] : (await vscode.window.showQuickPick(
    jobs.map((j) => ({ label: j.title, description: `${Math.round(j.seconds)} s`, job: j })),
    { placeHolder: 'Cancel which job?' }))?.job;
  if (chosen) {
    await runServer(SERVER.cancelJob, chosen.uri, chosen.kind);
  }
}

async function statusMenu(): Promise<void> {
  if (!client || !client.isRunning()) {
    output.show(true);
    return;
  }
  const items: (vscode.QuickPickItem & { run: () => unknown })[] = [];
  for (const j of status.status?.jobs ?? []) {
    items.push({ label: `$(stop-circle) Cancel: ${j.title}`, description: j.message ?? '',
      run: () => runServer(SERVER.cancelJob, j.uri, j.kind) });
  }
  items.push(
    { label: '$(checklist) Check workspace', run: checkWorkspaceCommand },
    { label: '$(graph) Show profile report', run: showProfileCommand },
    { label: '$(rocket) Optimize kernel…', run: optimizeCommand },
    { label: '$(output) Show output', run: () => output.show(true) },
    { label: '$(debug-restart) Restart server', run: () => restart() },
  );
  const chosen = await vscode.window.showQuickPick(items, { placeHolder: 'kernellsp' });
  if (chosen) {
    await chosen.run();
  }
}

let extensionContext: vscode.ExtensionContext;

async function restart(): Promise<void> {
  await stopClient();
  await startClient(extensionContext);
}

function guarded(fn: () => Promise<unknown>): () => Promise<void> {
  return async () => {
    try {
      await fn();
    } catch (err) {
      const msg = err instanceof Error ? err.message : String(err);
      log(msg);
      void vscode.window.showErrorMessage(`kernellsp: ${msg}`);
    }
  };
}

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  extensionContext = context;
  output = vscode.window.createOutputChannel('kernellsp');
  status = new StatusItem();
  context.subscriptions.push(output, status);
  const commands: [string, () => Promise<unknown>][] = [
    ['kernellsp.ui.optimize', optimizeCommand],
    ['kernellsp.ui.revert', revertCommand],
    ['kernellsp.ui.showProfile', showProfileCommand],
    ['kernellsp.ui.addLaunchSpec', addLaunchSpecCommand],
    ['kernellsp.ui.checkWorkspace', checkWorkspaceCommand],
    ['kernellsp.ui.cancelJob', cancelJobCommand],
    ['kernellsp.ui.showOutput', async () => output.show(true)],
    ['kernellsp.ui.restartServer', restart],
    [CLICK_COMMAND, statusMenu],
  ];
  for (const [id, fn] of commands) {
    context.subscriptions.push(vscode.commands.registerCommand(id, guarded(fn)));
  }
  context.subscriptions.push(vscode.workspace.onDidChangeConfiguration((e) => {
    if (e.affectsConfiguration('kernellsp.server')) {
      log('kernellsp.server changed: restarting the server');
      void restart();
    } else if (e.affectsConfiguration(SECTION)) {
      // The server applies the new settings itself; the runner or GPU host may have changed.
      setTimeout(() => {
        runServer(SERVER.status).then((s) => status.update(s as ServerStatus), () => undefined);
      }, 1000);
    }
  }));
  await startClient(context);
}

export async function deactivate(): Promise<void> {
  await stopClient();
}
