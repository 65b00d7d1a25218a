import { register } from 'tsx/esm/api';

let registered = false;

/**
 * A worker written in TypeScript (a plugin's own file) run by the built
 * service: tsx's loader is registered in the thread on its first such task,
 * then the file's default export takes the task's data.
 */
export default async function runTypeScript({ file, data }: { file: string; data: unknown }): Promise<unknown> {
  if (!registered) {
    register();
    registered = true;
  }
  const worker = (await import(file)) as { default: (data: unknown) => unknown };
  return worker.default(data);
}
