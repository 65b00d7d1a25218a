import type { App } from '../app/app.ts';

/** How far a long command has come, for the command line's progress bar. */
export interface Progress {
  /** What it is doing now: `database`, `files`, `packing`, `unpacking` (checked as it unpacks), `migrations`. */
  label: string;
  done: number;
  /** Unknown until the command has counted. */
  total?: number;
  unit: 'bytes' | 'items';
}

export type Report = (progress: Progress) => void;

/**
 * An administration command that needs the running service's state: it runs
 * in the serving process when one serves the installation (asked over the
 * control socket, core/operator/control.ts), else in the command's own process
 * with an app that does no background work. Either way it gets the same App.
 * Its args and result travel as JSON.
 */
export interface OperatorCommand<A = Record<string, unknown>, R = unknown> {
  run(app: App, args: A, report: Report): Promise<R>;
  /**
   * It may be the first use of an embedded installation (`admin create`,
   * `tenant import`). Any other command refuses a DATA_DIR that holds none:
   * opening it would make a new, empty one where a mistyped path points.
   */
  mayCreate?: true;
}

/** A refusal the operator can act on: printed as one line, no stack. */
export class OperatorError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'OperatorError';
  }
}
