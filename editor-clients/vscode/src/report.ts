// "Show profile report": the server renders the self-contained HTML page (the same one as
// `kernellsp profile FILE --html`); this shows it in a webview, one panel per document.
import * as vscode from 'vscode';

export interface ProfileReport {
  /** The page, or absent when there is no profile yet (then `message` says why). */
  html?: string | null;
  title?: string;
  message?: string;
}

const panels = new Map<string, vscode.WebviewPanel>();

export function showReport(uri: string, report: ProfileReport | string | null | undefined): void {
  if (typeof report === 'string' || !report || !report.html) {
    const why = typeof report === 'string' ? report : report?.message ?? 'no profile report for this file';
    void vscode.window.showInformationMessage(`kernellsp: ${why}`);
    return;
  }
  const title = report.title ?? 'kernellsp profile';
  let panel = panels.get(uri);
  if (panel) {
    panel.title = title;
    panel.reveal(vscode.ViewColumn.Beside, true);
  } else {
    panel = vscode.window.createWebviewPanel('kernellsp.profile', title,
      { viewColumn: vscode.ViewColumn.Beside, preserveFocus: true },
      // The page embeds its own chart library and data: scripts on, nothing loaded from anywhere.
      { enableScripts: true, localResourceRoots: [], retainContextWhenHidden: true });
    panels.set(uri, panel);
    panel.onDidDispose(() => panels.delete(uri));
  }
  panel.webview.html = report.html;
}
