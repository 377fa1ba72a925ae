// What the controllers need from the configuration: the run engine's settings (they build the
// same sandbox pods) plus their own, all Picks of Config (src/config), declared once.
import type { Config } from '../config/index.js';
import type { RunEngineOptions } from '../runs/options.js';

export type ControllerOptions = RunEngineOptions &
  Pick<
    Config,
    | 'defaultTimeoutSeconds'
    | 'ttlSecondsAfterFinished'
    | 'maxTtlSecondsAfterFinished'
    | 'resyncSeconds'
    | 'sessionMaxIdleTimeoutSeconds'
    | 'sessionMaxLifetimeSeconds'
    | 'maxFileBytes'
    | 'warmPoolMin'
    | 'warmPoolMax'
    | 'packagesTimeoutSeconds'
    | 'userMaxSessions'
  > & {
    /** Unique per process: recorded on the runs this process executes. */
    readonly identity: string;
  };
