import * as v from 'valibot';
import { OperatorError } from './command.ts';

/**
 * A command's arguments as its schema reads them: they may come over the
 * control socket as any JSON. Every problem in one line, each with the
 * argument it is about.
 */
export function parseArgs<S extends v.GenericSchema>(schema: S, args: unknown): v.InferOutput<S> {
  const parsed = v.safeParse(schema, args);
  if (parsed.success) return parsed.output;
  throw new OperatorError(
    parsed.issues
      .map((issue) => {
        const at = v.getDotPath(issue);
        return at ? `${at}: ${issue.message}` : issue.message;
      })
      .join('; '),
  );
}
