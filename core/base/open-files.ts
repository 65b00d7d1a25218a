import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

/** Where neither source answers: the usual soft limit, so defaults derived from it stay cautious. */
const FALLBACK = 1024;
/** Taken for `unlimited`: Linux's default ceiling on descriptors per process (fs.nr_open). */
const UNLIMITED = 1_048_576;

/**
 * How many files (sockets included) this process may hold open: its soft
 * RLIMIT_NOFILE, as `ulimit -n` shows it. Node raises the soft limit to the
 * hard one as it starts, so this is read from the process itself: from /proc
 * on Linux, else from a shell it starts (which inherits the limit).
 */
export function openFileLimit(): number {
  return fromProc() ?? fromShell() ?? FALLBACK;
}

function fromProc(): number | undefined {
  try {
    const line = readFileSync('/proc/self/limits', 'utf8')
      .split('\n')
      .find((text) => text.startsWith('Max open files'));
    return line ? parse(line.split(/\s{2,}/)[1]) : undefined;
  } catch {
    return undefined;
  }
}

function fromShell(): number | undefined {
  try {
    return parse(execFileSync('/bin/sh', ['-c', 'ulimit -n'], { encoding: 'utf8', timeout: 2000 }));
  } catch {
    return undefined;
  }
}

function parse(text: string | undefined): number | undefined {
  const value = text?.trim();
  if (value === 'unlimited') return UNLIMITED;
  return value && /^\d+$/.test(value) ? Number(value) : undefined;
}
