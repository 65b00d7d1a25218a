import cliProgress from 'cli-progress';
import type { Progress, Report } from './command.ts';

const UNITS = ['B', 'KB', 'MB', 'GB', 'TB'];

/** 1536 → "1.5 KB". */
export function formatBytes(bytes: number): string {
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < UNITS.length - 1) {
    value /= 1024;
    unit++;
  }
  return `${unit === 0 ? value : value.toFixed(1)} ${UNITS[unit]}`;
}

/**
 * A progress bar per stage of a long command on stderr, so stdout keeps only
 * the result; nothing when stderr is not a terminal (a script, a log).
 */
export function progressBars(stream: NodeJS.WriteStream = process.stderr): { report: Report; stop(): void } {
  if (!stream.isTTY) return { report: () => undefined, stop: () => undefined };
  let bar: cliProgress.SingleBar | undefined;
  let stage: string | undefined;
  const start = ({ label, done, total, unit }: Progress) => {
    bar?.stop();
    stage = label;
    bar = new cliProgress.SingleBar(
      {
        stream,
        hideCursor: true,
        format: `${label.padEnd(12)} [{bar}] {percentage}% {value}/{total}`,
        formatValue: (value, _options, type) => (unit === 'bytes' && (type === 'value' || type === 'total') ? formatBytes(value) : String(value)),
      },
      cliProgress.Presets.shades_classic,
    );
    bar.start(total ?? 0, done);
  };
  return {
    report(progress) {
      if (progress.label !== stage) return start(progress);
      if (progress.total !== undefined) bar!.setTotal(progress.total);
      bar!.update(progress.done);
    },
    stop: () => bar?.stop(),
  };
}
