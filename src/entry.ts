// The gateway process's entry point (the image runs dist/src/entry.js): registers the hook that
// keeps client-node's unused API groups out of memory (kube/slim-load.ts) before main.ts and
// everything it imports are linked, which is why main.ts is imported dynamically.
import { loadOnlyUsedClientNode } from './kube/slim-load.js';

loadOnlyUsedClientNode();
await import('./main.js');
