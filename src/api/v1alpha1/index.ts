// Public surface of the codemode.dev/v1alpha1 API. Import from here, not from the files.
export * from './sandboxrun.js';
export * from './sandboxsession.js';
export * from './conditions.js';
export * from './labels.js';
export * from './field-managers.js';
export * from './owner.js';
export * from './crd.js';
export * from './storage.js';
export * from './sandbox-checks.js';
export * from './upstreamserver.js';
export * from './upstreamserver-crd.js';
export * from './sandboxprofile.js';
export * from './sandboxprofile-crd.js';
export * from './upstreamserver-stdio.js';
export * from './packages.js';
