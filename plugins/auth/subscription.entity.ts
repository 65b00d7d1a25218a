import { defineEntity, type InferEntity } from 'rpc-service/plugin';

/** A tenant: everything of a subscription carries its id. Signup makes one with its first user. */
export const Subscription = defineEntity({
  name: 'Subscription',
  tableName: 'auth_subscription',
  properties: (p) => ({
    id: p.uuid().primary(),
    name: p.text(),
    serviceCode: p.text().nullable(),
    createdAt: p.datetime().onCreate(() => new Date()),
    updatedAt: p
      .datetime()
      .onCreate(() => new Date())
      .onUpdate(() => new Date()),
  }),
});
export type Subscription = InferEntity<typeof Subscription>;
