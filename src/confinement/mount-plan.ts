/** What a confined process sees: binds, links, throwaway overlays and a disk image (the launcher turns a plan into mounts). */

export interface Bind {
  src: string;
  dest?: string;
  rw?: boolean;
  /** A small read-only file that never changes while shown: copied in (no host path in the mount table). */
  copy?: boolean;
  /** A writable folder of unix sockets the platform connects to: a plain bind (see ServiceBind). */
  sockets?: boolean;
  /**
   * A folder of the platform's own that holds `src`: the rest of the path is resolved without
   * following links when it is mounted (deployed code writes what lies below some of these).
   */
  beneath?: string;
}

export interface MountPlan {
  binds: Bind[];
  symlinks: Array<{ link: string; target: string }>;
  /** Host folders shown writable through a throwaway overlay layer (never written themselves). */
  overlays?: Array<{ lower: string; dest: string }>;
  /** An ext4 image shown writable at `dest` (a folder with a hard size: the state folder). */
  disk?: { image: string; dest: string } | null;
}
