// The child process gateway-process.ts starts: like the image's entry point (src/entry.ts) it
// registers the hook that shapes what client-node loads (its API groups, models, auth plug-ins and
// Node's own undici for its requests) before the replica's modules are linked, so fault tests and
// the bench's "as deployed" rows run the transport a deployed gateway runs.
import { loadOnlyUsedClientNode } from '../../../../src/kube/slim-load.js';

loadOnlyUsedClientNode();
await import('./gateway-replica.js');
