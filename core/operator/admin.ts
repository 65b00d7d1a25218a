import { randomUUID } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import * as v from 'valibot';
import type { App } from '../app/app.ts';
import { RpcError } from '../base/errors.ts';
import { email, password, username } from '../base/schemas.ts';
import { parseArgs } from './args.ts';
import { OperatorError, type OperatorCommand } from './command.ts';

const AdminCreateArgs = v.object({
  email,
  username,
  password,
  /** The subscription's name; the username by default, as signup names it. */
  subscriptionName: v.optional(v.pipe(v.string(), v.trim(), v.minLength(1, 'must not be empty'), v.maxLength(200, 'is too long'))),
});

export type AdminCreateArgs = v.InferInput<typeof AdminCreateArgs>;

export interface AdminCreateResult {
  subscriptionId: string;
  subscriptionName: string;
  userId: string;
}

/**
 * `admin create`: a new subscription and its first admin, as AuthRpc.signup
 * makes them (plugins/auth/auth.service.ts), but by the operator: none of
 * signup's gates (invite mode, verification codes, the per-address limit, the
 * reserved usernames) apply, since this is how an installation that keeps
 * signup closed lets its first customers in. The user is made by the auth
 * plugin's UserService, which checks the e-mail address and username are free
 * and hashes the password; then signup's `afterSignup` hooks run.
 */
export const adminCreate: OperatorCommand<AdminCreateArgs, AdminCreateResult> = {
  mayCreate: true,
  async run(app, args) {
    const input = parseArgs(AdminCreateArgs, args);
    const { userService } = app.depsOf('auth');
    const subscriptionId = randomUUID();
    const subscriptionName = input.subscriptionName ?? input.username;
    // Not one transaction: create checks the names on a connection of its own, which the embedded database's one connection
    // would give only after the transaction. A subscription left without its admin is removed instead.
    const user = await refusalOf(async () => {
      await userService.assertAvailable({ email: input.email, username: input.username });
      const em = app.deps.db.forkEm(subscriptionId);
      const now = new Date();
      em.create('Subscription', { id: subscriptionId, name: subscriptionName, serviceCode: null, createdAt: now, updatedAt: now });
      await em.flush();
      // create reads only the context's EntityManager and subscription.
      const fields = { email: input.email, username: input.username, password: input.password, role: 'admin' };
      return (userService.create({ em, subscriptionId }, fields) as Promise<{ id: string }>).catch(async (error: unknown) => {
        await app.deps.db.forkEm(subscriptionId).nativeDelete('Subscription', { id: subscriptionId });
        throw error;
      });
    });
    await afterSignup(app, subscriptionId, user.id);
    return { subscriptionId, subscriptionName, userId: user.id };
  },
};

/** A taken e-mail address or username: the auth plugin's message is the operator's answer. */
async function refusalOf<T>(run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (error) {
    throw error instanceof RpcError ? new OperatorError(error.message) : error;
  }
}

/**
 * What signup does once the user exists: the auth plugin's `afterSignup` hooks
 * (plugins/auth/lifecycle.ts), so a plugin that prepares each new
 * subscription prepares this one too. They take the user as the user sees
 * themself, which AuthRpc.getSession answers.
 */
async function afterSignup(app: App, subscriptionId: string, userId: string): Promise<void> {
  const caller = app.createCaller({ subscriptionId, userId, role: 'admin', apiKeyId: null, sessionId: null, initialContext: null });
  const { user } = await caller.call<{ user: unknown }>('AuthRpc.getSession');
  await app.depsOf('auth').lifecycle.afterSignup({ user, subscriptionId, joinedExisting: false });
}

/**
 * The new admin's password, never from an argument, which shell history and
 * `ps` show: the first line of `file` (`-`: standard input), else of standard
 * input when it is not a terminal, else asked for twice on the terminal
 * without echo.
 */
export async function readPassword(file: string | undefined): Promise<string> {
  if (file !== undefined)
    return firstLine(file === '-' ? await readStdin() : await readFile(file, 'utf8').catch((error: Error) => Promise.reject(new OperatorError(error.message))));
  if (!process.stdin.isTTY) return firstLine(await readStdin());
  const password = await ask('Password: ');
  if ((await ask('Password again: ')) !== password) throw new OperatorError('the two passwords differ');
  return password;
}

const firstLine = (text: string): string => text.split(/\r?\n/, 1)[0]!;

async function readStdin(): Promise<string> {
  let text = '';
  for await (const chunk of process.stdin) text += String(chunk);
  return text;
}

/** One line from the terminal, echoed as nothing; Ctrl-C leaves. */
function ask(prompt: string): Promise<string> {
  const { stdin, stderr } = process;
  stderr.write(prompt);
  stdin.setRawMode(true);
  stdin.resume();
  return new Promise((resolve, reject) => {
    let typed = '';
    const done = (finish: () => void) => {
      stdin.off('data', onData);
      stdin.setRawMode(false);
      stdin.pause();
      stderr.write('\n');
      finish();
    };
    const onData = (chunk: Buffer) => {
      for (const char of chunk.toString('utf8')) {
        if (char === '\r' || char === '\n') return done(() => resolve(typed));
        if (char === '\u0003') return done(() => reject(new OperatorError('cancelled')));
        typed = char === '\u007f' || char === '\b' ? typed.slice(0, -1) : typed + char;
      }
    };
    stdin.on('data', onData);
  });
}
