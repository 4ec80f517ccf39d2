// hello-js: an add-on plugin written in JavaScript, built into a WebAssembly component with
// componentize-js (StarlingMonkey), to show that the flotilla:addon@0.1.0 contract is
// language-neutral. It is the helloworld add-on, smaller: one agent Deployment per cluster,
// a greeting from the AddOnDeploymentConfig's customized variable GREETING, hub permissions in
// the cluster namespace, OCM's default CSR rules (for exactly the agent's identity) and health
// from Deployment feedback.
//
// WIT → JS mapping (componentize-js / jco): kebab-case names become camelCase, records are
// objects, variants are {tag, val}, enums are strings, option<T> is the value or undefined, and
// a result's err is returned by throwing the error payload.

import { log } from 'flotilla:addon/host@0.1.0';

const AGENT = 'hello-js-agent';
const IMAGE = 'quay.io/open-cluster-management/addon-examples:latest';

function agentUser(cluster, addon) {
  return `system:open-cluster-management:cluster:${cluster}:addon:${addon}:agent:${addon}`;
}

function agentGroups(cluster, addon) {
  return [
    `system:open-cluster-management:cluster:${cluster}:addon:${addon}`,
    `system:open-cluster-management:addon:${addon}`,
  ];
}

function invalidConfig(message) {
  return { tag: 'invalid-config', val: message };
}

// The customized variables of the last AddOnDeploymentConfig among the resolved configs.
function variables(configs) {
  const out = {};
  for (const config of configs) {
    if (config.resource !== 'addondeploymentconfigs') continue;
    let spec;
    try {
      spec = JSON.parse(config.specJson);
    } catch (e) {
      throw invalidConfig(`${config.namespace}/${config.name}: spec is not JSON: ${e}`);
    }
    const vars = spec.customizedVariables ?? [];
    if (!Array.isArray(vars)) {
      throw invalidConfig(`${config.namespace}/${config.name}: customizedVariables is not a list`);
    }
    for (const v of vars) out[v.name] = v.value;
  }
  return out;
}

export const hooks = {
  describe() {
    return {
      registrations: [{ tag: 'kube-client', val: { subject: undefined } }],
      health: { tag: 'deployment-availability' },
      supportedConfigs: [
        { group: 'addon.open-cluster-management.io', resource: 'addondeploymentconfigs', defaultConfig: undefined },
      ],
      defaultInstallNamespace: undefined,
    };
  },

  manifests(cluster, addon, configs) {
    const vars = variables(configs);
    const greeting = vars.GREETING ?? 'hello';
    const ns = addon.installNamespace;
    log('info', `rendering ${addon.name} for ${cluster.name} into ${ns}`);
    const labels = { app: AGENT };
    const objects = [
      {
        apiVersion: 'v1',
        kind: 'ServiceAccount',
        metadata: { name: `${AGENT}-sa`, namespace: ns },
      },
      {
        apiVersion: 'apps/v1',
        kind: 'Deployment',
        metadata: { name: AGENT, namespace: ns, labels },
        spec: {
          replicas: 1,
          selector: { matchLabels: labels },
          template: {
            metadata: { labels },
            spec: {
              serviceAccountName: `${AGENT}-sa`,
              containers: [
                {
                  name: AGENT,
                  image: IMAGE,
                  args: ['/helloworld', 'agent', `--cluster-name=${cluster.name}`, `--addon-namespace=${ns}`],
                  env: [{ name: 'GREETING', value: `${greeting}, ${cluster.name}` }],
                },
              ],
            },
          },
        },
      },
    ];
    return objects.map((o) => JSON.stringify(o));
  },

  approveCsr(cluster, addon, csr) {
    if (csr.signerName !== 'kubernetes.io/kube-apiserver-client') {
      return { tag: 'deny', val: `hello-js registers no signer ${csr.signerName}` };
    }
    const user = agentUser(cluster.name, addon.name);
    if (csr.commonName !== user) {
      return { tag: 'deny', val: `common name ${csr.commonName} is not the agent user ${user}` };
    }
    // Exactly the agent's groups, in any order: every organization is a group the
    // certificate carries on the hub, so one more would be one more identity.
    const groups = agentGroups(cluster.name, addon.name);
    const sameGroups =
      csr.organizations.every((o) => groups.includes(o)) && groups.every((g) => csr.organizations.includes(g));
    if (!sameGroups) {
      return { tag: 'deny', val: `organizations ${csr.organizations} are not exactly the agent groups ${groups}` };
    }
    if (csr.organizationalUnits.length > 0) {
      return { tag: 'deny', val: `organizational units ${csr.organizationalUnits} are not registered` };
    }
    const prefix = `system:open-cluster-management:${cluster.name}:`;
    const agent = csr.username.startsWith(prefix) ? csr.username.slice(prefix.length) : '';
    if (agent === '' || agent.includes(':')) {
      return { tag: 'deny', val: `requested by ${csr.username}, not by cluster ${cluster.name}'s agent` };
    }
    return { tag: 'approve' };
  },

  hubPermissions(cluster, addon) {
    const name = `open-cluster-management:${addon.name}:agent`;
    return [
      {
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'Role',
        metadata: { name, namespace: cluster.name },
        rules: [{ apiGroups: [''], resources: ['configmaps'], verbs: ['get', 'list', 'watch'] }],
      },
      {
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'RoleBinding',
        metadata: { name, namespace: cluster.name },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name },
        subjects: [{ kind: 'Group', apiGroup: 'rbac.authorization.k8s.io', name: agentGroups(cluster.name, addon.name)[0] }],
      },
    ].map((o) => JSON.stringify(o));
  },

  probeHealth(cluster, addon, fields) {
    const ready = fields.find((f) => f.name === 'ReadyReplicas' && f.value.tag === 'integer');
    if (!ready) return { status: 'unknown', message: 'no ReadyReplicas feedback yet' };
    // s64 values arrive as BigInt.
    return Number(ready.value.val) >= 1
      ? { status: 'available', message: `${ready.value.val} ready replicas` }
      : { status: 'unavailable', message: 'the agent has no ready replicas' };
  },
};
