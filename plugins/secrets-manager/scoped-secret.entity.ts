import { defineEntity, type InferEntity } from 'rpc-service/plugin';

export const SCOPES = ['subscription', 'project', 'agent'] as const;
export type Scope = (typeof SCOPES)[number];

/** A scope-based secret: where it applies (subscription, a project, an agent), its metadata and its sealed value. */
export const ScopedSecret = defineEntity({
  name: 'ScopedSecret',
  tableName: 'secrets_manager_secret',
  properties: (p) => ({
    subscriptionId: p.uuid().primary(),
    id: p.uuid().primary(),
    scope: p.enum([...SCOPES]),
    projectId: p.text().nullable(),
    agentName: p.text().nullable(),
    key: p.text(),
    label: p.text().nullable(),
    description: p.text().nullable(),
    /** Sealed under the subscription's data key; never returned by a list. */
    value: p.text(),
    createdAt: p.datetime().onCreate(() => new Date()),
    updatedAt: p
      .datetime()
      .onCreate(() => new Date())
      .onUpdate(() => new Date()),
  }),
  uniques: [
    {
      // One secret per place and key; an absent project or agent counts as one place (NULLs would all differ).
      name: 'secrets_manager_secret_place_unique',
      expression:
        'create unique index "secrets_manager_secret_place_unique" on "secrets_manager_secret" ' +
        `("subscription_id", "scope", coalesce("project_id", ''), coalesce("agent_name", ''), "key")`,
    },
  ],
});
export type ScopedSecret = InferEntity<typeof ScopedSecret>;
