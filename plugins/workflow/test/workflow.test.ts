import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { WorkflowRpcCreateParams, WorkflowRpcGetDataParams } from '../../../test/support/caller.ts';
import { refused, type Who } from '../../../test/support/caller.ts';
import { startTestApp, type TestApp } from '../../../test/support/harness.ts';
import { addUser, type Member } from '../../../test/support/users.ts';

/** A small valid graph: start → check → (vip) greet → end, else → end. */
const graph = () => ({
  nodes: [
    { id: 'start', type: 'start' },
    { id: 'check', type: 'condition', config: { expression: '$args.amount > 100' } },
    { id: 'greet', type: 'set', config: { values: { greeting: '"Hello " & $args.name' } } },
    { id: 'done', type: 'end', config: { output: '{"greeting": greeting}' } },
  ],
  edges: [
    { source: 'start', target: 'check' },
    { source: 'check', target: 'greet', condition: '$result' },
    { source: 'check', target: 'done' },
    { source: 'greet', target: 'done' },
  ],
});

describe('WorkflowRpc: records', () => {
  let t: TestApp;
  let admin: Awaited<ReturnType<TestApp['signup']>>;
  let member: Member;
  let stranger: Awaited<ReturnType<TestApp['signup']>>;
  const create = (session: Who, params: WorkflowRpcCreateParams) => t.as(session).WorkflowRpc.create({ ...graph(), ...params });
  const issuesOf = async (params: Record<string, unknown>) => {
    const { issues } = await refused(t.as(admin).call('WorkflowRpc.create', { name: 'Broken', ...params }), 'VALIDATION_ERROR');
    assert.ok(issues, 'the refusal names its issues');
    return issues;
  };

  before(async () => {
    t = await startTestApp({ withNotes: false, plugins: ['auth', 'workflow', 'agent-config', 'memory'] });
    admin = await t.signup();
    member = await addUser(t, admin.subscriptionId, 'user');
    stranger = await t.signup();
  });
  after(() => t.close());

  it('creates, finds, updates and deletes a workflow with all its fields', async () => {
    const created = await create(admin, {
      name: 'Onboarding',
      description: 'Greets big spenders',
      variables: { greeting: null },
      tags: ['sales', 'sales', 'welcome'],
      contextId: 'campaign-7',
    });
    assert.deepEqual(Object.keys(created).sort(), [
      '_id',
      'contextId',
      'createdAt',
      'description',
      'edges',
      'name',
      'nodes',
      'projectId',
      'subscriptionId',
      'tags',
      'updatedAt',
      'userId',
      'variables',
    ]);
    assert.deepEqual(
      [created.name, created.description, created.tags, created.contextId, created.subscriptionId],
      ['Onboarding', 'Greets big spenders', ['sales', 'welcome'], 'campaign-7', admin.subscriptionId],
    );
    assert.deepEqual((created.nodes as unknown[])[0], { id: 'start', type: 'start', config: {} }, 'configs are stored as checked, defaults filled in');
    assert.deepEqual(created.edges, graph().edges);
    assert.deepEqual(await t.as(member).WorkflowRpc.findById({ id: created._id }), created);

    const updated = await t.as(admin).WorkflowRpc.update({ _id: created._id, description: 'Greets everyone', tags: ['welcome'] });
    assert.deepEqual([updated.description, updated.tags, updated.name, updated.nodes], ['Greets everyone', ['welcome'], 'Onboarding', created.nodes]);
    assert.ok(updated.updatedAt >= created.updatedAt);

    const deleted = await t.as(admin).WorkflowRpc.delete({ _id: created._id });
    assert.deepEqual(deleted, {}, 'nothing beside success (a bare `{success: true}` on the wire)');
    await refused(t.as(admin).WorkflowRpc.findById({ id: created._id }), 'NOT_FOUND');
  });

  it('refuses a graph with an unknown node type, a dangling edge, no start, an unreachable end or a bad expression, naming the node', async () => {
    const { nodes, edges } = graph();
    const unknown = await issuesOf({
      nodes: [...nodes.slice(0, 3), { id: 'mail', type: 'sendFax', config: {} }, nodes[3]],
      edges: [...edges, { source: 'greet', target: 'mail' }, { source: 'mail', target: 'done' }],
    });
    assert.deepEqual(
      unknown.map((issue) => issue.path),
      ['nodes.3.type'],
    );
    assert.match(unknown[0]!.message, /node "mail": unknown node type "sendFax"; known: start, end, set, condition, rpc, http, wait, delay, tool, ai/);

    const dangling = await issuesOf({ nodes, edges: [...edges, { source: 'greet', target: 'nowhere' }] });
    assert.deepEqual(
      dangling.map((issue) => [issue.path, issue.message]),
      [['edges.4.target', 'edge 4: no node "nowhere"']],
    );

    const noStart = await issuesOf({ nodes: nodes.slice(1), edges: edges.slice(1) });
    assert.ok(noStart.some((issue) => issue.path === 'nodes' && issue.message === 'a workflow needs a start node'));
    assert.deepEqual(
      await issuesOf({}).then((issues) => issues.map((issue) => issue.message)),
      ['a workflow needs a start node', 'a workflow needs an end node'],
      'an empty graph',
    );

    const unreachable = await issuesOf({ nodes: [...nodes, { id: 'late', type: 'end' }], edges });
    assert.deepEqual(
      unreachable.map((issue) => [issue.path, issue.message]),
      [['nodes.4', 'node "late" (an end node) cannot be reached from the start node']],
    );

    const deadEnd = await issuesOf({ nodes, edges: edges.filter((edge) => edge.source !== 'greet') });
    assert.deepEqual(
      deadEnd.map((issue) => issue.message),
      ['node "greet" has no edge to follow (only end nodes may end a run)'],
    );

    const badConfig = await issuesOf({
      nodes: [
        nodes[0],
        { id: 'check', type: 'condition', config: { expression: '$args.amount >' } },
        { id: 'greet', type: 'set', config: { values: {} } },
        nodes[3],
      ],
      edges,
    });
    assert.deepEqual(
      badConfig.map((issue) => issue.path),
      ['nodes.1.config.expression', 'nodes.2.config.values'],
    );
    assert.match(badConfig[0]!.message, /^node "check": expression is not a valid JSONata expression/);
    assert.match(badConfig[1]!.message, /node "greet": values must set at least one variable/);

    const twoStarts = await issuesOf({ nodes: [...nodes, { id: 'again', type: 'start' }], edges: [...edges, { source: 'again', target: 'done' }] });
    assert.ok(twoStarts.some((issue) => issue.message === 'a workflow has one start node, not 2 ("start", "again")'));
    const intoStart = await issuesOf({ nodes, edges: [...edges, { source: 'greet', target: 'start' }] });
    assert.deepEqual(
      intoStart.map((issue) => issue.path),
      ['edges.4.target'],
    );

    const references = await issuesOf({
      nodes: [
        nodes[0],
        { id: 'look', type: 'tool', config: { tool: 'crystal.ball' } },
        { id: 'ask', type: 'ai', config: { prompt: 'Hi {{ $args.name }}', model: 'local-lexical-384' } },
        nodes[3],
      ],
      edges: [
        { source: 'start', target: 'look' },
        { source: 'look', target: 'ask' },
        { source: 'ask', target: 'done' },
      ],
    });
    assert.deepEqual(
      references.map((issue) => issue.message),
      ['node "look": crystal.ball is not an available tool (see getAvailableTools)', 'node "ask": local-lexical-384 is not a chat model of the AI catalogue'],
    );
    const badTemplate = await issuesOf({
      nodes: [nodes[0], { id: 'call', type: 'http', config: { url: 'https://example.com/{{ $args.( }}' } }, nodes[3]],
      edges: [
        { source: 'start', target: 'call' },
        { source: 'call', target: 'done' },
      ],
    });
    assert.deepEqual(
      badTemplate.map((issue) => issue.path),
      ['nodes.1.config.url'],
    );

    // An update that breaks the graph changes nothing.
    const kept = await create(admin, { name: 'Kept' });
    await refused(t.as(admin).WorkflowRpc.update({ _id: kept._id, edges: [] }), 'VALIDATION_ERROR');
    assert.deepEqual((await t.as(admin).WorkflowRpc.findById({ id: kept._id })).edges, kept.edges);
  });

  it('keeps names unique in a subscription whatever their case, and lets only creators, admins and staff change a workflow', async () => {
    const mine = await create(member, { name: 'Member flow' });
    await refused(t.as(admin).WorkflowRpc.create({ ...graph(), name: 'MEMBER FLOW' }), 'CONFLICT');
    assert.equal(
      (await refused(t.as(admin).WorkflowRpc.create({ ...graph(), name: '7d3c7a55-2f3e-4c1f-9a8b-6f0e2d1c3b4a' }), 'VALIDATION_ERROR')).issues?.[0]?.path,
      'name',
    );
    // Another subscription may use the name.
    assert.equal((await create(stranger, { name: 'Member flow' })).name, 'Member flow');

    const other = await create(admin, { name: 'Admin flow' });
    await refused(t.as(member).WorkflowRpc.update({ _id: other._id, description: 'mine now' }), 'FORBIDDEN');
    await refused(t.as(member).WorkflowRpc.delete({ _id: other._id }), 'FORBIDDEN');
    assert.equal((await t.as(admin).WorkflowRpc.update({ _id: mine._id, name: 'member flow' })).name, 'member flow', 'a change of case is no conflict');

    const strangers = t.as(stranger).WorkflowRpc;
    for (const [method, call] of [
      ['WorkflowRpc.findById', () => strangers.findById({ id: mine._id })],
      ['WorkflowRpc.update', () => strangers.update({ _id: mine._id, description: 'x' })],
      ['WorkflowRpc.delete', () => strangers.delete({ _id: mine._id })],
    ] as const) {
      await refused(call(), 'NOT_FOUND', method);
    }
    const theirs = await t.as(stranger).WorkflowRpc.getData({ pageSize: 200 });
    assert.ok(theirs.data.every((workflow) => workflow.subscriptionId === stranger.subscriptionId));
  });

  it('lists with document-store filters ($regex with $options, tags, dates), sort and paging; tags and field values for forms', async () => {
    const tenant = await t.signup();
    for (const [name, tags] of [
      ['Lead intake', ['sales', 'crm']],
      ['lead scoring', ['sales']],
      ['Invoice reminder', ['billing']],
      ['Churn alert', []],
    ] as const) {
      await create(tenant, { name, tags: [...tags] });
    }
    const list = (params: WorkflowRpcGetDataParams) => t.as(tenant).WorkflowRpc.getData(params);
    const names = async (params: WorkflowRpcGetDataParams) => (await list(params)).data.map((workflow) => workflow.name);

    const all = await list({});
    assert.equal(all.totalCount, 4);
    assert.deepEqual(await names({ filter: { name: { $regex: '^lead', $options: 'i' } }, sort: { name: 1 } }), ['Lead intake', 'lead scoring']);
    assert.deepEqual(await names({ filter: { name: { $regex: '^lead' } } }), ['lead scoring'], 'case-sensitive without $options');
    assert.deepEqual(await names({ filter: { tags: 'sales' }, sort: { name: -1 } }), ['lead scoring', 'Lead intake']);
    assert.deepEqual(await names({ filter: { tags: { $in: ['crm', 'billing'] } }, sort: { name: 1 } }), ['Invoice reminder', 'Lead intake']);
    assert.deepEqual(await names({ filter: { tags: { $nin: ['sales'] } }, sort: { name: 1 } }), ['Churn alert', 'Invoice reminder']);
    assert.deepEqual(await names({ filter: { $or: [{ name: 'Churn alert' }, { tags: 'billing' }] }, sort: { createdAt: 1 } }), [
      'Invoice reminder',
      'Churn alert',
    ]);
    const paged = await list({ sort: { name: 1 }, page: 2, pageSize: 3 });
    assert.deepEqual([paged.totalCount, paged.data.map((workflow) => workflow.name)], [4, ['lead scoring']]);
    for (const [params, path] of [
      [{ filter: { nodes: 'x' } }, 'filter.nodes'],
      [{ filter: { tags: { $regex: 'a' } } }, 'filter.tags.$regex'],
      [{ filter: { name: { $where: 'x' } } }, 'filter.name.$where'],
      [{ pageSize: 0 }, 'pageSize'],
      [{ sort: { nodes: 1 } }, 'sort.nodes'],
    ] as const) {
      const error = await refused(t.as(tenant).call('WorkflowRpc.getData', params), 'VALIDATION_ERROR', JSON.stringify(params));
      assert.equal(error.issues?.[0]?.path, path);
    }

    assert.deepEqual(await t.as(tenant).WorkflowRpc.getWorkflowTags({}), [
      { value: 'billing', label: 'billing' },
      { value: 'crm', label: 'crm' },
      { value: 'sales', label: 'sales' },
    ]);

    const values = await t.as(tenant).WorkflowRpc.getFieldValues({
      fieldName: 'workflowId',
      reference: { collection: 'workflows', valueField: '_id', displayField: 'name', filter: { tags: 'sales' }, sort: { name: 1 } },
    });
    assert.deepEqual(
      values.map((value) => value.label),
      ['Lead intake', 'lead scoring'],
    );
    assert.ok(values.every((value) => /^[0-9a-f-]{36}$/.test(String(value.value))));

    await t.as(tenant).AgentConfigRpc.create({ name: 'Closer', model: 'gpt-4o-mini' });
    await t.as(tenant).AgentConfigRpc.create({ name: 'Helper', model: 'gpt-4o' });
    assert.deepEqual(
      await t.as(tenant).WorkflowRpc.getFieldValues({
        fieldName: 'agent',
        reference: { collection: 'agentConfigs', valueField: 'name', displayField: 'model', sort: { name: 1 } },
      }),
      [
        { value: 'Closer', label: 'gpt-4o-mini' },
        { value: 'Helper', label: 'gpt-4o' },
      ],
    );
    const unknownCollection = await refused(
      t.as(tenant).WorkflowRpc.getFieldValues({ fieldName: 'x', reference: { collection: 'secrets', valueField: '_id', displayField: 'name' } }),
      'VALIDATION_ERROR',
    );
    assert.equal(unknownCollection.issues?.[0]?.path, 'reference.collection');
    const unknownField = await refused(
      t.as(tenant).WorkflowRpc.getFieldValues({ fieldName: 'x', reference: { collection: 'workflows', valueField: 'nodes', displayField: 'name' } }),
      'VALIDATION_ERROR',
    );
    assert.equal(unknownField.issues?.[0]?.path, 'reference.valueField');
    // Another subscription's workflows are not among the values.
    const theirValues = await t
      .as(stranger)
      .WorkflowRpc.getFieldValues({ fieldName: 'x', reference: { collection: 'workflows', valueField: '_id', displayField: 'name' } });
    assert.ok(!theirValues.some((value) => value.label === 'Lead intake'));
  });

  it('lists the available tools with their params schemas', async () => {
    const tools = await t.as(member).WorkflowRpc.getAvailableTools({});
    const recall = tools.find((tool) => tool.name === 'memory.recall');
    assert.ok(recall, 'memory.recall is listed');
    assert.deepEqual(Object.keys(recall).sort(), ['description', 'name', 'schema']);
    assert.equal(recall.schema.type, 'object');
    assert.ok('queryText' in (recall.schema.properties as object));
  });

  it('generates leads from CSV or JSON the caller supplies', async () => {
    const csv = [
      'First Name,Last Name,E-mail,Organization,Phone',
      'Ada,Lovelace,ADA@example.com,Analytical Engines,1',
      '"Grace","Hopper","grace@navy.example","US Navy, Research",2',
      'Alan,Turing,not-an-email,,3',
      ',,,,',
      'Ada,L.,ada@example.com,Duplicate Ltd,4',
    ].join('\n');
    assert.deepEqual(await t.as(member).WorkflowRpc.generateDynamicLeads({ toolClassName: 'CsvLeadImporter', properties: { csv } }), [
      { name: 'Ada Lovelace', email: 'ada@example.com', company: 'Analytical Engines' },
      { name: 'Grace Hopper', email: 'grace@navy.example', company: 'US Navy, Research' },
      { name: 'Alan Turing', email: null, company: null },
    ]);
    assert.deepEqual(
      await t.as(member).WorkflowRpc.generateDynamicLeads({
        toolClassName: 'CsvLeadImporter',
        properties: { csv: 'name;email;company\nLin;lin@example.org;Acme', delimiter: ';' },
      }),
      [{ name: 'Lin', email: 'lin@example.org', company: 'Acme' }],
    );
    assert.deepEqual(
      await t.as(member).WorkflowRpc.generateDynamicLeads({
        toolClassName: 'JsonLeadImporter',
        properties: { json: '[{"fullName":"Bo Diddley","email":"bo@example.net","company":"Chess"},{"phone":"1"}]' },
      }),
      [{ name: 'Bo Diddley', email: 'bo@example.net', company: 'Chess' }],
    );
    assert.deepEqual(
      await t.as(member).WorkflowRpc.generateDynamicLeads({ toolClassName: 'JsonLeadImporter', properties: { leads: [{ email: 'x@example.com' }] } }),
      [{ name: 'x', email: 'x@example.com', company: null }],
    );
    for (const [params, path] of [
      [{ toolClassName: 'Oracle', properties: {} }, 'toolClassName'],
      [{ toolClassName: 'CsvLeadImporter', properties: {} }, 'properties.csv'],
      [{ toolClassName: 'CsvLeadImporter', properties: { csv: 'name,email\n"unclosed,x' } }, 'properties'],
      [{ toolClassName: 'JsonLeadImporter', properties: { json: '{"not": "a list"}' } }, 'properties'],
      [{ toolClassName: 'JsonLeadImporter', properties: { json: '[1', leads: [] } }, 'properties'],
    ] as const) {
      const error = await refused(t.as(member).WorkflowRpc.generateDynamicLeads(params), 'VALIDATION_ERROR', JSON.stringify(params));
      assert.equal(error.issues?.[0]?.path, path, JSON.stringify(params));
    }
  });
});
