import { asClass } from 'awilix';
import { definePlugin } from 'rpc-service/plugin';
import { DEPS, type TaskDeps } from './deps.ts';
import { migrations } from './migrations/index.ts';
import { addComment, create, createTaskTree, findById, getData, remove, update } from './operations.ts';
import { Task } from './task.entity.ts';
import { TaskService } from './task.service.ts';

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
      { name: 'task.created', describe: 'A task was created: {task}.' },
      { name: 'task.updated', describe: 'A task was changed: {task}.' },
      { name: 'task.assigned', describe: 'A task got assignees: {task, assignees} (the contact ids added).' },
      { name: 'task.commented', describe: 'A task was commented on: {taskId, comment}.' },
    ],
  },
  operations: { getData, create, update, delete: remove, findById, addComment, createTaskTree },
});
