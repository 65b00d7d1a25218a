import { asClass } from 'awilix';
import { definePlugin } from 'rpc-service/plugin';
import * as v from 'valibot';
import { DEPS, type TaskDeps } from './deps.ts';
import { migrations } from './migrations/index.ts';
import { addComment, create, createTaskTree, findById, getData, remove, update } from './operations.ts';
import { COMMENT, Task } from './task.entity.ts';
import { TASK_SCHEMA, TaskService } from './task.service.ts';

/** TaskRpc: task boards (tasks per task instance, subtasks, comments, whole trees at once). */
export const taskPlugin = definePlugin<TaskDeps>({
  id: 'task',
  group: 'TaskRpc',
  coreVersion: '^2.0.0',
  deps: DEPS,
  entities: [Task],
  migrations,
  services: { taskService: asClass(TaskService).singleton() },
  extends: {
    'core.events': [
      { name: 'task.created', describe: 'A task was created: {task}.', payload: v.strictObject({ task: TASK_SCHEMA }) },
      { name: 'task.updated', describe: 'A task was changed: {task}.', payload: v.strictObject({ task: TASK_SCHEMA }) },
      {
        name: 'task.assigned',
        describe: 'A task got assignees: {task, assignees} (the contact ids added).',
        payload: v.strictObject({ task: TASK_SCHEMA, assignees: v.array(v.string()) }),
      },
      { name: 'task.commented', describe: 'A task was commented on: {taskId, comment}.', payload: v.strictObject({ taskId: v.string(), comment: COMMENT }) },
    ],
  },
  operations: { getData, create, update, delete: remove, findById, addComment, createTaskTree },
});
