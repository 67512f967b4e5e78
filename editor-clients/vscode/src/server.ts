// Finding the kernellsp language server: the `kernellsp.server.path` setting, then the workspace's
// `.venv`, then `PATH`, then where `pipx install` and `pip install --user` put executables (`$PIPX_BIN_DIR`,
// `~/.local/bin`: often missing from the PATH of an editor started from a desktop menu). Each step says
// what it looked at, so a failure can name every place tried.
import * as fs from 'fs';
import * as path from 'path';

export interface ServerCommand {
  command: string;
  args: string[];
  /** How it was found: "setting", ".venv", "PATH" or "user bin" (pipx / pip --user). */
  via: string;
}

export interface Lookup {
  found?: ServerCommand;
  /** Every place looked at, in order, with what was wrong with it. */
  tried: string[];
}

const isWindows = process.platform === 'win32';

function isExecutable(file: string): boolean {
  try {
    const st = fs.statSync(file);
    if (!st.isFile()) {
      return false;
    }
    if (isWindows) {
      return true;
    }
    fs.accessSync(file, fs.constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

function expandHome(p: string): string {
  if (p === '~' || p.startsWith('~/')) {
    return path.join(process.env.HOME ?? process.env.USERPROFILE ?? '', p.slice(1));
  }
  return p;
}

/** A configured path: the `kernellsp` executable, a Python interpreter (runs `-m kernellsp`), or a venv directory. */
function fromSetting(raw: string, workspaceDirs: string[], tried: string[]): ServerCommand | undefined {
  let p = expandHome(raw.trim());
  if (!path.isAbsolute(p) && workspaceDirs.length > 0) {
    p = path.join(workspaceDirs[0], p);
  }
  if (fs.existsSync(p) && fs.statSync(p).isDirectory()) {
    const inVenv = venvServer(p);
    if (inVenv) {
      return { ...inVenv, via: 'setting' };
    }
    tried.push(`kernellsp.server.path = ${raw}: a directory without bin/kernellsp`);
    return undefined;
  }
  if (!isExecutable(p)) {
    tried.push(`kernellsp.server.path = ${raw}: not an executable file`);
    return undefined;
  }
  if (/^python(\d+(\.\d+)?)?(\.exe)?$/i.test(path.basename(p))) {
    return { command: p, args: ['-m', 'kernellsp', 'serve'], via: 'setting' };
  }
  return { command: p, args: ['serve'], via: 'setting' };
}

function venvServer(venv: string): Omit<ServerCommand, 'via'> | undefined {
  const exe = isWindows ? path.join(venv, 'Scripts', 'kernellsp.exe') : path.join(venv, 'bin', 'kernellsp');
  return isExecutable(exe) ? { command: exe, args: ['serve'] } : undefined;
}

function onPath(name: string): string | undefined {
  const exts = isWindows ? (process.env.PATHEXT ?? '.EXE;.CMD;.BAT').split(';') : [''];
  for (const dir of (process.env.PATH ?? '').split(path.delimiter)) {
    if (!dir) {
      continue;
    }
    for (const ext of exts) {
      const candidate = path.join(dir, name + ext.toLowerCase());
      if (isExecutable(candidate)) {
        return candidate;
      }
    }
  }
  return undefined;
}

/** Look for the server in the documented order. */
export function findServer(settingPath: string | undefined, workspaceDirs: string[]): Lookup {
  const tried: string[] = [];
  if (settingPath && settingPath.trim()) {
    const found = fromSetting(settingPath, workspaceDirs, tried);
    if (found) {
      return { found, tried };
    }
  } else {
    tried.push('kernellsp.server.path: not set');
  }
  for (const dir of workspaceDirs) {
    const venv = path.join(dir, '.venv');
    const found = venvServer(venv);
    if (found) {
      return { found: { ...found, via: '.venv' }, tried };
    }
    tried.push(`${venv}: no kernellsp installed there`);
  }
  const exe = onPath('kernellsp');
  if (exe) {
    return { found: { command: exe, args: ['serve'], via: 'PATH' }, tried };
  }
  tried.push('PATH: no kernellsp executable');
  const home = process.env.HOME ?? process.env.USERPROFILE ?? '';
  const userBins = [process.env.PIPX_BIN_DIR, home ? path.join(home, '.local', 'bin') : undefined];
  for (const dir of userBins) {
    if (!dir) {
      continue;
    }
    const candidate = path.join(dir, isWindows ? 'kernellsp.exe' : 'kernellsp');
    if (isExecutable(candidate)) {
      return { found: { command: candidate, args: ['serve'], via: 'user bin' }, tried };
    }
    tried.push(`${dir}: no kernellsp executable (pipx install / pip install --user put it there)`);
  }
  return { tried };
}
