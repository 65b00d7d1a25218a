import { execFile } from 'node:child_process';
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';

/**
 * What a node knows of the processes of its machine, read from Linux's
 * /proc: where a process runs (so a node only kills processes it can see),
 * when it started (so a reused pid is not taken for it), and which
 * processes share its session (what it started in turn). Elsewhere these
 * answer null and nothing is killed by recovery
 * (docs/decisions/0059-processes-do-not-outlive-their-node.md).
 */

/**
 * The machine and pid namespace this node sees pids in: the boot id and the
 * pid namespace's inode. Two containers of one machine differ in the second,
 * a rebooted machine in the first; either way a recorded pid means nothing here.
 */
export function thisHost(): string | null {
  try {
    return `${readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim()} ${readlinkSync('/proc/self/ns/pid')}`;
  } catch {
    return null;
  }
}

interface ProcStat {
  state: string;
  session: number;
  /** Clock ticks since boot at which it started. */
  startedAt: bigint;
}

/** Fields of /proc/<pid>/stat, or null once it is gone. The command name, in parentheses, may hold spaces: fields are read after its last `)`. */
function stat(pid: number): ProcStat | null {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
    // fields[0] is field 3 of proc(5): state; session is field 6, starttime field 22.
    return { state: fields[0]!, session: Number(fields[3]), startedAt: BigInt(fields[19]!) };
  } catch {
    return null;
  }
}

/** When a process started (clock ticks since boot), as a text, or null when it is already gone or there is no /proc. */
export const startTicks = (pid: number): string | null => stat(pid)?.startedAt.toString() ?? null;

/**
 * Kills (SIGKILL) every live process of the session a process started
 * (its pid is the session's id, as it was started `detached`) that did not
 * start before it: the process itself if it is still that process, and what
 * it started in turn. While any of them lives the kernel keeps the session's
 * id from being reused, so a process of that session started since is one of
 * them. Answers how many were killed.
 */
export function killSession(sessionId: number, startedAt: string): number {
  let killed = 0;
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const found = stat(Number(entry));
    if (!found || found.session !== sessionId || found.state === 'Z' || found.startedAt < BigInt(startedAt)) continue;
    try {
      process.kill(Number(entry), 'SIGKILL');
      killed++;
    } catch {
      // It ended meanwhile.
    }
  }
  return killed;
}

/**
 * The start of the command line that makes the kernel kill a process when
 * this node dies, even by SIGKILL (prctl PR_SET_PDEATHSIG, through
 * util-linux's `/usr/bin/setpriv --pdeathsig KILL`, which then executes the command
 * itself, keeping its pid); none when setpriv lacks it (or off Linux).
 * Node starts children from its main thread, whose end is what the kernel
 * watches. Tried once, with /bin/true.
 */
export const parentDeathWrapper: () => Promise<string[]> = (() => {
  let found: Promise<string[]> | undefined;
  const wrapper = ['/usr/bin/setpriv', '--pdeathsig', 'KILL', '--'];
  return () => (found ??= new Promise((resolve) => execFile(wrapper[0]!, [...wrapper.slice(1), '/bin/true'], (error) => resolve(error ? [] : wrapper))));
})();
