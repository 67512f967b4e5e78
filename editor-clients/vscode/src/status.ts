// The status bar item: where GPU work runs (runner, GPU or why there is none) and the running job,
// which a click offers to cancel. Fed by the server's `kernellsp/status` notification and the
// `kernellsp.status` command (same payload).
import * as vscode from 'vscode';

export interface JobInfo {
  uri: string;
  kind: string;
  title: string;
  seconds: number;
  message?: string | null;
}

export interface ServerStatus {
  runner: string;
  gpuHost?: string | null;
  gpu: { ready: boolean; name?: string | null; problem?: string | null };
  jobs: JobInfo[];
}

export const CLICK_COMMAND = 'kernellsp.ui.statusMenu';

export class StatusItem implements vscode.Disposable {
  private readonly item: vscode.StatusBarItem;
  status: ServerStatus | undefined;

  constructor() {
    this.item = vscode.window.createStatusBarItem('kernellsp.status', vscode.StatusBarAlignment.Left, 50);
    this.item.name = 'kernellsp';
    this.item.command = CLICK_COMMAND;
    this.starting();
    this.item.show();
  }

  starting(): void {
    this.status = undefined;
    this.item.text = '$(loading~spin) kernellsp';
    this.item.tooltip = 'kernellsp: starting the language server';
    this.item.backgroundColor = undefined;
  }

  failed(why: string): void {
    this.status = undefined;
    this.item.text = '$(error) kernellsp';
    this.item.tooltip = `kernellsp: ${why}\nClick for the output.`;
    this.item.backgroundColor = new vscode.ThemeColor('statusBarItem.errorBackground');
  }

  update(status: ServerStatus): void {
    this.status = status;
    this.item.backgroundColor = undefined;
    const where = describeRunner(status);
    const lines = [`kernellsp — runner: ${where}`];
    if (status.gpu.problem) {
      lines.push(`GPU work is off: ${status.gpu.problem}`);
    }
    if (status.jobs.length > 0) {
      const job = status.jobs[0];
      const more = status.jobs.length > 1 ? ` (+${status.jobs.length - 1})` : '';
      this.item.text = `$(sync~spin) kernellsp: ${job.title}${more}`;
      for (const j of status.jobs) {
        lines.push(`running: ${j.title} (${Math.round(j.seconds)} s)${j.message ? ' — ' + j.message : ''}`);
      }
      lines.push('Click to cancel.');
    } else {
      const icon = status.gpu.ready ? '$(chip)' : '$(circle-slash)';
      const gpu = status.gpu.ready ? status.gpu.name || 'GPU' : 'no GPU';
      this.item.text = `${icon} kernellsp: ${gpu}`;
      lines.push('Click for kernellsp commands.');
    }
    this.item.tooltip = lines.join('\n');
  }

  dispose(): void {
    this.item.dispose();
  }
}

export function describeRunner(status: ServerStatus): string {
  if (status.runner === 'ssh') {
    return `ssh ${status.gpuHost ?? '(no gpuHost set)'}${status.gpu.name ? ' · ' + status.gpu.name : ''}`;
  }
  if (status.runner === 'none') {
    return 'none (static findings only)';
  }
  return `local${status.gpu.name ? ' · ' + status.gpu.name : ''}`;
}
