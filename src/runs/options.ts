// The settings the run engine reads, as a Pick of the configuration (src/config documents each).
import type { Config } from '../config/index.js';
import type { SandboxPlacement } from '../sandbox/pod.js';

/** The settings the run engine reads (src/config documents each). */
export type RunEngineOptions = Pick<
  Config,
  | 'namespace'
  | 'images'
  | 'imagePullPolicy'
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
  | 'workspaceMedium'
  | 'tmpSizeLimit'
  | 'podStartupTimeoutSeconds'
  | 'runtimeClassName'
  | 'acceptUnenforced'
> &
  // A run's profile adds where its pod may run (SandboxProfile nodeSelector, tolerations).
  SandboxPlacement;
