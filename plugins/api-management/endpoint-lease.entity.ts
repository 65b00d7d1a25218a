import { defineEntity } from 'rpc-service/plugin';

/** Which node is delivering to an endpoint, until when: one sender per endpoint keeps its deliveries in order. */
export const EndpointLease = defineEntity({
  name: 'EndpointLease',
  tableName: 'api_management_endpoint_lease',
  properties: (p) => ({
    apiKeyId: p.uuid().primary(),
    holder: p.uuid(),
    until: p.datetime(),
  }),
});
