import { backup } from './backup.ts';
import type { OperatorCommand } from './command.ts';

/** The commands a serving process answers on its control socket, and the command line runs itself when none serves. */
export const OPERATOR_COMMANDS: Readonly<Record<string, OperatorCommand<never>>> = { backup };
