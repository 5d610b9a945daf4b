/**
 * @module confinement: "start a confined process", the layer below every feature. Sandboxes (the
 * local driver) and deployments (agent servers, build steps) import only this surface; it imports
 * only node and nothing of any feature.
 *   - cgroups (`cgroupLayout`, `Limits`), the seccomp filter (`buildSeccompFilter`, `archSyscalls`),
 *     the base image (`ensureBaseImage`, `SANDBOX_USER`) and the host check (`checkHost`);
 *   - process trees (`killGroupsAndProcesses` and the /proc readers), descriptor exhaustion;
 *   - the root holder and the command launcher (Perl programs in `perl/`), the egress listener
 *     handover (`receiveListeners`);
 *   - the confined service and its launcher (`Launcher`: a mount plan, limits and argv in, a
 *     running process tree out).
 * @example
 *   const launcher = new Launcher({ isolation: true, scratchRoot, baseCacheDir });
 *   const p = await launcher.launch({ id, uid, limits, plan, argv, env, cwd });
 */
export { SANDBOX_USER, ensureBaseImage } from "./base-image.ts";
export { BWRAP_NAMESPACES } from "./bwrap-namespaces.ts";
export { formatExt4 } from "./ext4-image.ts";
export { cgroupLayout, type CgroupLayout, type Limits } from "./cgroups.ts";
export { isOutOfDescriptors, retryOutOfDescriptors } from "./descriptors.ts";
export { checkHost, HostNotReady } from "./host-check.ts";
export { Launcher, ownFolder, type Launched, type LaunchSpec } from "./launcher.ts";
export { ENTER_ENV_FD, enterArgs, enterEnvironment, holderArgs, releaseHolder } from "./launchers.ts";
export { receiveListeners } from "./listener-handover.ts";
export { perlArgs, PERL_FILES, PERL_DIR, type PerlProgram } from "./perl-programs.ts";
export type { Bind, MountPlan } from "./mount-plan.ts";
export type { CapturedNetwork } from "./network.ts";
export {
  childrenOf,
  descendantsOf,
  isAlive,
  killGroupsAndProcesses,
  namespacePid,
  procRef,
  type ProcRef,
} from "./proc.ts";
export { archSyscalls, buildSeccompFilter, type LauncherSyscalls } from "./seccomp.ts";
