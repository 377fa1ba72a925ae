// What client-node's KubeConfig module (dist/config.js) imports from its generated index
// ('./gen/index.js'), and nothing else: slim-load.ts points that import here. The index itself
// re-exports every API group and model of Kubernetes (see api-client.ts).
export { createConfiguration } from '@kubernetes/client-node/dist/gen/configuration.js';
export { ServerConfiguration } from '@kubernetes/client-node/dist/gen/servers.js';
