// What the controller needs from the configuration: a Pick of Config (src/config), so the
// controller's settings are declared once, where they are parsed.
import type { Config } from '../config/index.js';

export type ControllerOptions = Pick<
  Config,
  | 'namespace'
  | 'images'
  | 'imagePullPolicy'
  | 'defaultTimeoutSeconds'
  | 'maxTimeoutSeconds'
  | 'maxCodeBytes'
  | 'outputCapChars'
  | 'outputCapBytes'
  | 'defaultCpu'
  | 'defaultMemory'
  | 'maxCpu'
  | 'maxMemory'
  | 'cpuRequest'
  | 'memoryRequest'
  | 'ephemeralStorageLimit'
  | 'workspaceSizeLimit'
  | 'tmpSizeLimit'
  | 'ttlSecondsAfterFinished'
  | 'maxTtlSecondsAfterFinished'
  | 'podStartupTimeoutSeconds'
  | 'resyncSeconds'
  | 'runtimeClassName'
  | 'acceptUnenforced'
  | 'sessionMaxIdleTimeoutSeconds'
  | 'sessionMaxLifetimeSeconds'
  | 'maxFileBytes'
  | 'warmPoolMin'
  | 'warmPoolMax'
> & {
  /** Unique per process: recorded on the runs this process executes. */
  readonly identity: string;
};
